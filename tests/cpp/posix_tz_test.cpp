#include "calendar/posix_tz.hpp"

#include <gtest/gtest.h>

namespace {

using backfill::detail::parse_posix_rule;
using backfill::detail::posix_transitions;

TEST(PosixTz, ParsesCommonRules) {
  const auto ny = parse_posix_rule("EST5EDT,M3.2.0,M11.1.0");
  ASSERT_TRUE(ny && ny->dst_offset);
  EXPECT_EQ(ny->std_offset, -5 * 3600);
  EXPECT_EQ(*ny->dst_offset, -4 * 3600);
  const auto chatham = parse_posix_rule("<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45");
  ASSERT_TRUE(chatham && chatham->dst_offset);
  EXPECT_EQ(chatham->std_offset, 12 * 3600 + 45 * 60);
  EXPECT_EQ(chatham->start.time, 2 * 3600 + 45 * 60);
  const auto kolkata = parse_posix_rule("IST-5:30");
  ASSERT_TRUE(kolkata);
  EXPECT_FALSE(kolkata->dst_offset);
  EXPECT_FALSE(parse_posix_rule("garbage,"));
  EXPECT_FALSE(parse_posix_rule("EST5EDT"));  // DST without rules: don't guess
}

TEST(PosixTz, TransitionsOfAYear) {
  const auto ny = parse_posix_rule("EST5EDT,M3.2.0,M11.1.0");
  const auto tr = posix_transitions(*ny, 2039, 2039);
  ASSERT_EQ(tr.size(), 2u);
  // 2039-03-13 02:00 EST = 07:00Z; 2039-11-06 02:00 EDT = 06:00Z.
  EXPECT_EQ(tr[0].at, 2183612400);
  EXPECT_EQ(tr[1].at, 2204172000);
}

}  // namespace
