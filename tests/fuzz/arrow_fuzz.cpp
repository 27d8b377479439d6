// libFuzzer target for the Arrow C data / C stream import (arrow::import_array, import_stream)
// and what the diff and the fingerprint then read through the imported views.
//
// The input drives a producer: a schema tree (every supported format, dictionaries, lists,
// structs, and now and then a malformed format string) and, for it, arrays whose buffers are as
// large as the C data interface says a consumer may assume (from length + offset, the last
// offset of a string array, the variadic sizes of a view array). What the producer lies about is
// everything else: offsets that decrease or point past the child, dictionary indices out of
// range, view buffer indices, struct children shorter than the struct, null buffer pointers,
// negative lengths, offsets and null counts, wrong buffer and child counts, missing
// dictionaries. The import must reject what it cannot read safely with backfill::InvalidInput;
// whatever it accepts, the fingerprint, a self-diff, render, take and buffer_bytes must read
// without a sanitizer report. Any exception other than a backfill::Error is a finding too.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "arrow/values.hpp"
#include "backfill/arrow.hpp"
#include "backfill/diff.hpp"
#include "backfill/error.hpp"
#include "backfill/fingerprint.hpp"

namespace {

namespace A = backfill::arrow;

// A type to produce, independent of the C structs so that several batches share it.
struct Spec {
  std::string format;
  char kind = 'f';  // f fixed, b bool, n null, s string, S large string, v view, l list,
                    // L large list, t struct, x unknown format
  int width = 0;    // bytes per value of a fixed-width type
  std::string name;
  bool nullable = true;
  std::vector<Spec> children;
  std::unique_ptr<Spec> dictionary;
};

struct Fixed {
  const char* format;
  int width;
};
constexpr Fixed kFixed[] = {{"c", 1},
                            {"C", 1},
                            {"s", 2},
                            {"S", 2},
                            {"i", 4},
                            {"I", 4},
                            {"l", 8},
                            {"L", 8},
                            {"e", 2},
                            {"f", 4},
                            {"g", 8},
                            {"tdD", 4},
                            {"tdm", 8},
                            {"tts", 4},
                            {"ttm", 4},
                            {"ttu", 8},
                            {"ttn", 8},
                            {"tss:", 8},
                            {"tsm:UTC", 8},
                            {"tsu:Europe/Berlin", 8},
                            {"tsn:Not/A_Zone", 8},
                            {"tDs", 8},
                            {"tDn", 8}};
constexpr const char* kIndexFormats[] = {"c", "C", "s", "S", "i", "I", "l", "L"};
constexpr int kIndexWidths[] = {1, 1, 2, 2, 4, 4, 8, 8};

// Owns everything the producer hands out; the release callbacks only mark things released.
class Producer {
 public:
  explicit Producer(FuzzedDataProvider& in) : in_(in) {}

