#include "backfill/periods.hpp"

#include <gtest/gtest.h>

#include "backfill/error.hpp"

namespace {

using backfill::Interval;
using backfill::PeriodSet;

TEST(PeriodSet, NormalizesOnConstruction) {
  const PeriodSet s({{10, 20}, {15, 30}, {30, 40}, {50, 50}, {60, 70}});
  ASSERT_EQ(s.intervals().size(), 2u);
  EXPECT_EQ(s.intervals()[0], (Interval{10, 40}));
  EXPECT_EQ(s.intervals()[1], (Interval{60, 70}));
  EXPECT_EQ(s.total_seconds(), 40);
  EXPECT_THROW(PeriodSet({{5, 1}}), backfill::InvalidInput);
}

TEST(PeriodSet, Algebra) {
  const PeriodSet a({{0, 10}, {20, 30}});
  const PeriodSet b({{5, 25}});
  EXPECT_EQ((a | b), PeriodSet({{0, 30}}));
  EXPECT_EQ((a & b), PeriodSet({{5, 10}, {20, 25}}));
  EXPECT_EQ((a - b), PeriodSet({{0, 5}, {25, 30}}));
  EXPECT_EQ((b - a), PeriodSet({{10, 20}}));
  EXPECT_TRUE((a - a).is_empty());
  EXPECT_TRUE(a.contains(0));
  EXPECT_FALSE(a.contains(10));
  EXPECT_TRUE(a.contains(Interval{21, 29}));
  EXPECT_FALSE(a.contains(Interval{5, 21}));
  EXPECT_TRUE(a.overlaps(Interval{9, 11}));
  EXPECT_FALSE(a.overlaps(Interval{10, 20}));
}

TEST(PeriodSet, PartitionsOverlapAndWithin) {
  const PeriodSet s({{86400 / 2, 3 * 86400}});
  const auto overlap = s.partitions(backfill::Grain::day);
  ASSERT_EQ(overlap.size(), 3u);
  EXPECT_EQ(overlap[0].label(), "1970-01-01");
  EXPECT_EQ(s.partitions(backfill::Grain::day, {}, backfill::Cover::within).size(), 2u);
}

}  // namespace
