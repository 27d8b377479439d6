// Arrow types, format strings and the import side of the C data / C stream interfaces.
#include "backfill/arrow.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "arrow/validate.hpp"
#include "backfill/error.hpp"

namespace backfill::arrow {

DataType make_type(TypeId id) {
  DataType t;
  t.id = id;
  return t;
}

DataType timestamp_type(TimeUnit unit, std::string tz) {
  DataType t = make_type(TypeId::timestamp);
  t.unit = unit;
  t.tz = std::move(tz);
  return t;
}

DataType list_type(DataType value) {
  DataType t = make_type(TypeId::list);
  t.children.push_back(Field{"item", std::move(value), true});
  return t;
}

bool is_signed_integer(TypeId id) noexcept {
  return id == TypeId::int8 || id == TypeId::int16 || id == TypeId::int32 || id == TypeId::int64;
}
bool is_unsigned_integer(TypeId id) noexcept {
  return id == TypeId::uint8 || id == TypeId::uint16 || id == TypeId::uint32 ||
         id == TypeId::uint64;
}
bool is_integer(TypeId id) noexcept { return is_signed_integer(id) || is_unsigned_integer(id); }
bool is_floating(TypeId id) noexcept {
  return id == TypeId::float16 || id == TypeId::float32 || id == TypeId::float64;
}
bool is_string_like(TypeId id) noexcept {
  switch (id) {
    case TypeId::utf8:
    case TypeId::large_utf8:
    case TypeId::utf8_view:
    case TypeId::binary:
    case TypeId::large_binary:
    case TypeId::binary_view:
    case TypeId::fixed_binary: return true;
    default: return false;
  }
}

int fixed_width(const DataType& type) noexcept {
  switch (type.id) {
    case TypeId::int8:
    case TypeId::uint8: return 1;
    case TypeId::int16:
    case TypeId::uint16:
    case TypeId::float16: return 2;
    case TypeId::int32:
    case TypeId::uint32:
    case TypeId::float32:
    case TypeId::date32:
    case TypeId::time32: return 4;
    case TypeId::int64:
    case TypeId::uint64:
    case TypeId::float64:
    case TypeId::date64:
    case TypeId::time64:
    case TypeId::timestamp:
    case TypeId::duration: return 8;
    case TypeId::decimal128: return 16;
    case TypeId::fixed_binary: return type.byte_width;
    default: return 0;
  }
}

namespace {

char unit_char(TimeUnit u) noexcept {
  switch (u) {
    case TimeUnit::second: return 's';
    case TimeUnit::milli: return 'm';
    case TimeUnit::micro: return 'u';
    case TimeUnit::nano: return 'n';
  }
  return 's';
}
std::string_view unit_name(TimeUnit u) noexcept {
  switch (u) {
    case TimeUnit::second: return "s";
    case TimeUnit::milli: return "ms";
    case TimeUnit::micro: return "us";
    case TimeUnit::nano: return "ns";
  }
  return "s";
}

std::string_view simple_name(TypeId id) noexcept {
  switch (id) {
    case TypeId::null: return "null";
    case TypeId::boolean: return "bool";
    case TypeId::int8: return "int8";
    case TypeId::int16: return "int16";
    case TypeId::int32: return "int32";
    case TypeId::int64: return "int64";
    case TypeId::uint8: return "uint8";
    case TypeId::uint16: return "uint16";
    case TypeId::uint32: return "uint32";
    case TypeId::uint64: return "uint64";
    case TypeId::float16: return "float16";
    case TypeId::float32: return "float32";
    case TypeId::float64: return "float64";
    case TypeId::decimal128: return "decimal128";
    case TypeId::utf8: return "utf8";
    case TypeId::large_utf8: return "large_utf8";
    case TypeId::utf8_view: return "string_view";
    case TypeId::binary: return "binary";
    case TypeId::large_binary: return "large_binary";
    case TypeId::binary_view: return "binary_view";
    case TypeId::fixed_binary: return "fixed_size_binary";
    case TypeId::date32: return "date32";
    case TypeId::date64: return "date64";
    case TypeId::time32: return "time32";
    case TypeId::time64: return "time64";
    case TypeId::timestamp: return "timestamp";
    case TypeId::duration: return "duration";
    case TypeId::list: return "list";
    case TypeId::large_list: return "large_list";
    case TypeId::struct_: return "struct";
  }
  return "?";
}

std::int32_t parse_int(std::string_view s, std::string_view format) {
  std::int32_t v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc{} || p != end) {
    throw InvalidInput(fmt::format("malformed Arrow format string '{}'", format));
  }
  return v;
}

TimeUnit parse_unit(char c, std::string_view format) {
  switch (c) {
    case 's': return TimeUnit::second;
    case 'm': return TimeUnit::milli;
    case 'u': return TimeUnit::micro;
    case 'n': return TimeUnit::nano;
    default: throw InvalidInput(fmt::format("malformed Arrow format string '{}'", format));
  }
}

// Parses one schema node (format, children, dictionary) into a DataType.
DataType parse_schema(const ArrowSchema& s, std::string_view path);

DataType parse_format(std::string_view f, const ArrowSchema& s, std::string_view path) {
  auto unsupported = [&]() -> InvalidInput {
    return InvalidInput(fmt::format(
        "column '{}' has Arrow type format '{}', which backfill does not support (supported: "
        "integers, floats, decimal128, bool, strings, binary, date, time, timestamp, duration, "
        "null, dictionary, list, struct)",
        path, f));
  };
  if (f.size() == 1) {
    switch (f[0]) {
      case 'n': return make_type(TypeId::null);
      case 'b': return make_type(TypeId::boolean);
      case 'c': return make_type(TypeId::int8);
      case 'C': return make_type(TypeId::uint8);
      case 's': return make_type(TypeId::int16);
      case 'S': return make_type(TypeId::uint16);
      case 'i': return make_type(TypeId::int32);
      case 'I': return make_type(TypeId::uint32);
      case 'l': return make_type(TypeId::int64);
      case 'L': return make_type(TypeId::uint64);
      case 'e': return make_type(TypeId::float16);
      case 'f': return make_type(TypeId::float32);
      case 'g': return make_type(TypeId::float64);
      case 'z': return make_type(TypeId::binary);
      case 'Z': return make_type(TypeId::large_binary);
      case 'u': return make_type(TypeId::utf8);
      case 'U': return make_type(TypeId::large_utf8);
      default: throw unsupported();
    }
  }
  if (f == "vu") return make_type(TypeId::utf8_view);
  if (f == "vz") return make_type(TypeId::binary_view);
  if (f.starts_with("d:")) {
    auto rest = f.substr(2);
    auto c1 = rest.find(',');
    if (c1 == std::string_view::npos) throw unsupported();
    auto c2 = rest.find(',', c1 + 1);
    if (c2 != std::string_view::npos && rest.substr(c2 + 1) != "128") throw unsupported();
    DataType t = make_type(TypeId::decimal128);
    t.precision = parse_int(rest.substr(0, c1), f);
    t.scale = parse_int(rest.substr(c1 + 1, c2 == std::string_view::npos ? c2 : c2 - c1 - 1), f);
    return t;
  }
  if (f.starts_with("w:")) {
    DataType t = make_type(TypeId::fixed_binary);
    t.byte_width = parse_int(f.substr(2), f);
    if (t.byte_width <= 0) throw unsupported();
    return t;
  }
  if (f == "tdD") return make_type(TypeId::date32);
  if (f == "tdm") return make_type(TypeId::date64);
  if (f.size() == 3 && f.starts_with("tt")) {
    const TimeUnit u = parse_unit(f[2], f);
    DataType t =
        make_type(u == TimeUnit::second || u == TimeUnit::milli ? TypeId::time32 : TypeId::time64);
    t.unit = u;
    return t;
  }
  if (f.size() >= 4 && f.starts_with("ts") && f[3] == ':') {
    return timestamp_type(parse_unit(f[2], f), std::string(f.substr(4)));
  }
  if (f.size() == 3 && f.starts_with("tD")) {
    DataType t = make_type(TypeId::duration);
    t.unit = parse_unit(f[2], f);
    return t;
  }
  if (f == "+l" || f == "+L" || f == "+s") {
    DataType t = make_type(f == "+l"   ? TypeId::list
                           : f == "+L" ? TypeId::large_list
                                       : TypeId::struct_);
    if (t.id != TypeId::struct_ && s.n_children != 1) throw unsupported();
    if (s.n_children < 0 || (s.n_children > 0 && s.children == nullptr)) {
      throw InvalidInput(fmt::format("column '{}': Arrow schema has {} children but no child list",
                                     path, s.n_children));
    }
    for (std::int64_t i = 0; i < s.n_children; ++i) {
      if (s.children[i] == nullptr) {
        throw InvalidInput(fmt::format("column '{}': Arrow schema child {} is null", path, i));
      }
      const ArrowSchema& c = *s.children[i];
      std::string name = c.name != nullptr ? c.name : "";
      DataType ct = parse_schema(c, path.empty() ? name : fmt::format("{}.{}", path, name));
      t.children.push_back(
          Field{std::move(name), std::move(ct), (c.flags & ARROW_FLAG_NULLABLE) != 0});
    }
    return t;
  }
  throw unsupported();
}

DataType parse_schema(const ArrowSchema& s, std::string_view path) {
  if (s.format == nullptr) throw InvalidInput(fmt::format("column '{}' has no Arrow format", path));
  DataType t = parse_format(s.format, s, path);
  if (s.dictionary != nullptr) {
    if (!is_integer(t.id)) {
      throw InvalidInput(
          fmt::format("column '{}': dictionary indices of type {} (expected an integer)", path,
                      simple_name(t.id)));
    }
    auto values = std::make_shared<DataType>(parse_schema(*s.dictionary, path));
    if (values->is_dictionary()) {
      throw InvalidInput(fmt::format("column '{}': nested dictionaries are not supported", path));
    }
    t.dictionary = std::move(values);
  }
  return t;
}

// Buffers a layout needs (validity included); -1 = variadic (views).
std::int64_t expected_buffers(TypeId id) noexcept {
  switch (id) {
    case TypeId::null: return 0;
    case TypeId::struct_: return 1;
    case TypeId::utf8:
    case TypeId::large_utf8:
    case TypeId::binary:
    case TypeId::large_binary: return 3;
    case TypeId::utf8_view:
    case TypeId::binary_view: return -1;
    default: return 2;
  }
}

// Shifts a struct's child view (and, for a struct child, its children) by `delta` slots and
// cuts it to `length`: slot i of the child is then slot i of its parent.
void shift_view(ArrayView& v, std::int64_t delta, std::int64_t length) {
  v.offset += delta;
  if (length != v.length || delta != 0) {
    v.length = length;
    if (v.null_count != 0 && v.type->id != TypeId::null) {
      std::int64_t nulls = 0;
      for (std::int64_t i = 0; i < length; ++i) nulls += v.is_valid(i) ? 0 : 1;
      v.null_count = nulls;
    } else if (v.type->id == TypeId::null) {
      v.null_count = length;
    }
  }
  if (v.type->id == TypeId::struct_) {
    for (auto& c : v.children) shift_view(c, delta, length);
  }
}

// A struct child must hold a slot for every slot of its parent, offset included.
void slice_struct_child(ArrayView& child, const ArrowArray& parent, std::string_view path) {
  if (child.length < parent.offset + parent.length) {
    throw InvalidInput(fmt::format(
        "column '{}': Arrow struct child has {} slots, its parent needs {} (offset {} + length {})",
        path, child.length, parent.offset + parent.length, parent.offset, parent.length));
  }
  shift_view(child, parent.offset, parent.length);
}

ArrayView make_view(const ArrowArray& a, const DataType& type, std::string_view path) {
  ArrayView v;
  v.type = &type;
  v.length = a.length;
  v.offset = a.offset;
  v.null_count = a.null_count;
  if (a.length < 0 || a.offset < 0) {
    throw InvalidInput(fmt::format("column '{}': negative Arrow length or offset", path));
  }
  if (a.offset > std::numeric_limits<std::int64_t>::max() - a.length) {
    throw InvalidInput(fmt::format("column '{}': Arrow offset {} + length {} overflows", path,
                                   a.offset, a.length));
  }
  const std::int64_t want = expected_buffers(type.id);
  if ((want >= 0 && a.n_buffers != want) || (want < 0 && a.n_buffers < 3)) {
    throw InvalidInput(fmt::format("column '{}' ({}): Arrow array has {} buffers, expected {}",
                                   path, to_string(type), a.n_buffers, want < 0 ? 3 : want));
  }
  if (a.n_buffers > 0 && a.buffers == nullptr) {
    throw InvalidInput(fmt::format("column '{}': Arrow array has {} buffers but a null buffer list",
                                   path, a.n_buffers));
  }
  v.buffers.assign(a.buffers, a.buffers + a.n_buffers);
  if (type.id == TypeId::null) {
    v.buffers.assign(1, nullptr);
    v.null_count = a.length;
  }
  if (v.null_count == 0) v.buffers[0] = nullptr;  // no need to read the bitmap
  const std::size_t n_children = type.children.size();
  if (static_cast<std::size_t>(a.n_children) != n_children) {
    throw InvalidInput(fmt::format("column '{}': Arrow array has {} children, schema has {}", path,
                                   a.n_children, n_children));
  }
  for (std::size_t i = 0; i < n_children; ++i) {
    const auto child_path = fmt::format("{}.{}", path, type.children[i].name);
    if (a.children == nullptr || a.children[i] == nullptr) {
      throw InvalidInput(fmt::format("column '{}': Arrow array has a null child", child_path));
    }
    v.children.push_back(make_view(*a.children[i], type.children[i].type, child_path));
    // A struct's offset applies to its children too (lists index children through offsets).
    if (type.id == TypeId::struct_) slice_struct_child(v.children.back(), a, child_path);
  }
  if (type.dictionary) {
    if (a.dictionary == nullptr) {
      throw InvalidInput(
          fmt::format("column '{}': dictionary-encoded array without a dictionary", path));
    }
    v.dictionary =
        std::make_shared<const ArrayView>(make_view(*a.dictionary, *type.dictionary, path));
  }
  if (v.null_count < 0) {  // unknown: count it once so consumers can rely on it
    std::int64_t nulls = 0;
    for (std::int64_t i = 0; i < v.length; ++i) nulls += v.is_valid(i) ? 0 : 1;
    v.null_count = nulls;
    if (nulls == 0) v.buffers[0] = nullptr;
  }
  detail::validate_layout(v, path);
  return v;
}

std::shared_ptr<ArrowArray> own_array(ArrowArray* src) {
  auto owned = std::shared_ptr<ArrowArray>(new ArrowArray(*src), [](ArrowArray* a) {  // NOLINT
    if (a->release != nullptr) a->release(a);
    delete a;  // NOLINT
  });
  src->release = nullptr;  // moved
  return owned;
}

struct SchemaGuard {
  ArrowSchema s{};
  ~SchemaGuard() {
    if (s.release != nullptr) s.release(&s);
  }
};

std::vector<Field> fields_of(const ArrowSchema& s) {
  DataType root = parse_schema(s, "");
  if (root.id != TypeId::struct_ || root.is_dictionary()) {
    throw InvalidInput(fmt::format(
        "expected a table (an Arrow struct / record batch), got Arrow type {}", to_string(root)));
  }
  return std::move(root.children);
}

}  // namespace