  Spec spec(int depth) {
    Spec s;
    s.name = in_.ConsumeBool() ? std::string(1, static_cast<char>('a' + names_++ % 26)) : "k";
    s.nullable = in_.ConsumeBool();
    const int pick = in_.ConsumeIntegralInRange(0, depth > 2 ? 9 : 13);
    switch (pick) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const auto& f = kFixed[in_.ConsumeIntegralInRange<std::size_t>(0, std::size(kFixed) - 1)];
        s.format = f.format;
        s.width = f.width;
        // Dictionary-encoded now and then (an exhausted input reads 0s: then never, so that
        // the recursion ends).
        if (depth < 3 && in_.ConsumeIntegralInRange(0, 7) == 7) {
          const auto k = in_.ConsumeIntegralInRange<std::size_t>(0, 7);
          s.dictionary = std::make_unique<Spec>(spec(depth + 1));
          s.format = kIndexFormats[k];
          s.width = kIndexWidths[k];
        }
        break;
      }
      case 4:
        s.kind = 'b';
        s.format = "b";
        break;
      case 5:
        s.kind = 'n';
        s.format = "n";
        break;
      case 6:
        s.kind = 's';
        s.format = in_.ConsumeBool() ? "u" : "z";
        break;
      case 7:
        s.kind = 'S';
        s.format = in_.ConsumeBool() ? "U" : "Z";
        break;
      case 8:
        s.kind = 'v';
        s.format = in_.ConsumeBool() ? "vu" : "vz";
        break;
      case 9: {
        if (in_.ConsumeBool()) {
          s.format = "w:" + std::to_string(in_.ConsumeIntegralInRange(-1, 40));
          s.width = std::atoi(s.format.c_str() + 2);
        } else {
          s.format = "d:" + std::to_string(in_.ConsumeIntegralInRange(-2, 40)) + "," +
                     std::to_string(in_.ConsumeIntegralInRange(-40, 40));
          s.width = 16;
        }
        if (s.width <= 0) s.kind = 'x';
        break;
      }
      case 10:
        s.kind = 'l';
        s.format = "+l";
        s.children.push_back(spec(depth + 1));
        break;
      case 11:
        s.kind = 'L';
        s.format = "+L";
        s.children.push_back(spec(depth + 1));
        break;
      case 12:
        s.kind = 't';
        s.format = "+s";
        s.children = specs(depth + 1);
        break;
      default:
        s.kind = 'x';
        s.format = in_.ConsumeRandomLengthString(12);
        break;
    }
    return s;
  }

  std::vector<Spec> specs(int depth) {
    std::vector<Spec> out;
    const int n = in_.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < n; ++i) out.push_back(spec(depth));
    return out;
  }

  ArrowSchema* schema(const Spec& s) {
    auto& out = schemas_.emplace_back();
    out.format = keep(s.format);
    out.name = keep(s.name);
    out.flags = s.nullable ? ARROW_FLAG_NULLABLE : 0;
    auto& kids = pointers_.emplace_back();
    for (const auto& c : s.children) kids.push_back(schema(c));
    out.n_children = static_cast<std::int64_t>(kids.size());
    out.children = kids.data();
    if (s.dictionary) out.dictionary = schema(*s.dictionary);
    out.release = [](ArrowSchema* x) { x->release = nullptr; };
    // A malformed schema node now and then. Counts stay true to the pointer arrays (a consumer
    // cannot check them: they are the arrays' only length), so an extra child is a real one.
    switch (lie()) {
      case 1:
        kids.push_back(schema(Spec{"l", 'f', 8, "extra", true, {}, nullptr}));
        out.n_children = static_cast<std::int64_t>(kids.size());
        out.children = kids.data();
        break;
      case 2:
        if (out.n_children > 0) out.children = nullptr;
        break;
      case 3:
        if (out.n_children > 0) kids[0] = nullptr;
        break;
      case 4: out.format = nullptr; break;
      case 5: out.n_children = -1; break;
      default: break;
    }
    return &out;
  }

  // An array of `s` with `length` slots after `offset`; nullptr when the input asks for a
  // buffer too large to hand out honestly.
  ArrowArray* array(const Spec& s, std::int64_t length, int depth) {
    const std::int64_t offset = in_.ConsumeIntegralInRange<std::int64_t>(0, 9);
    const std::int64_t slots = offset + length;
    auto& out = arrays_.emplace_back();
    out.length = length;
    out.offset = offset;
    auto& bufs = buffer_lists_.emplace_back();
    auto& kids = array_lists_.emplace_back();

    // Validity bitmap: absent, or random bits with a null count that is right, unknown or wrong.
    const void* validity = nullptr;
    out.null_count = 0;
    if (in_.ConsumeBool()) {
      auto* bits = bytes((slots + 7) / 8, false);
      validity = bits;
      std::int64_t nulls = 0;
      for (std::int64_t i = 0; i < length; ++i) {
        const auto j = static_cast<std::uint64_t>(offset + i);
        nulls += ((bits[j >> 3] >> (j & 7)) & 1) ? 0 : 1;
      }
      const int mode = in_.ConsumeIntegralInRange(0, 3);
      out.null_count = mode == 0   ? -1
                       : mode == 3 ? in_.ConsumeIntegralInRange<std::int64_t>(-3, 9)
                                   : nulls;
    } else if (in_.ConsumeIntegralInRange(0, 15) == 15) {
      out.null_count = in_.ConsumeIntegralInRange<std::int64_t>(-2, 5);  // nulls, but no bitmap
    }

    const bool honest = in_.ConsumeIntegralInRange(0, 3) != 0;
    switch (s.kind) {
      case 'n': break;
      case 'x': bufs = {validity, bytes(slots * 8, false)}; break;  // the import must refuse it
      case 'f': {
        if (s.width <= 0 || slots * s.width > (1 << 20)) return nullptr;
        bufs = {validity, bytes(slots * s.width, false)};
        if (s.dictionary) {
          const std::int64_t dict_len = in_.ConsumeIntegralInRange<std::int64_t>(0, 12);
          auto* values = const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(bufs[1]));
          if (honest) {  // indices within the dictionary, little-endian, any width
            for (std::int64_t i = 0; i < slots; ++i) {
              const auto k = static_cast<std::uint64_t>(
                  dict_len == 0 ? 0 : in_.ConsumeIntegralInRange<std::int64_t>(0, dict_len - 1));
              std::memset(values + i * s.width, 0, static_cast<std::size_t>(s.width));
              std::memcpy(values + i * s.width, &k, 1);
            }
          }
          out.dictionary = array(*s.dictionary, dict_len, depth + 1);
          if (out.dictionary == nullptr) return nullptr;
        }
        break;
      }
      case 'b': bufs = {validity, bytes((slots + 7) / 8, false)}; break;
      case 's':
      case 'S': {
        const bool large = s.kind == 'S';
        const std::size_t w = large ? 8 : 4;
        auto* offs = bytes((slots + 1) * static_cast<std::int64_t>(w), true);
        std::int64_t last = 0;
        for (std::int64_t i = 0; i <= slots; ++i) {
          std::int64_t v = honest ? last + in_.ConsumeIntegralInRange<std::int64_t>(0, 9)
                                  : in_.ConsumeIntegralInRange<std::int64_t>(-4, 64);
          if (honest && i == 0) v = in_.ConsumeIntegralInRange<std::int64_t>(0, 3);
          last = v;
          if (large) {
            std::memcpy(offs + i * 8, &v, 8);
          } else {
            const auto v32 = static_cast<std::int32_t>(v);
            std::memcpy(offs + i * 4, &v32, 4);
          }
        }
        bufs = {validity, offs, bytes(last > 0 ? last : 0, false)};
        break;
      }
      case 'v': {
        const int n_data = in_.ConsumeIntegralInRange(0, 2);
        std::vector<std::int64_t> sizes;
        bufs = {validity, nullptr};
        for (int k = 0; k < n_data; ++k) {
          sizes.push_back(in_.ConsumeIntegralInRange<std::int64_t>(0, 40));
          bufs.push_back(bytes(sizes.back(), false));
        }
        auto* views = bytes(slots * 16, !honest);
        for (std::int64_t i = 0; honest && i < slots; ++i) {
          std::int32_t len = in_.ConsumeIntegralInRange<std::int32_t>(0, 20);
          auto* v = views + i * 16;
          if (len > 12 && n_data == 0) len = 12;
          std::memcpy(v, &len, 4);
          if (len <= 12) {
            in_.ConsumeData(v + 4, static_cast<std::size_t>(len));
          } else {
            const auto buf = in_.ConsumeIntegralInRange<std::int32_t>(0, n_data - 1);
            const auto size = static_cast<std::int32_t>(sizes[static_cast<std::size_t>(buf)]);
            if (len > size) len = size;
            const auto off = in_.ConsumeIntegralInRange<std::int32_t>(0, size - len);
            std::memcpy(v, &len, 4);
            std::memcpy(v + 8, &buf, 4);
            std::memcpy(v + 12, &off, 4);
          }
        }
        bufs[1] = views;
        auto* size_buf = bytes(static_cast<std::int64_t>(sizes.size()) * 8, true);
        if (!sizes.empty()) std::memcpy(size_buf, sizes.data(), sizes.size() * 8);
        bufs.push_back(size_buf);
        break;
      }
      case 'l':
      case 'L': {
        const bool large = s.kind == 'L';
        const std::int64_t child_len = in_.ConsumeIntegralInRange<std::int64_t>(0, 24);
        auto* offs = bytes((slots + 1) * (large ? 8 : 4), true);
        std::int64_t last = 0;
        for (std::int64_t i = 0; i <= slots; ++i) {
          std::int64_t v = honest ? in_.ConsumeIntegralInRange<std::int64_t>(last, child_len)
                                  : in_.ConsumeIntegralInRange<std::int64_t>(-4, 40);
          if (honest && i < offset) v = 0;
          last = v;
          if (large) {
            std::memcpy(offs + i * 8, &v, 8);
          } else {
            const auto v32 = static_cast<std::int32_t>(v);
            std::memcpy(offs + i * 4, &v32, 4);
          }
        }
        bufs = {validity, offs};
        kids.push_back(array(s.children.at(0), child_len, depth + 1));
        if (kids.back() == nullptr) return nullptr;
        break;
      }
      case 't': {
        bufs = {validity};
        for (const auto& c : s.children) {
          const std::int64_t len = honest ? slots + in_.ConsumeIntegralInRange<std::int64_t>(0, 2)
                                          : in_.ConsumeIntegralInRange<std::int64_t>(0, 12);
          kids.push_back(array(c, len, depth + 1));
          if (kids.back() == nullptr) return nullptr;
        }
        break;
      }
      default: break;
    }
    out.n_buffers = static_cast<std::int64_t>(bufs.size());
    out.buffers = bufs.data();
    out.n_children = static_cast<std::int64_t>(kids.size());
    out.children = kids.data();
    out.release = [](ArrowArray* x) { x->release = nullptr; };
    switch (lie()) {  // a malformed array node now and then
      case 1: out.length = -1 - out.length; break;
      case 2: out.offset = -1; break;
      case 3:  // a buffer too many or too few (views have any number: theirs stays true)
        if (s.kind == 'v') break;
        if (in_.ConsumeBool()) {
          bufs.push_back(nullptr);
          out.buffers = bufs.data();
        }
        out.n_buffers = static_cast<std::int64_t>(bufs.size()) - (in_.ConsumeBool() ? 1 : 0);
        break;
      case 4:  // one child more than the schema has (a null one, in case the schema lies too)
        kids.push_back(nullptr);
        out.n_children = static_cast<std::int64_t>(kids.size());
        out.children = kids.data();
        break;
      case 5:
        if (out.n_buffers > 0) out.buffers = nullptr;
        break;
      case 6:
        if (out.n_buffers > 1) bufs[1] = nullptr;
        break;
      case 7:
        if (out.n_children > 0) out.children = nullptr;
        break;
      case 8:
        if (out.n_children > 0) kids[0] = nullptr;
        break;
      case 9: out.dictionary = nullptr; break;
      // Only an offset + length past INT64_MAX betrays a huge length or offset: the C interface
      // gives no buffer sizes, so a consumer must trust any length that does not overflow.
      case 10:
        out.offset = INT64_MAX - 1;
        out.length = length + 2;
        break;
      case 11:
        out.length = INT64_MAX;
        out.offset = offset + 1;
        break;
      default: break;
    }
    return &out;
  }

 private:
  // 0 most of the time, else which lie to tell.
  int lie() {
    return in_.ConsumeIntegralInRange(0, 15) == 15 ? in_.ConsumeIntegralInRange(1, 11) : 0;
  }

  const char* keep(const std::string& s) { return strings_.emplace_back(s).c_str(); }

  // A heap buffer of exactly n bytes (ASan sees any read past it), from the input or zeros.
  std::uint8_t* bytes(std::int64_t n, bool zeros) {
    auto& b = storage_.emplace_back(new std::uint8_t[static_cast<std::size_t>(n > 0 ? n : 1)]);
    const auto size = static_cast<std::size_t>(n > 0 ? n : 0);
    std::memset(b.get(), 0, size);
    if (!zeros) in_.ConsumeData(b.get(), size);
    return b.get();
  }

  FuzzedDataProvider& in_;
  int names_ = 0;
  std::deque<ArrowSchema> schemas_;
  std::deque<ArrowArray> arrays_;
  std::deque<std::vector<ArrowSchema*>> pointers_;
  std::deque<std::vector<const void*>> buffer_lists_;
  std::deque<std::vector<ArrowArray*>> array_lists_;
  std::deque<std::string> strings_;
  std::deque<std::unique_ptr<std::uint8_t[]>> storage_;
};

