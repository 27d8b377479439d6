#include "backfill/arrow.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "backfill/error.hpp"

namespace arrow = backfill::arrow;

namespace {

std::shared_ptr<const arrow::Table> sample() {
  auto t = std::make_shared<arrow::Table>();
  t->add("i64", arrow::int64_column({1, -2, 3}, {true, false, true}));
  t->add("i32", arrow::int32_column({7, 8, 9}));
  t->add("u64", arrow::uint64_column({0, UINT64_MAX, 5}));
  t->add("f64", arrow::float64_column({0.5, -1.25, 1e300}));
  t->add("b", arrow::bool_column({true, false, true}, {true, true, false}));
  t->add("s", arrow::utf8_column({"a", "", "héllo"}));
  t->add("ts", arrow::timestamp_column({0, 1, 2}, arrow::TimeUnit::micro, "UTC"));
  t->add("d", arrow::date32_column({0, 19000, -1}));
  t->add("l", arrow::list_int64_column({{1, 2}, {}, {3}}, {true, false, true}));
  return t;
}

arrow::ImportedTable roundtrip(std::shared_ptr<const arrow::Table> t) {
  ArrowArrayStream s{};
  arrow::export_table(std::move(t), &s);
  auto in = arrow::import_stream(&s);
  EXPECT_EQ(s.release, nullptr);  // moved out
  return in;
}

}  // namespace

TEST(Arrow, ExportImportRoundTripKeepsTypesAndValues) {
  auto in = roundtrip(sample());
  ASSERT_EQ(in.num_rows(), 3);
  ASSERT_EQ(in.fields().size(), 9U);
  EXPECT_EQ(arrow::to_string(in.fields()[6].type), "timestamp[us, tz=UTC]");
  EXPECT_EQ(arrow::to_string(in.fields()[8].type), "list<int64>");
  const auto& b = in.batches().at(0);
  const auto& i64 = b.column(0);
  EXPECT_TRUE(i64.is_valid(0));
  EXPECT_FALSE(i64.is_valid(1));
  EXPECT_EQ(i64.values<std::int64_t>()[2], 3);
  EXPECT_EQ(b.column(2).values<std::uint64_t>()[1], UINT64_MAX);
  EXPECT_EQ(b.column(3).values<double>()[1], -1.25);
  EXPECT_TRUE(b.column(4).bool_at(0));
  EXPECT_FALSE(b.column(4).is_valid(2));
  EXPECT_EQ(b.column(5).bytes_at(2), "héllo");
  EXPECT_EQ(b.column(5).bytes_at(1), "");
  EXPECT_EQ(b.column(7).values<std::int32_t>()[2], -1);
  const auto& l = b.column(8);
  EXPECT_FALSE(l.is_valid(1));
  EXPECT_EQ(l.values<std::int32_t>()[2], 2);  // offsets
  EXPECT_EQ(l.children.at(0).values<std::int64_t>()[2], 3);
}

TEST(Arrow, ViewsOutliveTheExportingTable) {
  ArrowArrayStream s{};
  {
    auto t = std::make_shared<arrow::Table>();
    t->add("s", arrow::utf8_column({"kept alive"}));
    arrow::export_table(t, &s);
  }
  auto in = arrow::import_stream(&s);
  EXPECT_EQ(in.batches().at(0).column(0).bytes_at(0), "kept alive");
}

TEST(Arrow, TakeGathersAcrossChunksWithNulls) {
  auto in = roundtrip(sample());
  std::vector<arrow::RowRef> rows{{0, 2}, {0, -1}, {0, 0}};
  auto s = arrow::take_column(in, 5, rows);
  EXPECT_EQ(s.type.id, arrow::TypeId::large_utf8);
  EXPECT_EQ(s.view().bytes_at(0), "héllo");
  EXPECT_FALSE(s.is_valid(1));
  auto l = arrow::take_column(in, 8, rows);
  ASSERT_EQ(l.children.at(0).length, 3);  // [3] + null + [1, 2]
  EXPECT_EQ(l.children[0].view().values<std::int64_t>()[0], 3);
}

TEST(Arrow, TableRejectsRaggedAndDuplicateColumns) {
  arrow::Table t;
  t.add("a", arrow::int64_column({1, 2}));
  EXPECT_THROW(t.add("b", arrow::int64_column({1})), backfill::InvalidInput);
  EXPECT_THROW(t.add("a", arrow::int64_column({1, 2})), backfill::InvalidInput);
  EXPECT_THROW(arrow::int64_column({1, 2}, {true}), backfill::InvalidInput);
  EXPECT_THROW((void)t.column("zz"), backfill::NotFound);
}

TEST(Arrow, EmptyTableExportsSchemaAndNoBatches) {
  auto t = std::make_shared<arrow::Table>();
  t->add("a", arrow::int64_column({}));
  auto in = roundtrip(t);
  EXPECT_EQ(in.num_rows(), 0);
  EXPECT_TRUE(in.batches().empty());
  ASSERT_EQ(in.fields().size(), 1U);
  EXPECT_EQ(in.fields()[0].type.id, arrow::TypeId::int64);
}

TEST(Arrow, FormatStringsRoundTrip) {
  for (auto tz : {"", "UTC", "Europe/Berlin"}) {
    auto t = arrow::timestamp_type(arrow::TimeUnit::nano, tz);
    EXPECT_EQ(arrow::format_of(t), std::string("tsn:") + tz);
  }
  EXPECT_EQ(arrow::format_of(arrow::list_type(arrow::make_type(arrow::TypeId::int64))), "+l");
}