std::string format_of(const DataType& t) {
  switch (t.id) {
    case TypeId::null: return "n";
    case TypeId::boolean: return "b";
    case TypeId::int8: return "c";
    case TypeId::uint8: return "C";
    case TypeId::int16: return "s";
    case TypeId::uint16: return "S";
    case TypeId::int32: return "i";
    case TypeId::uint32: return "I";
    case TypeId::int64: return "l";
    case TypeId::uint64: return "L";
    case TypeId::float16: return "e";
    case TypeId::float32: return "f";
    case TypeId::float64: return "g";
    case TypeId::decimal128: return fmt::format("d:{},{}", t.precision, t.scale);
    case TypeId::utf8: return "u";
    case TypeId::large_utf8: return "U";
    case TypeId::utf8_view: return "vu";
    case TypeId::binary: return "z";
    case TypeId::large_binary: return "Z";
    case TypeId::binary_view: return "vz";
    case TypeId::fixed_binary: return fmt::format("w:{}", t.byte_width);
    case TypeId::date32: return "tdD";
    case TypeId::date64: return "tdm";
    case TypeId::time32:
    case TypeId::time64: return fmt::format("tt{}", unit_char(t.unit));
    case TypeId::timestamp: return fmt::format("ts{}:{}", unit_char(t.unit), t.tz);
    case TypeId::duration: return fmt::format("tD{}", unit_char(t.unit));
    case TypeId::list: return "+l";
    case TypeId::large_list: return "+L";
    case TypeId::struct_: return "+s";
  }
  return "n";
}

