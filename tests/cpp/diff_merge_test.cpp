// The merge path (both sides sorted by one integer key) against the hash path: identical
// results, bit for bit; inputs that are not strictly ascending fall back to the hash path.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>

#include "arrow/values.hpp"
#include "arrow_support.hpp"
#include "backfill/diff.hpp"
#include "backfill/error.hpp"

namespace arrow = backfill::arrow;
namespace diff = backfill::diff;

namespace {

using backfill::testing::imported;

struct Rows {
  std::vector<std::int64_t> id;
  std::vector<double> amount;
  std::vector<std::int64_t> qty;
  std::vector<std::int32_t> day;
  std::vector<std::string> name;
  arrow::Validity ok;
};

arrow::ImportedTable table(const Rows& r) {
  arrow::Table t;
  t.add("id", arrow::int64_column(r.id));
  t.add("amount", arrow::float64_column(r.amount, r.ok));
  t.add("qty", arrow::int64_column(r.qty));
  t.add("day", arrow::date32_column(r.day));
  t.add("name", arrow::utf8_column(r.name, r.ok));
  return imported(std::move(t));
}

// n rows with ids first, first + step, ...; random values.
Rows rows(std::int64_t n, std::int64_t first, std::int64_t step, std::mt19937_64& rng) {
  Rows r;
  for (std::int64_t i = 0; i < n; ++i) {
    r.id.push_back(first + i * step);
    r.amount.push_back(static_cast<double>(rng() % 100000) / 16.0);
    r.qty.push_back(static_cast<std::int64_t>(rng() % 50));
    r.day.push_back(static_cast<std::int32_t>(19000 + rng() % 40));
    r.name.push_back("c" + std::to_string(rng() % 300));
    r.ok.push_back(rng() % 8 != 0);
  }
  return r;
}

void expect_same_table(const arrow::Table& a, const arrow::Table& b, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.names(), b.names());
  ASSERT_EQ(a.num_rows(), b.num_rows());
  for (std::size_t c = 0; c < a.num_columns(); ++c) {
    const auto va = a.columns()[c].view();
    const auto vb = b.columns()[c].view();
    for (std::int64_t i = 0; i < a.num_rows(); ++i) {
      ASSERT_EQ(backfill::detail::render(va, i), backfill::detail::render(vb, i))
          << a.names()[c] << " row " << i;
      if (va.type->id == arrow::TypeId::float64 && va.is_valid(i)) {  // same bits
        EXPECT_EQ(std::bit_cast<std::uint64_t>(va.values<double>()[i]),
                  std::bit_cast<std::uint64_t>(vb.values<double>()[i]))
            << a.names()[c] << " row " << i;
      }
    }
  }
}

bool ran(const diff::Result& r, std::string_view phase) {
  return std::any_of(r.timings.begin(), r.timings.end(),
                     [&](const auto& t) { return t.first == phase; });
}

// Diffs with the merge path allowed and forced off: the same result; returns the merged one.
diff::Result both_paths(const arrow::ImportedTable& a, const arrow::ImportedTable& b,
                        diff::Options o, bool expect_merge) {
  o.merge_sorted = true;
  auto m = diff::diff(a, b, o);
  o.merge_sorted = false;
  const auto h = diff::diff(a, b, o);
  EXPECT_EQ(ran(m, "merge"), expect_merge);
  EXPECT_FALSE(ran(h, "merge"));
  EXPECT_TRUE(ran(h, "match"));
  const auto& x = m.summary;
  const auto& y = h.summary;
  EXPECT_EQ(x.rows_old, y.rows_old);
  EXPECT_EQ(x.rows_new, y.rows_new);
  EXPECT_EQ(x.matched, y.matched);
  EXPECT_EQ(x.unchanged, y.unchanged);
  EXPECT_EQ(x.changed, y.changed);
  EXPECT_EQ(x.added, y.added);
  EXPECT_EQ(x.removed, y.removed);
  EXPECT_EQ(x.duplicate_keys, y.duplicate_keys);
  EXPECT_EQ(x.duplicate_rows_old, y.duplicate_rows_old);
  EXPECT_EQ(x.duplicate_rows_new, y.duplicate_rows_new);
  EXPECT_EQ(x.null_keys_old, y.null_keys_old);
  EXPECT_EQ(x.null_keys_new, y.null_keys_new);
  expect_same_table(*m.schema, *h.schema, "schema");
  expect_same_table(*m.columns, *h.columns, "columns");
  expect_same_table(*m.partitions, *h.partitions, "partitions");
  expect_same_table(*m.changed_sample, *h.changed_sample, "changed_sample");
  expect_same_table(*m.added_sample, *h.added_sample, "added_sample");
  expect_same_table(*m.removed_sample, *h.removed_sample, "removed_sample");
  return m;
}

