// The POSIX TZ rule at the end of a TZif file (RFC 8536 section 3.3), e.g.
// "EST5EDT,M3.2.0,M11.1.0". The explicit transitions stop at 2037 in "fat" files and earlier in
// "slim" ones (the `tzdata` Python package's); this rule extends the zone past the last one.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace backfill::detail {

struct PosixTransitionDate {
  enum class Kind : std::uint8_t { julian_no_leap, zero_based, month_week_day } kind;
  int a = 0;                 // J: day 1..365; n: day 0..365; M: month 1..12
  int b = 0;                 // M: week 1..5 (5 = last)
  int c = 0;                 // M: weekday 0..6 (0 = Sunday)
  std::int64_t time = 7200;  // local seconds after midnight, may be negative or > 24 h
};

struct PosixRule {
  std::int32_t std_offset = 0;  // seconds east of UTC
  std::optional<std::int32_t> dst_offset;
  PosixTransitionDate start{};  // into DST, in standard local time
  PosixTransitionDate end{};    // out of DST, in daylight local time
};

// nullopt when the text is not a rule this parser understands (the zone then keeps its last
// offset).
[[nodiscard]] std::optional<PosixRule> parse_posix_rule(std::string_view text);

struct Transition {
  std::int64_t at;      // UTC seconds
  std::int32_t offset;  // offset in force from `at` on
};
// The rule's transitions whose year (in local time) is in [first_year, last_year], sorted.
[[nodiscard]] std::vector<Transition> posix_transitions(const PosixRule& rule, int first_year,
                                                        int last_year);

}  // namespace backfill::detail
