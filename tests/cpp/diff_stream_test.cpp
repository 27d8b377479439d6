// diff::Stream against the one-shot diff of the concatenated parts: random tables cut into
// random pairs (keys moving between pairs, rows added and removed, null keys), every result
// table compared cell by cell as text; duplicates (in one pair, across pairs) hand back to the
// whole diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "arrow/values.hpp"
#include "arrow_support.hpp"
#include "backfill/diff.hpp"
#include "backfill/error.hpp"

namespace arrow = backfill::arrow;
namespace diff = backfill::diff;
namespace detail = backfill::detail;

namespace {

using backfill::testing::imported;

struct Rows {
  std::vector<std::int64_t> id, qty;
  std::vector<std::int32_t> day;
  std::vector<std::string> s;
  arrow::Validity id_ok;
};

arrow::ImportedTable slice(const Rows& r, std::size_t lo, std::size_t hi) {
  auto cut = [&](const auto& v) {
    return std::vector(v.begin() + static_cast<std::ptrdiff_t>(lo),
                       v.begin() + static_cast<std::ptrdiff_t>(hi));
  };
  arrow::Validity ok;
  for (std::size_t i = lo; i < hi; ++i) ok.push_back(r.id_ok[i]);
  arrow::Table t;
  t.add("id", arrow::int64_column(cut(r.id), ok));
  t.add("day", arrow::date32_column(cut(r.day)));
  t.add("qty", arrow::int64_column(cut(r.qty)));
  t.add("s", arrow::utf8_column(cut(r.s)));
  return imported(std::move(t));
}

std::string text(const arrow::Table& t) {
  std::string out;
  for (std::size_t c = 0; c < t.num_columns(); ++c) {
    out += t.names()[c] + ":";
    const auto v = t.columns()[c].view();
    for (std::int64_t i = 0; i < t.num_rows(); ++i) out += detail::render(v, i) + ",";
    out += "\n";
  }
  return out;
}

diff::Options options() {
  diff::Options o;
  o.key = {"id"};
  o.partition_by = "day";
  o.sample = 5;
  o.threads = 2;
  o.on_duplicate = diff::OnDuplicate::report;
  return o;
}

// Random cut points of n rows into `pairs` slices (some empty).
std::vector<std::size_t> cuts(std::mt19937_64& rng, std::size_t n, std::size_t pairs) {
  std::vector<std::size_t> c{0, n};
  for (std::size_t p = 1; p < pairs; ++p)
    c.push_back(std::uniform_int_distribution<std::size_t>(0, n)(rng));
  std::sort(c.begin(), c.end());
  return c;
}

std::optional<diff::Result> streamed(const Rows& o, const Rows& n, std::size_t pairs,
                                     std::mt19937_64& rng) {
  const auto co = cuts(rng, o.id.size(), pairs);
  const auto cn = cuts(rng, n.id.size(), pairs);
  diff::Stream s(options());
  for (std::size_t p = 0; p < pairs; ++p) {
    s.add(slice(o, co[p], co[p + 1]), slice(n, cn[p], cn[p + 1]));
    if (s.whole_needed()) return std::nullopt;
  }
  return s.finish();
}

}  // namespace

TEST(DiffStream, RandomPairSplitsEqualTheOneShotDiff) {
  std::mt19937_64 rng(18);
  for (int round = 0; round < 60; ++round) {
    Rows o, n;
    const int rows = std::uniform_int_distribution<int>(0, 400)(rng);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; ++i) ids[static_cast<std::size_t>(i)] = i * 7 % 1009;
    std::shuffle(ids.begin(), ids.end(), rng);
    std::uniform_int_distribution<int> pct(0, 99);
    for (const auto id : ids) {
      const bool null_key = pct(rng) < 3;
      const auto day = static_cast<std::int32_t>(20000 + pct(rng) % 5);
      const auto qty = static_cast<std::int64_t>(pct(rng));
      if (pct(rng) >= 10) {  // in old
        o.id.push_back(id);
        o.id_ok.push_back(!null_key);
        o.day.push_back(day);
        o.qty.push_back(qty);
        o.s.push_back("s" + std::to_string(id));
      }
      if (pct(rng) >= 10) {  // in new: sometimes another day (moves pair), qty or s changed
        n.id.push_back(id);
        n.id_ok.push_back(!null_key);
        n.day.push_back(pct(rng) < 15 ? static_cast<std::int32_t>(20000 + pct(rng) % 5) : day);
        n.qty.push_back(pct(rng) < 20 ? qty + 1 : qty);
        n.s.push_back(pct(rng) < 10 ? "t" : "s" + std::to_string(id));
      }
    }
    const auto one = diff::diff(slice(o, 0, o.id.size()), slice(n, 0, n.id.size()), options());
    const std::size_t pairs = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
    const auto st = streamed(o, n, pairs, rng);
    ASSERT_TRUE(st.has_value()) << "round " << round;
    const auto& a = one.summary;
    const auto& b = st->summary;
    EXPECT_EQ(std::tie(a.rows_old, a.rows_new, a.matched, a.unchanged, a.changed, a.added,
                       a.removed, a.null_keys_old, a.null_keys_new),
              std::tie(b.rows_old, b.rows_new, b.matched, b.unchanged, b.changed, b.added,
                       b.removed, b.null_keys_old, b.null_keys_new))
        << "round " << round;
    EXPECT_EQ(text(*one.columns), text(*st->columns)) << "round " << round;
    EXPECT_EQ(text(*one.partitions), text(*st->partitions)) << "round " << round;
    EXPECT_EQ(text(*one.changed_sample), text(*st->changed_sample)) << "round " << round;
    EXPECT_EQ(text(*one.added_sample), text(*st->added_sample)) << "round " << round;
    EXPECT_EQ(text(*one.removed_sample), text(*st->removed_sample)) << "round " << round;
    EXPECT_EQ(text(*one.schema), text(*st->schema));
  }
}