std::string to_string(const DataType& t) {
  if (t.dictionary) {
    return fmt::format("dictionary<values={}, indices={}>", to_string(*t.dictionary),
                       simple_name(t.id));
  }
  switch (t.id) {
    case TypeId::decimal128: return fmt::format("decimal128({}, {})", t.precision, t.scale);
    case TypeId::fixed_binary: return fmt::format("fixed_size_binary[{}]", t.byte_width);
    case TypeId::time32:
    case TypeId::time64:
    case TypeId::duration: return fmt::format("{}[{}]", simple_name(t.id), unit_name(t.unit));
    case TypeId::timestamp:
      return t.tz.empty() ? fmt::format("timestamp[{}]", unit_name(t.unit))
                          : fmt::format("timestamp[{}, tz={}]", unit_name(t.unit), t.tz);
    case TypeId::list:
    case TypeId::large_list:
      return fmt::format("{}<{}>", simple_name(t.id), to_string(t.children.at(0).type));
    case TypeId::struct_: {
      std::string out = "struct<";
      for (std::size_t i = 0; i < t.children.size(); ++i) {
        out += fmt::format("{}{}: {}", i ? ", " : "", t.children[i].name,
                           to_string(t.children[i].type));
      }
      return out + ">";
    }
    default: return std::string(simple_name(t.id));
  }
}

