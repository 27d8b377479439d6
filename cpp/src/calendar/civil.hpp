// Integer helpers for civil time: floor division and days <-> year/month/day (through date.h).
#pragma once

#include <cstdint>

#include <date/date.h>

namespace backfill::detail {

inline constexpr std::int64_t kSecondsPerDay = 86400;
inline constexpr std::int64_t kSecondsPerHour = 3600;

[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
[[nodiscard]] constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) noexcept {
  return a - floor_div(a, b) * b;
}

struct Civil {
  int year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

[[nodiscard]] constexpr std::int64_t days_from_civil_unchecked(int y, unsigned m,
                                                               unsigned d) noexcept {
  return date::sys_days{date::year{y} / date::month{m} / date::day{d}}.time_since_epoch().count();
}

// Days since 1970-01-01 must stay within date's year range (about +-32767 years).
[[nodiscard]] constexpr Civil civil_from_days(std::int64_t z) noexcept {
  const date::year_month_day ymd{date::sys_days{date::days{static_cast<date::days::rep>(z)}}};
  return {static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
          static_cast<unsigned>(ymd.day())};
}

}  // namespace backfill::detail
