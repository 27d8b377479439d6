// Composite keys (matched on the key hash, checked column at a time afterwards) and columns
// compared with a tolerance or by value (compared column at a time over the pairs whose row hash
// differs), against brute force.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "arrow_support.hpp"
#include "backfill/diff.hpp"
#include "diff/diff_keys.hpp"

namespace arrow = backfill::arrow;
namespace diff = backfill::diff;
namespace detail = backfill::detail;

namespace {

using backfill::testing::imported;

std::int64_t cell(const arrow::Table& t, std::string_view col, std::int64_t row) {
  return t.column(col).view().values<std::int64_t>()[row];
}

// A side of the composite-key test: key (a int64, b utf8) with nulls, value v.
struct Side {
  std::vector<std::int64_t> a;
  std::vector<std::string> b;
  arrow::Validity a_ok, b_ok;
  std::vector<double> v;

  void add(std::optional<std::int64_t> x, std::optional<std::string> y, double value) {
    a.push_back(x.value_or(0));
    a_ok.push_back(x.has_value());
    b.push_back(y.value_or(""));
    b_ok.push_back(y.has_value());
    v.push_back(value);
  }
  [[nodiscard]] arrow::ImportedTable table() const {
    arrow::Table t;
    t.add("a", arrow::int64_column(a, a_ok));
    t.add("b", arrow::utf8_column(b, b_ok));
    t.add("v", arrow::float64_column(v));
    return imported(std::move(t));
  }
};

diff::Options composite(unsigned threads) {
  diff::Options o;
  o.key = {"a", "b"};
  o.threads = threads;
  o.on_duplicate = diff::OnDuplicate::report;
  return o;
}

}  // namespace

TEST(DiffKeys, SwappedCompositeValuesNeverMatch) {
  Side o, n;
  o.add(1, "11", 1.0);
  n.add(11, "1", 1.0);
  const auto r = diff::diff(o.table(), n.table(), composite(2));
  EXPECT_EQ(r.summary.matched, 0);
  EXPECT_EQ(r.summary.added, 1);
  EXPECT_EQ(r.summary.removed, 1);
}