bool operator==(const DataType& a, const DataType& b) noexcept {
  if (a.id != b.id || a.unit != b.unit || a.tz != b.tz || a.precision != b.precision ||
      a.scale != b.scale || a.byte_width != b.byte_width || a.children != b.children) {
    return false;
  }
  if ((a.dictionary == nullptr) != (b.dictionary == nullptr)) return false;
  return a.dictionary == nullptr || *a.dictionary == *b.dictionary;
}

bool operator==(const Field& a, const Field& b) noexcept {
  return a.name == b.name && a.type == b.type && a.nullable == b.nullable;
}

std::int64_t ArrayView::int_at(std::int64_t i) const noexcept {
  switch (type->id) {
    case TypeId::int8: return values<std::int8_t>()[i];
    case TypeId::uint8: return values<std::uint8_t>()[i];
    case TypeId::int16: return values<std::int16_t>()[i];
    case TypeId::uint16: return values<std::uint16_t>()[i];
    case TypeId::int32:
    case TypeId::date32:
    case TypeId::time32: return values<std::int32_t>()[i];
    case TypeId::uint32: return values<std::uint32_t>()[i];
    default: return values<std::int64_t>()[i];
  }
}

double ArrayView::float16_at(std::int64_t i) const noexcept {
  const std::uint16_t h = values<std::uint16_t>()[i];
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v = 0;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

std::string_view ArrayView::bytes_at(std::int64_t i) const noexcept {
  const auto j = offset + i;
  switch (type->id) {
    case TypeId::utf8:
    case TypeId::binary: {
      const auto* offs = static_cast<const std::int32_t*>(buffers[1]);
      const auto* data = static_cast<const char*>(buffers[2]);
      return {data + offs[j], static_cast<std::size_t>(offs[j + 1] - offs[j])};
    }
    case TypeId::large_utf8:
    case TypeId::large_binary: {
      const auto* offs = static_cast<const std::int64_t*>(buffers[1]);
      const auto* data = static_cast<const char*>(buffers[2]);
      return {data + offs[j], static_cast<std::size_t>(offs[j + 1] - offs[j])};
    }
    case TypeId::utf8_view:
    case TypeId::binary_view: {
      // 16-byte views: length, then 12 inline bytes, or a 4-byte prefix, buffer index, offset.
      const auto* view = static_cast<const char*>(buffers[1]) + 16 * j;
      std::int32_t len = 0;
      std::memcpy(&len, view, 4);
      if (len <= 12) return {view + 4, static_cast<std::size_t>(len)};
      std::int32_t buf = 0;
      std::int32_t off = 0;
      std::memcpy(&buf, view + 8, 4);
      std::memcpy(&off, view + 12, 4);
      const auto* data = static_cast<const char*>(buffers[2 + static_cast<std::size_t>(buf)]);
      return {data + off, static_cast<std::size_t>(len)};
    }
    case TypeId::fixed_binary: {
      const auto w = static_cast<std::size_t>(type->byte_width);
      return {static_cast<const char*>(buffers[1]) + w * static_cast<std::size_t>(j), w};
    }
    default: return {};
  }
}

std::size_t ImportedTable::column_index(std::string_view name, std::string_view what) const {
  if (auto i = find_column(name)) return *i;
  std::string names;
  for (const auto& f : root_->children) names += (names.empty() ? "" : ", ") + f.name;
  throw NotFound(fmt::format("{} column '{}' is not in the table (columns: {})", what, name,
                             names.empty() ? "none" : names));
}

std::optional<std::size_t> ImportedTable::find_column(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < root_->children.size(); ++i) {
    if (root_->children[i].name == name) return i;
  }
  return std::nullopt;
}

