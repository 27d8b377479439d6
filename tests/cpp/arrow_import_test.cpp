// The Arrow C data import refuses arrays it cannot read safely (issue 19; arrow_fuzz explores
// the same space). The C interface carries no buffer sizes, so these arrays are honest about
// sizes and lie about everything else: offsets, indices, child counts and lengths, pointers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "arrow/values.hpp"
#include "backfill/arrow.hpp"
#include "backfill/error.hpp"

namespace arrow = backfill::arrow;

namespace {

// Schema and array nodes whose memory the fixture owns; release callbacks only mark release.
struct Producer {
  std::deque<ArrowSchema> schemas;
  std::deque<ArrowArray> arrays;
  std::deque<std::vector<ArrowSchema*>> schema_kids;
  std::deque<std::vector<ArrowArray*>> array_kids;
  std::deque<std::vector<const void*>> buffer_lists;
  std::deque<std::vector<std::int64_t>> data;

  ArrowSchema* schema(const char* format, std::vector<ArrowSchema*> kids = {},
                      const char* name = "c") {
    auto& s = schemas.emplace_back();
    s.format = format;
    s.name = name;
    s.flags = ARROW_FLAG_NULLABLE;
    auto& k = schema_kids.emplace_back(std::move(kids));
    s.n_children = static_cast<std::int64_t>(k.size());
    s.children = k.empty() ? nullptr : k.data();
    s.release = [](ArrowSchema* x) { x->release = nullptr; };
    return &s;
  }
  const void* buffer(std::vector<std::int64_t> words) {
    return data.emplace_back(std::move(words)).data();
  }
  // Offsets as int32 pairs packed into int64 words.
  const void* offsets32(const std::vector<std::int32_t>& offs) {
    std::vector<std::int64_t> words((offs.size() + 1) / 2);
    std::memcpy(words.data(), offs.data(), offs.size() * 4);
    return buffer(std::move(words));
  }
  ArrowArray* array(std::int64_t length, std::vector<const void*> buffers,
                    std::vector<ArrowArray*> kids = {}, std::int64_t offset = 0) {
    auto& a = arrays.emplace_back();
    a.length = length;
    a.offset = offset;
    auto& b = buffer_lists.emplace_back(std::move(buffers));
    a.n_buffers = static_cast<std::int64_t>(b.size());
    a.buffers = b.data();
    auto& k = array_kids.emplace_back(std::move(kids));
    a.n_children = static_cast<std::int64_t>(k.size());
    a.children = k.empty() ? nullptr : k.data();
    a.release = [](ArrowArray* x) { x->release = nullptr; };
    return &a;
  }
  // A record batch of one column.
  arrow::ImportedTable import(ArrowSchema* column_schema, ArrowArray* column, std::int64_t rows,
                              std::int64_t offset = 0) {
    return arrow::import_array(schema("+s", {column_schema}),
                               array(rows, {nullptr}, {column}, offset));
  }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const backfill::InvalidInput& e) {
    return e.what();
  }
  return "no InvalidInput";
}

}  // namespace

TEST(ArrowImport, RefusesListOffsetsPastTheChild) {
  Producer p;
  auto* child = p.array(2, {nullptr, p.buffer({10, 20})});
  auto* list = p.array(2, {nullptr, p.offsets32({0, 1, 5})}, {child});
  EXPECT_NE(message_of([&] {
              (void)p.import(p.schema("+l", {p.schema("l")}), list, 2);
            }).find("offset 5 points past the end of its child (length 2)"),
            std::string::npos);
}

TEST(ArrowImport, RefusesDecreasingOrNegativeStringOffsets) {
  Producer p;
  auto* dec = p.array(2, {nullptr, p.offsets32({0, 3, 1}), p.buffer({0})});
  EXPECT_NE(message_of([&] { (void)p.import(p.schema("u"), dec, 2); }).find("offsets decrease"),
            std::string::npos);
  auto* neg = p.array(1, {nullptr, p.offsets32({-4, 0}), p.buffer({0})});
  EXPECT_NE(
      message_of([&] { (void)p.import(p.schema("u"), neg, 1); }).find("offset -4 is negative"),
      std::string::npos);
}

