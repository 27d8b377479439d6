#include "backfill/diff.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backfill/error.hpp"

namespace arrow = backfill::arrow;
namespace diff = backfill::diff;

namespace {

arrow::ImportedTable imported(arrow::Table t) {
  ArrowArrayStream s{};
  arrow::export_table(std::make_shared<const arrow::Table>(std::move(t)), &s);
  return arrow::import_stream(&s);
}

arrow::ImportedTable table(std::vector<std::int64_t> ids, std::vector<double> v,
                           std::vector<std::string> s, arrow::Validity v_ok = {}) {
  arrow::Table t;
  t.add("id", arrow::int64_column(std::move(ids)));
  t.add("v", arrow::float64_column(std::move(v), v_ok));
  t.add("s", arrow::utf8_column(s));
  return imported(std::move(t));
}

diff::Options by_id() {
  diff::Options o;
  o.key = {"id"};
  o.threads = 2;
  return o;
}

std::int64_t cell(const arrow::Table& t, std::string_view col, std::int64_t row) {
  return t.column(col).view().values<std::int64_t>()[row];
}

}  // namespace

TEST(Diff, CountsAddedRemovedChangedPerColumn) {
  auto a = table({1, 2, 3, 4}, {1, 2, 3, 4}, {"a", "b", "c", "d"});
  auto b = table({2, 3, 4, 5}, {2, 2.5, 4, 5}, {"b", "c", "x", "e"});
  auto r = diff::diff(a, b, by_id());
  EXPECT_EQ(r.summary.matched, 3);
  EXPECT_EQ(r.summary.changed, 2);
  EXPECT_EQ(r.summary.unchanged, 1);
  EXPECT_EQ(r.summary.added, 1);
  EXPECT_EQ(r.summary.removed, 1);
  EXPECT_FALSE(r.summary.identical());
  ASSERT_EQ(r.columns->num_rows(), 2);
  EXPECT_EQ(cell(*r.columns, "changed", 0), 1);  // v
  EXPECT_EQ(cell(*r.columns, "changed", 1), 1);  // s
  EXPECT_EQ(r.columns->column("max_abs_diff").view().values<double>()[0], 0.5);
  EXPECT_EQ(r.added_sample->num_rows(), 1);
  EXPECT_EQ(r.changed_sample->num_rows(), 2);
}

TEST(Diff, IdenticalTablesInAnyOrder) {
  auto a = table({1, 2, 3}, {1, 2, 3}, {"a", "b", "c"});
  auto b = table({3, 1, 2}, {3, 1, 2}, {"c", "a", "b"});
  EXPECT_TRUE(diff::diff(a, b, by_id()).summary.identical());
}

TEST(Diff, NullsAndNanAreEqualToThemselves) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = table({1, 2, 3}, {0, nan, -0.0}, {"a", "b", "c"}, {false, true, true});
  auto b = table({1, 2, 3}, {5, nan, 0.0}, {"a", "b", "c"}, {false, true, true});
  EXPECT_TRUE(diff::diff(a, b, by_id()).summary.identical());
}

TEST(Diff, ToleranceIsAbsPlusRelativeToOld) {
  auto a = table({1, 2}, {100, 100}, {"a", "b"});
  auto b = table({1, 2}, {100.9, 101.1}, {"a", "b"});
  auto o = by_id();
  o.tolerance["v"] = diff::Tolerance{0.0, 0.01};
  EXPECT_EQ(diff::diff(a, b, o).summary.changed, 1);
  o.tolerance["v"] = diff::Tolerance{0.2, 0.01};
  EXPECT_EQ(diff::diff(a, b, o).summary.changed, 0);
}

TEST(Diff, DuplicatesErrorOrReport) {
  auto a = table({1, 1, 2}, {1, 1, 2}, {"a", "a", "b"});
  auto b = table({1, 2}, {1, 2}, {"a", "b"});
  try {
    (void)diff::diff(a, b, by_id());
    FAIL() << "expected a duplicate-key error";
  } catch (const backfill::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("(id=1) appears 2 times"), std::string::npos) << e.what();
  }
  auto o = by_id();
  o.on_duplicate = diff::OnDuplicate::report;
  auto r = diff::diff(a, b, o);
  EXPECT_EQ(r.summary.duplicate_keys, 1);
  EXPECT_EQ(r.summary.duplicate_rows_old, 2);
  EXPECT_EQ(r.summary.duplicate_rows_new, 1);
  EXPECT_EQ(r.summary.matched, 1);
}

TEST(Diff, BadOptionsNameTheColumn) {
  auto a = table({1}, {1}, {"a"});
  auto o = by_id();
  o.key = {"nope"};
  EXPECT_THROW((void)diff::diff(a, a, o), backfill::NotFound);
  o = by_id();
  o.tolerance["s"] = diff::Tolerance{1, 0};
  EXPECT_THROW((void)diff::diff(a, a, o), backfill::InvalidInput);
  o = by_id();
  o.partition_by = "v";
  EXPECT_THROW((void)diff::diff(a, a, o), backfill::InvalidInput);
}

TEST(Diff, PartitionsCountRowsAndMeasures) {
  arrow::Table ta;
  ta.add("id", arrow::int64_column({1, 2, 3}));
  ta.add("day", arrow::date32_column({20000, 20000, 20001}));
  ta.add("amount", arrow::float64_column({1, 2, 3}));
  arrow::Table tb;
  tb.add("id", arrow::int64_column({1, 2, 4}));
  tb.add("day", arrow::date32_column({20000, 20001, 20001}));
  tb.add("amount", arrow::float64_column({1, 5, 7}));
  auto o = by_id();
  o.partition_by = "day";
  auto r = diff::diff(imported(std::move(ta)), imported(std::move(tb)), o);
  ASSERT_EQ(r.partitions->num_rows(), 2);
  EXPECT_EQ(cell(*r.partitions, "rows_old", 0), 2);
  EXPECT_EQ(cell(*r.partitions, "rows_new", 0), 1);
  EXPECT_EQ(cell(*r.partitions, "changed", 0), 1);  // id 2 moved day: changed in both
  EXPECT_EQ(cell(*r.partitions, "changed", 1), 1);
  EXPECT_EQ(cell(*r.partitions, "added", 1), 1);
  EXPECT_EQ(cell(*r.partitions, "removed", 1), 1);
  EXPECT_EQ(r.partitions->column("amount_delta").view().values<double>()[1], 9.0);
}