namespace {
std::int64_t view_bytes(const ArrayView& v) {
  std::int64_t total = v.buffers.empty() || v.buffers[0] == nullptr ? 0 : (v.length + 7) / 8;
  const int w = fixed_width(*v.type);
  if (w > 0) total += v.length * w;
  switch (v.type->id) {
    case TypeId::boolean: total += (v.length + 7) / 8; break;
    case TypeId::utf8:
    case TypeId::binary:
    case TypeId::large_utf8:
    case TypeId::large_binary:
    case TypeId::utf8_view:
    case TypeId::binary_view: {
      const bool large = v.type->id == TypeId::large_utf8 || v.type->id == TypeId::large_binary;
      const bool views = v.type->id == TypeId::utf8_view || v.type->id == TypeId::binary_view;
      total += v.length * (views ? 16 : large ? 8 : 4);
      for (std::int64_t i = 0; i < v.length; ++i) {
        const auto n = static_cast<std::int64_t>(v.bytes_at(i).size());
        total += views && n <= 12 ? 0 : n;
      }
      break;
    }
    case TypeId::list: total += (v.length + 1) * 4; break;
    case TypeId::large_list: total += (v.length + 1) * 8; break;
    default: break;
  }
  for (const auto& c : v.children) total += view_bytes(c);
  if (v.dictionary) total += view_bytes(*v.dictionary);
  return total;
}
}  // namespace