diff::Options options(unsigned threads, bool partitioned) {
  diff::Options o;
  o.key = {"id"};
  o.threads = threads;
  o.sample = 5;
  if (partitioned) o.partition_by = "day";
  return o;
}

// New: old without its first and last rows' keys, with added keys before, between and after,
// and ~1 row in 10 changed.
TEST(DiffMerge, SortedTablesGiveTheHashPathsResult) {
  std::mt19937_64 rng(11);
  const Rows old_rows = rows(70'000, -1000, 3, rng);
  Rows nr;
  const auto keep = [&](std::size_t k) { return k >= 40 && k + 25 < old_rows.id.size(); };
  auto push = [&](std::int64_t id, double a, std::int64_t q, std::int32_t d, std::string s,
                  bool v) {
    nr.id.push_back(id);
    nr.amount.push_back(a);
    nr.qty.push_back(q);
    nr.day.push_back(d);
    nr.name.push_back(std::move(s));
    nr.ok.push_back(v);
  };
  for (std::int64_t i = 0; i < 30; ++i) push(-5000 + i, 1.5, 1, 19001, "x", true);
  for (std::size_t k = 0; k < old_rows.id.size(); ++k) {
    const bool between = k % 997 == 0;  // a key added right after this one
    if (!keep(k)) {
      if (between) push(old_rows.id[k] + 1, 2.0, 2, 19002, "y", k % 2 == 0);
      continue;
    }
    double a = old_rows.amount[k];
    std::int64_t q = old_rows.qty[k];
    std::int32_t d = old_rows.day[k];
    bool v = old_rows.ok[k];
    switch (rng() % 40) {
      case 0: a += 0.5; break;
      case 1: ++q; break;
      case 2: ++d; break;  // moves partition
      case 3: v = !v; break;
      default: break;
    }
    push(old_rows.id[k], a, q, d, old_rows.name[k], v);
    if (between) push(old_rows.id[k] + 1, 2.0, 2, 19002, "y", k % 2 == 0);
  }
  for (std::int64_t i = 0; i < 20; ++i) push(10'000'000 + i, 3.0, 3, 19003, "z", true);
  const auto a = table(old_rows);
  const auto b = table(nr);
  for (unsigned threads : {1U, 2U, 3U}) {
    for (bool partitioned : {false, true}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, partitioned " << partitioned);
      const auto r = both_paths(a, b, options(threads, partitioned), true);
      EXPECT_EQ(r.summary.removed, 40 + 25);
      EXPECT_GT(r.summary.changed, 4000);
      EXPECT_EQ(r.summary.added, 30 + 20 + 71);
    }
  }
}

// A composite key (id, day) over rows sorted by id is sorted lexicographically: merged, with
// the hash path's result (a changed day is a removed and an added key); a step down in the
// second column under a tied first one falls back.
TEST(DiffMerge, CompositeIntegerAndDateKeys) {
  std::mt19937_64 rng(21);
  const Rows x = rows(40'000, 0, 2, rng);
  Rows y = x;
  for (std::size_t k = 0; k < y.day.size(); k += 50) ++y.day[k];
  for (std::size_t k = 3; k < y.qty.size(); k += 70) ++y.qty[k];
  for (unsigned threads : {1U, 2U}) {
    auto o = options(threads, false);
    o.key = {"id", "day"};
    const auto r = both_paths(table(x), table(y), o, true);
    EXPECT_EQ(r.summary.added, 800);
    EXPECT_EQ(r.summary.removed, 800);
    EXPECT_GT(r.summary.changed, 500);
  }
  Rows tied = x;
  for (std::size_t k = 0; k < tied.id.size(); ++k) {
    tied.id[k] = static_cast<std::int64_t>(k / 2);
    tied.day[k] = static_cast<std::int32_t>(19'000 + k % 2);
  }
  {
    auto o = options(2, false);
    o.key = {"id", "day"};
    both_paths(table(tied), table(tied), o, true);  // ties broken by the day: ascending
  }
  tied.day[100] = 30'000;  // (50, 30000) then (50, day[101]): a step down
  auto o = options(2, false);
  o.key = {"id", "day"};
  both_paths(table(tied), table(tied), o, false);
}

TEST(DiffMerge, AllRowsChangedAndEmptyOrOneRowSides) {
  std::mt19937_64 rng(5);
  const Rows x = rows(9000, 0, 2, rng);
  Rows y = x;
  for (auto& q : y.qty) q += 100;
  both_paths(table(x), table(y), options(2, true), true);
  const Rows none = rows(0, 0, 1, rng);
  const Rows one = rows(1, 4, 1, rng);
  const Rows other = rows(1, 5, 1, rng);
  for (const auto* p : {&none, &one, &other, &x}) {
    for (const auto* q : {&none, &one, &other, &x}) {
      both_paths(table(*p), table(*q), options(2, true), true);
    }
  }
}

TEST(DiffMerge, NarrowIntegerKeysAreWidened) {
  std::mt19937_64 rng(8);
  const Rows x = rows(20'000, -10'000, 1, rng);
  const Rows y = rows(20'000, -9'000, 1, rng);
  auto a = [&] {
    arrow::Table t;
    std::vector<std::int32_t> id;
    for (auto k : x.id) id.push_back(static_cast<std::int32_t>(k));
    t.add("id", arrow::int32_column(std::move(id)));
    t.add("amount", arrow::float64_column(x.amount, x.ok));
    t.add("qty", arrow::int64_column(x.qty));
    t.add("day", arrow::date32_column(x.day));
    t.add("name", arrow::utf8_column(x.name, x.ok));
    return imported(std::move(t));
  }();
  const auto r = both_paths(a, table(y), options(2, false), true);
  EXPECT_EQ(r.summary.matched, 19'000);
}

// Not strictly ascending: the hash path, with the same result as always.
TEST(DiffMerge, UnsortedDuplicateOrNullKeysTakeTheHashPath) {
  std::mt19937_64 rng(2);
  const Rows x = rows(30'000, 0, 1, rng);
  Rows descending = x;
  std::swap(descending.id[29'998], descending.id[29'999]);  // one step down, at the end
  auto r = both_paths(table(x), table(descending), options(2, false), false);
  EXPECT_EQ(r.summary.matched, 30'000);
  r = both_paths(table(descending), table(x), options(2, false), false);
  EXPECT_EQ(r.summary.matched, 30'000);

  Rows dup = x;
  dup.id[15'000] = dup.id[14'999];  // equal adjacent keys
  EXPECT_THROW((void)diff::diff(table(x), table(dup), options(2, false)), backfill::InvalidInput);
  auto o = options(2, false);
  o.on_duplicate = diff::OnDuplicate::report;
  r = both_paths(table(x), table(dup), o, false);
  EXPECT_EQ(r.summary.duplicate_keys, 1);
  EXPECT_EQ(r.summary.duplicate_rows_new, 2);
  EXPECT_EQ(r.summary.removed, 1);

  arrow::Table t;
  arrow::Validity valid(x.id.size(), true);
  valid[7] = false;
  t.add("id", arrow::int64_column(x.id, valid));
  t.add("amount", arrow::float64_column(x.amount, x.ok));
  t.add("qty", arrow::int64_column(x.qty));
  t.add("day", arrow::date32_column(x.day));
  t.add("name", arrow::utf8_column(x.name, x.ok));
  r = both_paths(table(x), imported(std::move(t)), options(2, false), false);
  EXPECT_EQ(r.summary.null_keys_new, 1);
}

}  // namespace
