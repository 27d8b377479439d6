#include "backfill/diff.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "arrow_support.hpp"
#include "backfill/error.hpp"

namespace arrow = backfill::arrow;
namespace diff = backfill::diff;

namespace {

using backfill::testing::imported;

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

// Decimal measures add up exactly at the larger scale of the two sides (0.1 + 0.2 is 0.3, to
// the last digit), integers stay int64, and the percentage comes from the exact sums.
TEST(Diff, DecimalMeasuresAreSummedExactly) {
  auto dec = [](std::vector<__int128> v, std::int32_t scale) {
    return arrow::decimal128_column(std::move(v), 38, scale);
  };
  arrow::Table ta;
  ta.add("id", arrow::int64_column({1, 2, 3}));
  ta.add("day", arrow::date32_column({20000, 20000, 20001}));
  ta.add("amount", dec({10, 20, 1}, 2));  // 0.10 0.20 0.01
  ta.add("n", arrow::int64_column({std::numeric_limits<std::int64_t>::max(), 1, 5}));
  arrow::Table tb;
  tb.add("id", arrow::int64_column({1, 2, 3}));
  tb.add("day", arrow::date32_column({20000, 20000, 20001}));
  tb.add("amount", dec({100, 200, 5}, 3));  // 0.100 0.200 0.005
  tb.add("n", arrow::int64_column({std::numeric_limits<std::int64_t>::max(), 2, 5}));
  auto o = by_id();
  o.partition_by = "day";
  o.threads = 1;
  auto r = diff::diff(imported(std::move(ta)), imported(std::move(tb)), o);
  const auto& amount = r.partitions->column("amount_old");
  ASSERT_EQ(amount.type.id, arrow::TypeId::decimal128);
  EXPECT_EQ(amount.type.scale, 3);
  const auto* words = amount.view().values<__int128>();
  EXPECT_TRUE(words[0] == 300);  // 0.10 + 0.20 = 0.300, exactly
  const auto* delta = r.partitions->column("amount_delta").view().values<__int128>();
  EXPECT_TRUE(delta[1] == -5);  // 0.005 - 0.010
  EXPECT_EQ(r.partitions->column("amount_delta_pct").view().values<double>()[1], -50.0);
  // An int64 sum beyond int64 comes back as decimal128(38, 0), exactly.
  const auto& n = r.partitions->column("n_old");
  ASSERT_EQ(n.type.id, arrow::TypeId::decimal128);
  EXPECT_TRUE(n.view().values<__int128>()[0] ==
              static_cast<__int128>(std::numeric_limits<std::int64_t>::max()) + 1);
  EXPECT_EQ(r.partitions->column("n_delta").type.id, arrow::TypeId::int64);
  EXPECT_EQ(r.columns->column("sum_old").type.id, arrow::TypeId::decimal128);
}

// Many rows, new in another order, changes (values, nulls both ways, NaN) in every fast-path
// column type: the per-column statistics equal a brute-force count by key, on 1 and 2 threads.
// More changed rows than one task of the column pass holds, more rows than one scan morsel.
TEST(Diff, ColumnStatisticsMatchABruteForceCount) {
  constexpr std::int64_t n = 120'000;
  std::mt19937_64 rng(3);
  std::vector<std::int64_t> ids(n), ints(n);
  std::vector<double> floats(n);
  std::vector<std::int32_t> days(n);
  std::vector<std::string> texts(n);
  arrow::Validity ok(n, true);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    ids[k] = i * 7 - 300'000;
    ints[k] = static_cast<std::int64_t>(rng() % 1000);
    floats[k] = static_cast<double>(rng() % 100000) / 8.0;
    days[k] = static_cast<std::int32_t>(19000 + rng() % 400);
    texts[k] = "customer-" + std::to_string(rng() % 5000);
    ok[k] = rng() % 10 != 0;
  }
  auto make = [](std::vector<std::int64_t> id, std::vector<double> f, std::vector<std::int64_t> i,
                 std::vector<std::int32_t> d, const std::vector<std::string>& s,
                 const arrow::Validity& valid) {
    arrow::Table t;
    t.add("id", arrow::int64_column(std::move(id)));
    t.add("f", arrow::float64_column(std::move(f), valid));
    t.add("i", arrow::int64_column(std::move(i), valid));
    t.add("d", arrow::date32_column(std::move(d), valid));
    t.add("s", arrow::utf8_column(s, valid));
    return imported(std::move(t));
  };
  // New: every row changed in one column with probability 1/2 (or its validity flipped), NaN
  // replacing some floats, then shuffled.
  auto f2 = floats;
  auto i2 = ints;
  auto d2 = days;
  auto s2 = texts;
  auto ok2 = ok;
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
    switch (rng() % 10) {
      case 0: f2[k] += 0.25 * static_cast<double>(1 + rng() % 4); break;
      case 1: f2[k] = std::numeric_limits<double>::quiet_NaN(); break;
      case 2: i2[k] -= 3; break;
      case 3: d2[k] += 1; break;
      case 4: s2[k] += "!"; break;
      case 5: ok2[k] = !ok2[k]; break;
      default: break;
    }
  }
  std::vector<std::size_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  auto permute = [&](auto v) {
    auto out = v;
    for (std::size_t k = 0; k < order.size(); ++k) out[k] = v[order[k]];
    return out;
  };
  auto a = make(ids, floats, ints, days, texts, ok);
  auto b = make(permute(ids), permute(f2), permute(i2), permute(d2), permute(s2), permute(ok2));

  // Brute force, by key (rows are aligned before the shuffle).
  struct Want {
    std::int64_t changed = 0, n2v = 0, v2n = 0;
    double max = 0;
  };
  Want want[4];
  std::int64_t rows_changed = 0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
    const bool x = ok[k];
    const bool y = ok2[k];
    const bool same[4] = {floats[k] == f2[k] || (std::isnan(floats[k]) && std::isnan(f2[k])),
                          ints[k] == i2[k], days[k] == d2[k], texts[k] == s2[k]};
    bool any = false;
    for (int c = 0; c < 4; ++c) {
      const bool equal = x && y ? same[c] : x == y;
      if (x && y && c == 0 && !std::isnan(f2[k])) {
        want[c].max = std::max(want[c].max, std::fabs(f2[k] - floats[k]));
      }
      if (x && y && c == 1) want[c].max = std::max(want[c].max, std::fabs(double(i2[k] - ints[k])));
      if (equal) continue;
      any = true;
      ++want[c].changed;
      want[c].n2v += !x;
      want[c].v2n += !y;
    }
    rows_changed += any;
  }
  for (unsigned threads : {1U, 2U}) {
    auto o = by_id();
    o.threads = threads;
    const auto r = diff::diff(a, b, o);
    EXPECT_EQ(r.summary.matched, n);
    EXPECT_EQ(r.summary.changed, rows_changed);
    ASSERT_EQ(r.columns->num_rows(), 4);
    for (std::int64_t c = 0; c < 4; ++c) {
      SCOPED_TRACE(testing::Message() << "column " << c << ", threads " << threads);
      const auto& w = want[c];
      EXPECT_EQ(cell(*r.columns, "changed", c), w.changed);
      EXPECT_EQ(cell(*r.columns, "null_to_value", c), w.n2v);
      EXPECT_EQ(cell(*r.columns, "value_to_null", c), w.v2n);
      if (c < 2) {
        EXPECT_EQ(r.columns->column("max_abs_diff").view().values<double>()[c], w.max);
      }
    }
  }
}