TEST(DiffKeys, CompositeKeysMatchABruteForce) {
  std::mt19937_64 rng(11);
  Side o, n;
  using Key = std::tuple<std::int64_t, std::string>;
  std::map<Key, std::vector<double>> ko, kn;
  std::int64_t nulls_old = 0, nulls_new = 0;
  auto fill = [&](Side& s, std::map<Key, std::vector<double>>& keys, std::int64_t& nulls,
                  std::size_t rows) {
    for (std::size_t i = 0; i < rows; ++i) {
      const auto x = static_cast<std::int64_t>(rng() % 3000);
      std::string y = std::to_string(rng() % 12);
      const bool a_null = rng() % 40 == 0;
      const bool b_null = rng() % 40 == 0;
      const double v = static_cast<double>(rng() % 4);  // equal for a quarter of matches
      s.add(a_null ? std::nullopt : std::optional(x), b_null ? std::nullopt : std::optional(y), v);
      if (a_null || b_null) {
        ++nulls;
      } else {
        keys[{x, y}].push_back(v);
      }
    }
  };
  fill(o, ko, nulls_old, 20'000);
  fill(n, kn, nulls_new, 20'000);
  // The swapped pair, both orders, once each.
  o.add(1, "11", 5.0);
  ko[{1, "11"}].push_back(5.0);
  n.add(11, "1", 5.0);
  kn[{11, "1"}].push_back(5.0);

  diff::Summary want;
  std::map<Key, bool> all;
  for (const auto& [k, _] : ko) all[k] = true;
  for (const auto& [k, _] : kn) all[k] = true;
  for (const auto& [k, _] : all) {
    const auto co = ko.contains(k) ? ko[k].size() : 0;
    const auto cn = kn.contains(k) ? kn[k].size() : 0;
    if (co > 1 || cn > 1) {
      ++want.duplicate_keys;
      want.duplicate_rows_old += static_cast<std::int64_t>(co);
      want.duplicate_rows_new += static_cast<std::int64_t>(cn);
    } else if (co == 1 && cn == 1) {
      ++want.matched;
      want.changed += ko[k][0] != kn[k][0];
    } else {
      want.added += cn;
      want.removed += co;
    }
  }
  ASSERT_GT(want.duplicate_keys, 100);  // the test exercises duplicates...
  ASSERT_GT(want.matched, 1000);        // ... and matches
  const auto a = o.table();
  const auto b = n.table();
  for (unsigned threads : {1U, 2U}) {
    SCOPED_TRACE(threads);
    const auto r = diff::diff(a, b, composite(threads));
    EXPECT_EQ(r.summary.matched, want.matched);
    EXPECT_EQ(r.summary.changed, want.changed);
    EXPECT_EQ(r.summary.unchanged, want.matched - want.changed);
    EXPECT_EQ(r.summary.added, want.added);
    EXPECT_EQ(r.summary.removed, want.removed);
    EXPECT_EQ(r.summary.duplicate_keys, want.duplicate_keys);
    EXPECT_EQ(r.summary.duplicate_rows_old, want.duplicate_rows_old);
    EXPECT_EQ(r.summary.duplicate_rows_new, want.duplicate_rows_new);
    EXPECT_EQ(r.summary.null_keys_old, nulls_old);
    EXPECT_EQ(r.summary.null_keys_new, nulls_new);
  }
}

// The check itself: a claimed equality that does not hold is caught, on either side.
TEST(DiffKeys, ClaimsThatDoNotHoldAreCaught) {
  Side o, n;
  o.add(1, "11", 0);
  o.add(2, "2", 0);
  o.add(3, "x", 0);
  n.add(11, "1", 0);
  n.add(2, "2", 0);
  n.add(3, "x", 0);
  const auto a = o.table();
  const auto b = n.table();
  detail::DiffPlan plan;
  plan.key = {"a", "b"};
  plan.key_old = plan.key_new = {0, 1};
  plan.threads = 2;
  const std::vector<std::uint32_t> right = {detail::kNoMatch, 1, 2};
  const std::vector<std::uint32_t> wrong = {0, 1, 2};                // (1, "11") vs (11, "1")
  const std::vector<std::uint32_t> half = {detail::kNoMatch, 2, 2};  // (2, "2") vs (3, "x")
  const std::vector<detail::RowPair> none, same = {{1, 1}}, differ = {{1, 2}};
  EXPECT_TRUE(detail::verify_key_claims(a, b, plan, right, none, none));
  EXPECT_FALSE(detail::verify_key_claims(a, b, plan, wrong, none, none));
  EXPECT_FALSE(detail::verify_key_claims(a, b, plan, half, none, none));
  EXPECT_TRUE(detail::verify_key_claims(a, b, plan, right, same, same));
  EXPECT_FALSE(detail::verify_key_claims(a, b, plan, right, differ, none));
  EXPECT_FALSE(detail::verify_key_claims(a, b, plan, right, none, differ));
}

TEST(DiffKeys, ToleranceAndValueColumnsMatchABruteForce) {
  constexpr std::size_t n = 50'000;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::mt19937_64 rng(5);
  std::vector<std::int64_t> ids(n), ints(n), ints2(n);
  std::vector<double> f(n), f2(n), w2(n);
  arrow::Validity ok(n, true), ok2(n, true);
  for (std::size_t k = 0; k < n; ++k) {
    ids[k] = static_cast<std::int64_t>(k);
    f[k] = static_cast<double>(rng() % 10000) / 4.0;
    ints[k] = static_cast<std::int64_t>(rng() % 100000);
    f2[k] = f[k];
    ints2[k] = ints[k];
    ok[k] = rng() % 20 != 0;
    ok2[k] = ok[k];
    switch (rng() % 8) {
      case 0: f2[k] += 0.25; break;               // within abs 0.3
      case 1: f2[k] += 0.5 + f[k] * 0.02; break;  // beyond abs + rel
      case 2: f2[k] = nan; break;
      case 3: ok2[k] = !ok[k]; break;
      case 4: ints2[k] += 1; break;  // compared by value (int64 old, float64 new)
      default: break;
    }
    w2[k] = static_cast<double>(ints2[k]);
  }
  f[7] = nan;
  f2[7] = nan;
  auto make = [](const std::vector<std::int64_t>& id, const std::vector<double>& x, arrow::Column w,
                 const arrow::Validity& valid) {
    arrow::Table t;
    t.add("id", arrow::int64_column(id));
    t.add("f", arrow::float64_column(x, valid));
    t.add("w", std::move(w));
    return imported(std::move(t));
  };
  const auto a = make(ids, f, arrow::int64_column(ints), ok);
  const auto b = make(ids, f2, arrow::float64_column(w2), ok2);
  const diff::Tolerance tol{0.3, 0.01};
  std::int64_t want_f = 0, want_w = 0, want_rows = 0, n2v = 0, v2n = 0;
  for (std::size_t k = 0; k < n; ++k) {
    bool fe = false;
    if (!ok[k] || !ok2[k]) {
      fe = ok[k] == ok2[k];
    } else if (std::isnan(f[k]) || std::isnan(f2[k])) {
      fe = std::isnan(f[k]) && std::isnan(f2[k]);
    } else {
      fe = std::fabs(f2[k] - f[k]) <= tol.abs + tol.rel * std::fabs(f[k]);
    }
    const bool we = static_cast<double>(ints[k]) == w2[k];
    want_f += !fe;
    n2v += !fe && !ok[k];
    v2n += !fe && !ok2[k];
    want_w += !we;
    want_rows += !fe || !we;
  }
  for (unsigned threads : {1U, 2U}) {
    SCOPED_TRACE(threads);
    diff::Options o;
    o.key = {"id"};
    o.threads = threads;
    o.tolerance["f"] = tol;
    const auto r = diff::diff(a, b, o);
    EXPECT_EQ(r.summary.matched, static_cast<std::int64_t>(n));
    EXPECT_EQ(r.summary.changed, want_rows);
    ASSERT_EQ(r.columns->num_rows(), 2);
    EXPECT_EQ(cell(*r.columns, "changed", 0), want_f);
    EXPECT_EQ(cell(*r.columns, "null_to_value", 0), n2v);
    EXPECT_EQ(cell(*r.columns, "value_to_null", 0), v2n);
    EXPECT_EQ(cell(*r.columns, "changed", 1), want_w);
    EXPECT_EQ(r.changed_sample->num_rows() > 0, want_rows > 0);
  }
}
