// The partition calendar: hour, day, ISO week, month, quarter and year partitions of UTC time in
// an IANA time zone, correct across DST, half-hour offsets and zones whose midnight is skipped.
//
//   auto tz = backfill::TimeZone::locate("Europe/Berlin");
//   for (auto p = backfill::partition_of(t, backfill::Grain::day, tz); p.start() < end;
//        p = p.next()) ...
//
// Rules (documented once, here):
// - Instants are whole seconds since 1970-01-01T00:00:00Z (`Seconds`); partitions are half-open
//   [start, end) and contiguous: each partition ends where the next begins.
// - A day (and every coarser period) starts at the first instant its first local date appears on
//   the wall clock: local midnight, or the end of a DST gap when midnight is skipped (Santiago).
//   Where a fall-back crosses midnight (Sao Paulo before 2019: 00:00 back to 23:00), the repeated
//   wall-clock time after the new date first appeared belongs to the new date, so days stay
//   contiguous; that date is then longer than 24 hours.
// - An hour partition is a maximal interval with one local wall-clock hour *and* one UTC offset:
//   the two 02:00 hours of a fall-back night are two partitions (labels carry the offset in non-UTC
//   zones), a skipped hour has no partition, and a 30-minute DST shift (Lord Howe) makes an hour
//   partition 30 or 90 minutes long.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace backfill::detail {
struct ZoneData;
}

namespace backfill {

// Seconds since the Unix epoch, UTC.
using Seconds = std::int64_t;

enum class Grain : std::uint8_t { hour, day, week, month, quarter, year };

// "hour", "day", ... -> Grain; throws InvalidInput naming the value and the valid grains.
[[nodiscard]] Grain parse_grain(std::string_view name);
[[nodiscard]] std::string_view to_string(Grain grain) noexcept;
[[nodiscard]] inline auto format_as(Grain g) noexcept { return to_string(g); }

// An IANA time zone from the OS tz database. The default value is UTC, whose arithmetic needs no
// table look-ups. Cheap to copy (a pointer into the process-wide database).
class TimeZone {
 public:
  constexpr TimeZone() noexcept = default;
  // Throws InvalidInput for a name the tz database does not know.
  [[nodiscard]] static TimeZone locate(std::string_view name);

  [[nodiscard]] constexpr bool is_utc() const noexcept { return zone_ == nullptr; }
  [[nodiscard]] std::string_view name() const noexcept;

  // The directory of compiled zone files (TZif) zones are read from: the one set here, else
  // $TZDIR, else /usr/share/zoneinfo. Set it before the first locate(): zones are read once.
  [[nodiscard]] static std::string database_dir();
  static void set_database_dir(std::string dir);

  // The maximal interval around `t` over which the UTC offset is constant; transitions that keep
  // the offset (an abbreviation change, say) are merged away.
  struct Span {
    Seconds begin;
    Seconds end;
    std::int32_t offset;  // seconds east of UTC
  };
  [[nodiscard]] Span span_at(Seconds t) const;
  [[nodiscard]] std::int32_t offset_at(Seconds t) const { return span_at(t).offset; }

  // The first instant at which the wall clock shows local date `local_day` (days since
  // 1970-01-01): local midnight, or the end of the gap when midnight does not exist.
  [[nodiscard]] Seconds first_instant_of(std::int64_t local_day) const;

  // A wall-clock time (local seconds since 1970-01-01T00:00 local) -> instant. Throws
  // InvalidInput when it falls into a DST gap or is ambiguous (`what` names the value).
  [[nodiscard]] Seconds resolve_local(std::int64_t local_seconds, std::string_view what) const;

  friend constexpr bool operator==(TimeZone, TimeZone) noexcept = default;

 private:
  constexpr explicit TimeZone(const detail::ZoneData* zone) noexcept : zone_(zone) {}
  const detail::ZoneData* zone_ = nullptr;  // nullptr is UTC; zones live for the process
};

// One partition: a grain, a zone and the half-open UTC interval [start, end).
class Partition {
 public:
  [[nodiscard]] constexpr Grain grain() const noexcept { return grain_; }
  [[nodiscard]] constexpr TimeZone tz() const noexcept { return tz_; }
  [[nodiscard]] constexpr Seconds start() const noexcept { return start_; }
  [[nodiscard]] constexpr Seconds end() const noexcept { return end_; }
  [[nodiscard]] constexpr Seconds length() const noexcept { return end_ - start_; }
  [[nodiscard]] constexpr bool contains(Seconds t) const noexcept {
    return start_ <= t && t < end_;
  }

  // "2026-08-01", "2026-08-01T05+02:00" (hours in non-UTC zones carry the offset),
  // "2026-08-01T05" (UTC), "2026-W32", "2026-08", "2026-Q3", "2026".
  [[nodiscard]] std::string label() const;
  [[nodiscard]] Partition next() const;
  [[nodiscard]] Partition prev() const;

  friend constexpr bool operator==(const Partition& a, const Partition& b) noexcept {
    return a.start_ == b.start_ && a.end_ == b.end_ && a.grain_ == b.grain_ && a.tz_ == b.tz_;
  }
  // Time order first; partitions of different grains or zones order by start, then end, then grain.
  friend constexpr std::strong_ordering operator<=>(const Partition& a,
                                                    const Partition& b) noexcept {
    if (auto c = a.start_ <=> b.start_; std::is_neq(c)) return c;
    if (auto c = a.end_ <=> b.end_; std::is_neq(c)) return c;
    return a.grain_ <=> b.grain_;
  }

 private:
  friend Partition partition_of(Seconds t, Grain grain, TimeZone tz);
  constexpr Partition(Grain g, TimeZone tz, Seconds s, Seconds e) noexcept
      : grain_(g), tz_(tz), start_(s), end_(e) {}
  Grain grain_;
  TimeZone tz_;
  Seconds start_;
  Seconds end_;
};

// The partition of `grain` in `tz` that contains instant `t`.
[[nodiscard]] Partition partition_of(Seconds t, Grain grain, TimeZone tz = {});

enum class Align : std::uint8_t { strict, expand };
[[nodiscard]] Align parse_align(std::string_view name);

// Every partition of `grain` in `tz` that lies in [start, end). With Align::strict, a bound that is
// not a partition boundary throws InvalidInput naming it and the nearest boundaries; with
// Align::expand the range widens to whole partitions. end <= start throws.
[[nodiscard]] std::vector<Partition> partitions(Grain grain, Seconds start, Seconds end,
                                                TimeZone tz = {}, Align align = Align::strict);

// Parses an ISO-8601 date or date-time ("2026-08-01", "2026-08-01T05:30", "2026-08-01 05:30:00Z",
// "2026-08-01T05:30:00.25+05:30"). Date-only and naive values are local to `tz`. Fractions of a
// second are returned separately so callers can reject or round them.
struct ParsedInstant {
  Seconds seconds;     // floor
  std::int64_t nanos;  // 0..999'999'999
  bool date_only;
};
[[nodiscard]] ParsedInstant parse_instant(std::string_view text, TimeZone tz = {});

// Civil-date helpers shared by the core (days since 1970-01-01 <-> y/m/d); throw on invalid dates.
[[nodiscard]] std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d);
[[nodiscard]] std::string format_instant(Seconds t);  // "2026-08-01T00:00:00Z"

}  // namespace backfill

template <>
struct fmt::formatter<backfill::Partition> : fmt::formatter<std::string_view> {
  auto format(const backfill::Partition& p, format_context& ctx) const -> format_context::iterator;
};
