#include "backfill/calendar.hpp"

#include <gtest/gtest.h>

#include "backfill/error.hpp"

namespace {

using backfill::Grain;
using backfill::parse_instant;
using backfill::partition_of;
using backfill::Seconds;
using backfill::TimeZone;

Seconds utc(std::string_view iso) { return parse_instant(iso).seconds; }

TEST(Calendar, UtcGrainsAndLabels) {
  const Seconds t = utc("2026-08-13T05:42:10Z");
  EXPECT_EQ(partition_of(t, Grain::hour).label(), "2026-08-13T05");
  EXPECT_EQ(partition_of(t, Grain::day).label(), "2026-08-13");
  EXPECT_EQ(partition_of(t, Grain::week).label(), "2026-W33");
  EXPECT_EQ(partition_of(t, Grain::month).label(), "2026-08");
  EXPECT_EQ(partition_of(t, Grain::quarter).label(), "2026-Q3");
  EXPECT_EQ(partition_of(t, Grain::year).label(), "2026");
  const auto week = partition_of(t, Grain::week);
  EXPECT_EQ(week.start(), utc("2026-08-10T00:00:00Z"));  // a Monday
  EXPECT_EQ(week.length(), 7 * 86400);
  EXPECT_EQ(partition_of(t, Grain::quarter).end(), utc("2026-10-01T00:00:00Z"));
}

TEST(Calendar, BerlinFallBackHasTwoTwoOClockHours) {
  const auto tz = TimeZone::locate("Europe/Berlin");
  const auto day = partition_of(utc("2026-10-25T12:00:00Z"), Grain::day, tz);
  EXPECT_EQ(day.length(), 25 * 3600);
  const auto first = partition_of(utc("2026-10-25T00:30:00Z"), Grain::hour, tz);
  const auto second = first.next();
  EXPECT_EQ(first.label(), "2026-10-25T02+02:00");
  EXPECT_EQ(second.label(), "2026-10-25T02+01:00");
  EXPECT_EQ(second.start(), first.end());
  EXPECT_EQ(second.prev(), first);
}

TEST(Calendar, DstRulesContinuePastTheLastExplicitTransition) {
  // TZif files list transitions up to 2037; later years come from the POSIX footer rule.
  const auto tz = TimeZone::locate("America/New_York");
  EXPECT_EQ(tz.offset_at(utc("2039-07-01T00:00:00Z")), -4 * 3600);
  EXPECT_EQ(tz.offset_at(utc("2039-12-01T00:00:00Z")), -5 * 3600);
  EXPECT_EQ(partition_of(utc("2039-11-06T12:00:00Z"), Grain::day, tz).length(), 25 * 3600);
}

TEST(Calendar, SkippedMidnightStartsDayAtGapEnd) {
  const auto tz = TimeZone::locate("America/Santiago");
  const auto day = partition_of(utc("2022-09-11T12:00:00Z"), Grain::day, tz);
  EXPECT_EQ(day.start(), utc("2022-09-11T04:00:00Z"));
  EXPECT_EQ(day.label(), "2022-09-11");
}

TEST(Calendar, PartitionsStrictAndExpand) {
  const auto days =
      backfill::partitions(Grain::day, utc("2026-08-01T00:00:00Z"), utc("2026-08-04T00:00:00Z"));
  ASSERT_EQ(days.size(), 3u);
  EXPECT_EQ(days[2].label(), "2026-08-03");
  EXPECT_THROW((void)backfill::partitions(Grain::day, utc("2026-08-01T01:00:00Z"),
                                          utc("2026-08-04T00:00:00Z")),
               backfill::InvalidInput);
  const auto expanded =
      backfill::partitions(Grain::month, utc("2026-08-15T00:00:00Z"), utc("2026-09-02T00:00:00Z"),
                           {}, backfill::Align::expand);
  ASSERT_EQ(expanded.size(), 2u);
  EXPECT_EQ(expanded[1].label(), "2026-09");
  EXPECT_THROW((void)backfill::partitions(Grain::day, 10, 10), backfill::InvalidInput);
  EXPECT_THROW((void)backfill::partitions(Grain::day, 10, 5), backfill::InvalidInput);
}

TEST(Calendar, BadInputNamesTheValue) {
  try {
    (void)parse_instant("2026-02-30");
    FAIL();
  } catch (const backfill::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("2026-02-30"), std::string::npos);
  }
  EXPECT_THROW((void)TimeZone::locate("Mars/Olympus"), backfill::InvalidInput);
  // A directory of the tz database is not a zone (found by zone_fuzz: reading it threw an
  // ios_base::failure past our error types).
  EXPECT_THROW((void)TimeZone::locate("America"), backfill::InvalidInput);
  EXPECT_THROW((void)backfill::parse_grain("fortnight"), backfill::InvalidInput);
  EXPECT_THROW((void)parse_instant("2026-10-25T02:30", TimeZone::locate("Europe/Berlin")),
               backfill::InvalidInput);  // ambiguous
  EXPECT_THROW((void)parse_instant("2026-03-29T02:30", TimeZone::locate("Europe/Berlin")),
               backfill::InvalidInput);  // skipped
  EXPECT_THROW((void)parse_instant("2026-03-29 garbage"), backfill::InvalidInput);
}

TEST(Calendar, ParseInstantForms) {
  EXPECT_EQ(parse_instant("2026-08-01T05:30:00+05:30").seconds, utc("2026-08-01T00:00:00Z"));
  EXPECT_EQ(parse_instant("2026-08-01 05:30Z").seconds, utc("2026-08-01T05:30:00Z"));
  const auto frac = parse_instant("2026-08-01T00:00:00.25Z");
  EXPECT_EQ(frac.nanos, 250'000'000);
  EXPECT_TRUE(parse_instant("2026-08-01").date_only);
  EXPECT_EQ(parse_instant("2026-08-01", TimeZone::locate("Asia/Kolkata")).seconds,
            utc("2026-07-31T18:30:00Z"));
}

}  // namespace