std::int64_t ImportedTable::buffer_bytes() const noexcept {
  std::int64_t total = 0;
  for (const auto& b : batches_) {
    for (std::size_t c = 0; c < root_->children.size(); ++c) total += view_bytes(b.column(c));
  }
  return total;
}

ImportedTable import_stream(ArrowArrayStream* src) {
  if (src == nullptr || src->release == nullptr) {
    throw InvalidInput("the Arrow stream was already consumed (its release callback is null)");
  }
  // Move the stream into a guard so every exit path releases it.
  struct StreamGuard {
    ArrowArrayStream s;
    ~StreamGuard() {
      if (s.release != nullptr) s.release(&s);
    }
  } guard{*src};
  src->release = nullptr;
  ArrowArrayStream& s = guard.s;
  auto fail = [&](int code, std::string_view step) -> InvalidInput {
    const char* msg = s.get_last_error != nullptr ? s.get_last_error(&s) : nullptr;
    return InvalidInput(fmt::format("reading the Arrow stream failed in {} (error {}): {}", step,
                                    code, msg != nullptr ? msg : "no message"));
  };

  ImportedTable table;
  {
    SchemaGuard schema;
    if (int rc = s.get_schema(&s, &schema.s); rc != 0) throw fail(rc, "get_schema");
    table.root_->children = fields_of(schema.s);
  }
  for (;;) {
    ArrowArray raw{};
    if (int rc = s.get_next(&s, &raw); rc != 0) throw fail(rc, "get_next");
    if (raw.release == nullptr) break;  // end of stream
    auto owned = own_array(&raw);
    if (owned->length == 0) continue;
    ArrayView view = make_view(*owned, *table.root_, "<batch>");
    table.num_rows_ += view.length;
    table.batches_.emplace_back(std::move(owned), std::move(view));
  }
  return table;
}

ImportedTable import_array(ArrowSchema* schema_in, ArrowArray* array_in) {
  if (schema_in == nullptr || schema_in->release == nullptr || array_in == nullptr ||
      array_in->release == nullptr) {
    throw InvalidInput("the Arrow array was already consumed (its release callback is null)");
  }
  SchemaGuard schema{*schema_in};
  schema_in->release = nullptr;
  auto owned = own_array(array_in);
  ImportedTable table;
  table.root_->children = fields_of(schema.s);
  if (owned->length == 0) return table;
  ArrayView view = make_view(*owned, *table.root_, "<batch>");
  table.num_rows_ = view.length;
  table.batches_.emplace_back(std::move(owned), std::move(view));
  return table;
}

}  // namespace backfill::arrow
