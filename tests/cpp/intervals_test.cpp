// The shared half-open interval sets (common/intervals.hpp): hand-picked cases, then every
// operation against a brute-force oracle (the set of integer points) on random small inputs.
#include "common/intervals.hpp"

#include <gtest/gtest.h>

#include <bitset>
#include <ostream>
#include <random>
#include <vector>

namespace backfill::detail {
// Readable failures: "[1, 3)" instead of bytes.
template <class T>
void PrintTo(const HalfOpen<T>& i, std::ostream* os) {
  *os << '[' << i.lo << ", " << i.hi << ')';
}
}  // namespace backfill::detail

namespace {

using backfill::detail::HalfOpen;
using backfill::detail::intersect;
using backfill::detail::normalize;
using backfill::detail::subtract;
using backfill::detail::total_length;
using backfill::detail::unite;

using I = HalfOpen<int>;
using Set = std::vector<I>;

TEST(Intervals, NormalizeMergesOverlapsAndAdjacencyAndDropsEmpties) {
  EXPECT_EQ(normalize(Set{}), Set{});
  EXPECT_EQ(normalize(Set{{3, 3}, {5, 4}}), Set{});                  // empty, reversed
  EXPECT_EQ(normalize(Set{{5, 8}, {1, 3}}), (Set{{1, 3}, {5, 8}}));  // sorted
  EXPECT_EQ(normalize(Set{{1, 4}, {3, 6}}), (Set{{1, 6}}));          // overlap
  EXPECT_EQ(normalize(Set{{1, 3}, {3, 6}}), (Set{{1, 6}}));          // adjacent
  EXPECT_EQ(normalize(Set{{1, 9}, {2, 3}, {4, 5}}), (Set{{1, 9}}));  // contained
  EXPECT_EQ(normalize(Set{{2, 4}, {2, 7}, {2, 3}}), (Set{{2, 7}}));  // equal starts
  EXPECT_EQ(normalize(Set{{6, 6}, {1, 2}, {4, 4}, {2, 2}, {3, 4}}), (Set{{1, 2}, {3, 4}}));
}

TEST(Intervals, SubtractCutsPartialOverlaps) {
  const Set a{{0, 10}, {20, 30}};
  EXPECT_EQ(subtract(a, Set{}), a);
  EXPECT_EQ(subtract(Set{}, a), Set{});
  EXPECT_EQ(subtract(a, Set{{-5, 3}}), (Set{{3, 10}, {20, 30}}));  // left edge
  EXPECT_EQ(subtract(a, Set{{8, 22}}), (Set{{0, 8}, {22, 30}}));   // across a gap
  EXPECT_EQ(subtract(a, Set{{2, 4}, {6, 7}}), (Set{{0, 2}, {4, 6}, {7, 10}, {20, 30}}));
  EXPECT_EQ(subtract(a, Set{{10, 20}}), a);  // the gap only
  EXPECT_EQ(subtract(a, Set{{0, 10}, {25, 40}}), (Set{{20, 25}}));
  EXPECT_EQ(subtract(a, Set{{-1, 50}}), Set{});
}

TEST(Intervals, IntersectWithASetAndWithAWindow) {
  const Set a{{0, 10}, {20, 30}};
  EXPECT_EQ(intersect(a, Set{{5, 25}}), (Set{{5, 10}, {20, 25}}));
  EXPECT_EQ(intersect(a, Set{{10, 20}}), Set{});  // touching is not overlapping
  EXPECT_EQ(intersect(a, Set{{1, 2}, {3, 4}, {9, 21}}), (Set{{1, 2}, {3, 4}, {9, 10}, {20, 21}}));
  EXPECT_EQ(intersect(a, I{5, 25}), (Set{{5, 10}, {20, 25}}));
  EXPECT_EQ(intersect(a, I{7, 7}), Set{});
  EXPECT_EQ(intersect(a, I{25, 5}), Set{});  // a reversed window is empty
}

TEST(Intervals, UniteAndTotalLength) {
  EXPECT_EQ(unite(Set{{0, 2}, {6, 8}}, Set{{2, 3}, {7, 10}}), (Set{{0, 3}, {6, 10}}));
  EXPECT_EQ(unite(Set{}, Set{{1, 2}}), (Set{{1, 2}}));
  EXPECT_EQ(total_length(Set{{0, 2}, {6, 10}}), 6);
  EXPECT_EQ(total_length(Set{}), 0);
  EXPECT_EQ(total_length(std::vector<HalfOpen<long>>{{-5L, 5L}}), 10L);
}

// ---- brute-force oracle: points of [kLo, kHi) ----

constexpr int kLo = -2;
constexpr int kHi = 14;
using Points = std::bitset<kHi - kLo>;

Points points(const Set& s) {
  Points p;
  for (const I& i : s) {
    for (int x = i.lo; x < i.hi; ++x) p.set(static_cast<std::size_t>(x - kLo));
  }
  return p;
}

bool is_normalized(const Set& s) {
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (s[k].empty()) return false;
    if (k > 0 && !(s[k - 1].hi < s[k].lo)) return false;  // sorted, disjoint, not adjacent
  }
  return true;
}

Set random_set(std::mt19937& rng) {
  std::uniform_int_distribution<int> len(0, 6);
  std::uniform_int_distribution<int> point(kLo, kHi);
  Set s(static_cast<std::size_t>(len(rng)));
  for (I& i : s) i = {point(rng), point(rng)};  // often reversed or empty: normalize drops them
  return s;
}

TEST(Intervals, AgreeWithThePointSetOracle) {
  std::mt19937 rng(13);
  for (int round = 0; round < 20'000; ++round) {
    SCOPED_TRACE(round);
    const Set raw = random_set(rng);
    const Set a = normalize(raw);
    ASSERT_TRUE(is_normalized(a));
    ASSERT_EQ(points(a), points(raw));
    // The normalized form is canonical: normalizing again, or in another order, changes nothing.
    ASSERT_EQ(normalize(a), a);
    ASSERT_EQ(normalize(Set(raw.rbegin(), raw.rend())), a);
    ASSERT_EQ(total_length(a), static_cast<int>(points(a).count()));

    const Set b = normalize(random_set(rng));
    const Set u = unite(a, b);
    const Set n = intersect(a, b);
    const Set d = subtract(a, b);
    ASSERT_TRUE(is_normalized(u));
    ASSERT_TRUE(is_normalized(n));
    ASSERT_TRUE(is_normalized(d));
    ASSERT_EQ(points(u), points(a) | points(b));
    ASSERT_EQ(points(n), points(a) & points(b));
    ASSERT_EQ(points(d), points(a) & ~points(b));
    // Canonical forms of equal point sets are equal vectors.
    Set both = a;
    both.insert(both.end(), b.begin(), b.end());
    ASSERT_EQ(u, normalize(both));

    const I w{std::uniform_int_distribution<int>(kLo, kHi)(rng),
              std::uniform_int_distribution<int>(kLo, kHi)(rng)};
    const Set nw = intersect(a, w);
    ASSERT_TRUE(is_normalized(nw));
    ASSERT_EQ(points(nw), points(a) & points(Set{w}));
  }
}

}  // namespace