TEST(ArrowImport, RefusesDictionaryIndicesOutsideTheDictionary) {
  Producer p;
  auto* dict_schema = p.schema("i");
  dict_schema->dictionary = p.schema("u");
  auto* values = p.array(2, {nullptr, p.offsets32({0, 1, 2}), p.buffer({0x6261})});  // "a", "b"
  auto* indices = p.array(3, {nullptr, p.buffer({1, 2})});  // int32 1, 0, 2: 2 is out of range
  indices->dictionary = values;
  EXPECT_NE(message_of([&] {
              (void)p.import(dict_schema, indices, 3);
            }).find("dictionary index 2 (dictionary length 2)"),
            std::string::npos);
}

TEST(ArrowImport, RefusesNullPointersAndWrongCounts) {
  Producer p;
  auto* values = p.buffer({1, 2});
  // A null buffer list, a null values buffer, a null child, a schema without its child list.
  auto* a = p.array(2, {nullptr, values});
  a->buffers = nullptr;
  EXPECT_NE(message_of([&] { (void)p.import(p.schema("l"), a, 2); }).find("null buffer list"),
            std::string::npos);
  auto* b = p.array(2, {nullptr, nullptr});
  EXPECT_NE(message_of([&] { (void)p.import(p.schema("l"), b, 2); }).find("values buffer is null"),
            std::string::npos);
  auto* list = p.array(1, {nullptr, p.offsets32({0, 0})}, {nullptr});
  EXPECT_NE(message_of([&] {
              (void)p.import(p.schema("+l", {p.schema("l")}), list, 1);
            }).find("null child"),
            std::string::npos);
  auto* bad_schema = p.schema("+s", {p.schema("l")});
  bad_schema->children = nullptr;
  EXPECT_NE(message_of([&] {
              (void)arrow::import_array(bad_schema,
                                        p.array(0, {nullptr}, {p.array(0, {nullptr, values})}));
            }).find("no child list"),
            std::string::npos);
  // A null count without a validity bitmap, and an offset + length past INT64_MAX.
  auto* c = p.array(2, {nullptr, values});
  c->null_count = 1;
  EXPECT_NE(message_of([&] { (void)p.import(p.schema("l"), c, 2); }).find("no validity bitmap"),
            std::string::npos);
  auto* d = p.array(2, {nullptr, values}, {}, std::numeric_limits<std::int64_t>::max() - 1);
  EXPECT_NE(message_of([&] { (void)p.import(p.schema("l"), d, 2); }).find("overflows"),
            std::string::npos);
}

TEST(ArrowImport, RefusesViewsOutsideTheirDataBuffers) {
  Producer p;
  // One view of 20 bytes in data buffer 1, but there is only buffer 0 (of 24 bytes).
  std::vector<std::int64_t> view(2, 0);
  const std::int32_t parts[4] = {20, 0, 1, 0};
  std::memcpy(view.data(), parts, 16);
  auto* a = p.array(1, {nullptr, p.buffer(view), p.buffer({0, 0, 0}), p.buffer({24})});
  EXPECT_NE(message_of([&] {
              (void)p.import(p.schema("vu"), a, 1);
            }).find("slot 0 names data buffer 1 of 1"),
            std::string::npos);
}

TEST(ArrowImport, RefusesStructChildShorterThanItsParent) {
  Producer p;
  auto* x = p.array(2, {nullptr, p.buffer({1, 2})});
  auto* s = p.array(2, {nullptr}, {x}, /*offset=*/1);  // needs 3 child slots
  EXPECT_NE(message_of([&] {
              (void)p.import(p.schema("+s", {p.schema("l", {}, "x")}), s, 2);
            }).find("struct child has 2 slots, its parent needs 3"),
            std::string::npos);
}

// Before the import sliced struct children, a struct column inside a struct with an offset read
// its grandchildren from the wrong slots (the struct's offset reached its children only).
TEST(ArrowImport, StructOffsetsReachNestedStructs) {
  Producer p;
  auto* x = p.array(3, {nullptr, p.buffer({10, 20, 30})});
  auto* inner = p.array(3, {nullptr}, {x});
  auto* outer = p.array(2, {nullptr}, {inner}, /*offset=*/1);
  auto* schema = p.schema("+s", {p.schema("+s", {p.schema("l", {}, "x")}, "inner")}, "outer");
  const auto t = p.import(schema, outer, 2);
  const auto& col = t.batches().at(0).column(0);
  EXPECT_EQ(col.length, 2);
  EXPECT_EQ(backfill::detail::render(col, 0), "{inner: {x: 20}}");
  EXPECT_EQ(backfill::detail::render(col, 1), "{inner: {x: 30}}");
}