TEST(DiffStream, DuplicatesHandBackToTheWholeDiff) {
  Rows o{{1, 2, 3}, {1, 1, 1}, {20000, 20000, 20001}, {"a", "b", "c"}, {true, true, true}};
  Rows n = o;
  {  // key 1 in both pairs of old (a duplicate across pairs): finish says "diff the whole"
    Rows o2 = o;
    o2.id[2] = 1;
    diff::Stream s(options());
    s.add(slice(o2, 0, 2), slice(n, 0, 2));
    s.add(slice(o2, 2, 3), slice(n, 2, 3));
    EXPECT_FALSE(s.whole_needed());
    EXPECT_FALSE(s.finish().has_value());
    EXPECT_GT(diff::diff(slice(o2, 0, 3), slice(n, 0, 3), options()).summary.duplicate_keys, 0);
  }
  {  // a duplicate inside one pair: known at once
    Rows o2 = o;
    o2.id[1] = 1;
    diff::Stream s(options());
    s.add(slice(o2, 0, 2), slice(n, 0, 2));
    EXPECT_TRUE(s.whole_needed());
  }
  {  // a key moving from pair 1 to pair 2 is one matched row, changed in both partitions
    Rows n2 = o;
    n2.day[0] = 20001;
    diff::Stream s(options());
    s.add(slice(o, 0, 1), slice(n2, 0, 0));
    s.add(slice(o, 1, 3), slice(n2, 0, 3));
    EXPECT_EQ(s.carried(), std::make_pair(std::int64_t{1}, std::int64_t{1}));
    auto r = s.finish();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->summary.added + r->summary.removed, 0);
    EXPECT_EQ(r->summary.changed, 1);
  }
}

TEST(DiffStream, EveryPairNeedsTheFirstPairsSchema) {
  Rows o{{1}, {1}, {20000}, {"a"}, {true}};
  diff::Stream s(options());
  s.add(slice(o, 0, 1), slice(o, 0, 1));
  arrow::Table t;
  t.add("id", arrow::int64_column({2}));
  EXPECT_THROW(s.add(slice(o, 0, 1), imported(std::move(t))), backfill::InvalidInput);
  diff::Stream empty(options());
  EXPECT_THROW((void)empty.finish(), backfill::InvalidInput);
}

TEST(DiffStream, AKeyRecurringAtTheEdgeOfADenseRangeIsFound) {
  // Keys are kept as runs of consecutive ids per pair: pair 2 starting at pair 1's last id
  // repeats one key; starting one later, none.
  auto dense = [](std::int64_t lo, std::int64_t hi) {
    Rows r;
    for (std::int64_t i = lo; i < hi; ++i) {
      r.id.push_back(i);
      r.qty.push_back(1);
      r.day.push_back(20000);
      r.s.emplace_back("x");
      r.id_ok.push_back(true);
    }
    return r;
  };
  for (const std::int64_t start : {99, 100, 0, 149, 150}) {
    const Rows a = dense(0, 100);
    const Rows b = dense(start, start + 50);
    diff::Stream s(options());
    s.add(slice(a, 0, a.id.size()), slice(a, 0, 0));
    s.add(slice(b, 0, b.id.size()), slice(b, 0, 0));
    const bool repeats = start < 100;
    EXPECT_EQ(s.finish().has_value(), !repeats) << start;
  }
  {  // string keys (hashed): one repeated key among many
    auto strings = [](int lo, int hi) {
      arrow::Table t;
      std::vector<std::string> k;
      for (int i = lo; i < hi; ++i) k.push_back("k" + std::to_string(i));
      t.add("k", arrow::utf8_column(k));
      return imported(std::move(t));
    };
    diff::Options o;
    o.key = {"k"};
    for (const int lo : {500, 499}) {
      diff::Stream s(o);
      s.add(strings(0, 500), strings(0, 0));
      s.add(strings(lo, 900), strings(0, 0));
      EXPECT_EQ(s.finish().has_value(), lo == 500) << lo;
    }
  }
}