// A C stream over prepared batches; get_schema hands out the prepared schema once.
struct Stream {
  ArrowSchema* schema;
  std::vector<ArrowArray*> batches;
  std::size_t next = 0;
  int fail_at = -1;
};

void exercise(const A::ImportedTable& t) {
  (void)t.buffer_bytes();
  backfill::fingerprint::Options fo;
  fo.threads = 1;
  for (const auto& f : t.fields()) {
    const auto id = f.type.logical().id;
    if (id == A::TypeId::date32 || id == A::TypeId::timestamp) {
      fo.partition_by = f.name;
      break;
    }
  }
  try {
    (void)backfill::fingerprint::fingerprint(t, fo);
  } catch (const backfill::Error&) {
  }
  std::vector<A::RowRef> rows;
  for (std::size_t b = 0; b < t.batches().size(); ++b) {
    for (std::int64_t r = 0; r < t.batches()[b].num_rows(); ++r) {
      rows.push_back({static_cast<std::int32_t>(b), r});
    }
  }
  rows.push_back({0, -1});  // a null row
  for (std::size_t c = 0; c < t.fields().size(); ++c) {
    for (const auto& batch : t.batches()) {
      for (std::int64_t r = 0; r < batch.num_rows(); ++r) {
        try {
          (void)backfill::detail::render(batch.column(c), r);
        } catch (const backfill::Error&) {
        }
      }
    }
    try {
      (void)A::take_column(t, c, rows);
    } catch (const backfill::Error&) {
    }
  }
  if (!t.fields().empty()) {
    backfill::diff::Options o;
    o.key = {t.fields()[0].name};
    o.threads = 1;
    o.on_duplicate = backfill::diff::OnDuplicate::report;
    o.partition_by = fo.partition_by;
    try {
      (void)backfill::diff::diff(t, t, o);
    } catch (const backfill::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Producer p(in);
  Spec root;
  root.kind = 't';
  root.format = "+s";
  root.children = p.specs(0);
  const bool via_stream = in.ConsumeBool();
  const int n_batches = via_stream ? in.ConsumeIntegralInRange(0, 3) : 1;
  ArrowSchema* schema = p.schema(root);
  std::vector<ArrowArray*> batches;
  for (int i = 0; i < n_batches; ++i) {
    batches.push_back(p.array(root, in.ConsumeIntegralInRange<std::int64_t>(0, 16), 0));
    if (batches.back() == nullptr) return 0;
  }
  A::ImportedTable table;
  try {
    if (via_stream) {
      Stream st{schema, batches, 0, in.ConsumeIntegralInRange(-1, 3)};
      ArrowArrayStream s{};
      s.private_data = &st;
      s.get_schema = [](ArrowArrayStream* x, ArrowSchema* out) {
        auto* st = static_cast<Stream*>(x->private_data);
        if (st->fail_at == 0) return 5;
        *out = *st->schema;
        return 0;
      };
      s.get_next = [](ArrowArrayStream* x, ArrowArray* out) {
        auto* st = static_cast<Stream*>(x->private_data);
        if (st->fail_at == static_cast<int>(st->next) + 1) return 5;
        if (st->next == st->batches.size()) {
          std::memset(out, 0, sizeof(*out));  // end of stream: release is null
          return 0;
        }
        *out = *st->batches[st->next++];
        return 0;
      };
      s.get_last_error = [](ArrowArrayStream*) -> const char* { return "fuzzed failure"; };
      s.release = [](ArrowArrayStream* x) { x->release = nullptr; };
      table = A::import_stream(&s);
    } else {
      table = A::import_array(schema, batches[0]);
    }
  } catch (const backfill::Error&) {
    return 0;
  }
  exercise(table);
  return 0;
}
