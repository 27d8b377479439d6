#include "backfill/calendar.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <date/date.h>
#include <fmt/format.h>

#include "backfill/error.hpp"
#include "calendar/civil.hpp"
#include "calendar/posix_tz.hpp"
#include "calendar/tzif.hpp"

namespace backfill {
namespace {

using detail::floor_div;
using detail::floor_mod;
using detail::kSecondsPerDay;
using detail::kSecondsPerHour;

constexpr std::array<std::string_view, 6> kGrainNames{"hour",  "day",     "week",
                                                      "month", "quarter", "year"};
// Instants far outside any tz table (about +-17,000 years, inside date's own range of +-32,767),
// so open-ended spans clamp to them and every search stays bounded.
constexpr Seconds kFarPast = -(Seconds{1} << 39);
constexpr Seconds kFarFuture = Seconds{1} << 39;

std::string format_offset(std::int64_t offset) {
  const char sign = offset < 0 ? '-' : '+';
  const std::int64_t a = offset < 0 ? -offset : offset;
  if (a % 60 != 0) return fmt::format("{}{:02}:{:02}:{:02}", sign, a / 3600, a / 60 % 60, a % 60);
  return fmt::format("{}{:02}:{:02}", sign, a / 3600, a / 60 % 60);
}

std::string format_wall(std::int64_t local_seconds) {
  const auto c = detail::civil_from_days(floor_div(local_seconds, kSecondsPerDay));
  const std::int64_t s = floor_mod(local_seconds, kSecondsPerDay);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", c.year, c.month, c.day, s / 3600,
                     s / 60 % 60, s % 60);
}

// An instant as the zone's wall clock with its offset ("2026-10-25T02:00:00+01:00"), or with Z.
std::string format_in(Seconds t, TimeZone tz) {
  if (tz.is_utc()) return format_instant(t);
  const auto off = tz.offset_at(t);
  return format_wall(t + off) + format_offset(off);
}

// First local day of the period of `grain` containing local day `d`, and of the next period.
struct DayRange {
  std::int64_t first;
  std::int64_t next;
};
DayRange period_days(Grain grain, std::int64_t d) {
  switch (grain) {
    case Grain::hour:
    case Grain::day: return {d, d + 1};
    case Grain::week: {
      // 1970-01-01 was a Thursday, three days after Monday.
      const std::int64_t monday = d - floor_mod(d + 3, 7);
      return {monday, monday + 7};
    }
    case Grain::month:
    case Grain::quarter:
    case Grain::year: {
      const auto c = detail::civil_from_days(d);
      const unsigned span = grain == Grain::month ? 1 : grain == Grain::quarter ? 3 : 12;
      const unsigned m0 = grain == Grain::year ? 1 : (c.month - 1) / span * span + 1;
      const unsigned m1 = m0 + span;
      return {detail::days_from_civil_unchecked(c.year, m0, 1),
              m1 > 12 ? detail::days_from_civil_unchecked(c.year + 1, m1 - 12, 1)
                      : detail::days_from_civil_unchecked(c.year, m1, 1)};
    }
  }
  return {d, d + 1};
}

}  // namespace

// ---- grain / align -----------------------------------------------------------------------------

Grain parse_grain(std::string_view name) {
  for (std::size_t i = 0; i < kGrainNames.size(); ++i) {
    if (kGrainNames[i] == name) return static_cast<Grain>(i);
  }
  throw InvalidInput(
      fmt::format("unknown grain '{}': expected one of hour, day, week, month, "
                  "quarter, year",
                  name));
}

std::string_view to_string(Grain grain) noexcept {
  return kGrainNames[static_cast<std::size_t>(grain)];
}

Align parse_align(std::string_view name) {
  if (name == "strict") return Align::strict;
  if (name == "expand") return Align::expand;
  throw InvalidInput(fmt::format("unknown align '{}': expected 'strict' or 'expand'", name));
}

// ---- TimeZone ----------------------------------------------------------------------------------

}  // namespace backfill

namespace backfill::detail {

// A zone as its TZif file has it, plus the file's footer rule that continues it after the last
// explicit transition (`open_from`).
struct ZoneData {
  std::string name;
  TzifZone tzif;
  std::optional<PosixRule> rule;  // only kept when it has DST
  Seconds open_from = kFarFuture;
};

}  // namespace backfill::detail

namespace backfill {

TimeZone TimeZone::locate(std::string_view name) {
  if (name == "UTC") return TimeZone{};
  if (name.empty()) throw InvalidInput("empty time zone name: expected an IANA name such as 'UTC'");
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<detail::ZoneData>, std::less<>> zones;
  const std::lock_guard lock(mutex);
  if (const auto it = zones.find(name); it != zones.end()) return TimeZone{it->second.get()};
  auto data = std::make_unique<detail::ZoneData>();
  data->name = std::string(name);
  auto tzif = detail::read_tzif(name);
  if (!tzif) {
    throw InvalidInput(fmt::format(
        "unknown time zone '{}': expected an IANA name such as 'UTC' or 'Europe/Berlin' (zone "
        "files are read from {})",
        name, detail::tz_dir()));
  }
  data->tzif = std::move(*tzif);
  if (data->tzif.footer && data->tzif.footer->dst_offset) {
    data->rule = data->tzif.footer;
    data->open_from = data->tzif.at.empty() ? kFarPast : std::max(data->tzif.at.back(), kFarPast);
  }
  const auto* ptr = data.get();
  zones.emplace(std::string(name), std::move(data));
  return TimeZone{ptr};
}

std::string_view TimeZone::name() const noexcept {
  return zone_ ? std::string_view(zone_->name) : "UTC";
}

std::string TimeZone::database_dir() { return detail::tz_dir(); }
void TimeZone::set_database_dir(std::string dir) { detail::set_tz_dir(std::move(dir)); }

namespace {

// The span between the explicit transitions of the file around t, ended at `limit` at the latest.
TimeZone::Span explicit_span(const detail::TzifZone& z, Seconds t, Seconds limit) {
  const auto next = std::upper_bound(z.at.begin(), z.at.end(), t);
  const auto i = static_cast<std::size_t>(next - z.at.begin());
  const Seconds begin = i == 0 ? kFarPast : std::max(z.at[i - 1], kFarPast);
  const Seconds end = next == z.at.end() ? kFarFuture : std::min(*next, kFarFuture);
  return {begin, std::min(end, limit), i == 0 ? z.initial_offset : z.offset[i - 1]};
}

// The span of constant offset around t, before merging same-offset neighbours.
TimeZone::Span raw_span(const detail::ZoneData& z, Seconds t) {
  if (t < z.open_from) return explicit_span(z.tzif, t, z.open_from);
  const int year = detail::civil_from_days(floor_div(t, kSecondsPerDay)).year;
  const auto transitions = detail::posix_transitions(*z.rule, year - 1, year + 1);
  TimeZone::Span span = explicit_span(z.tzif, z.open_from, kFarFuture);
  span.end = kFarFuture;
  for (const auto& tr : transitions) {
    if (tr.at <= t) {
      if (tr.at >= z.open_from) span = {tr.at, kFarFuture, tr.offset};
    } else {
      span.end = tr.at;
      break;
    }
  }
  return span;
}

}  // namespace

TimeZone::Span TimeZone::span_at(Seconds t) const {
  if (!zone_) return {kFarPast, kFarFuture, 0};
  Span span = raw_span(*zone_, t);
  // Merge neighbours with the same offset: a transition that only renames the zone is no boundary.
  while (span.begin > kFarPast) {
    const auto prev = raw_span(*zone_, span.begin - 1);
    if (prev.offset != span.offset || prev.begin >= span.begin) break;
    span.begin = prev.begin;
  }
  while (span.end < kFarFuture) {
    const auto next = raw_span(*zone_, span.end);
    if (next.offset != span.offset || next.end <= span.end) break;
    span.end = next.end;
  }
  return span;
}

namespace {

// Every instant whose wall clock reads `local` (at most two), or where the wall clock skips it.
struct LocalLookup {
  std::array<Seconds, 2> at{};
  int count = 0;
  Seconds gap_end = 0;  // when count == 0: the first instant after the skipped wall time
  std::int32_t offset_before = 0, offset_after = 0;
};

LocalLookup lookup_local(TimeZone tz, std::int64_t local) {
  // Offsets stay within +-26 h, so only spans meeting [local - 27 h, local + 27 h] can matter.
  constexpr Seconds kReach = 27 * kSecondsPerHour;
  LocalLookup out;
  TimeZone::Span prev{};
  bool have_prev = false;
  for (auto span = tz.span_at(local - kReach);; span = tz.span_at(span.end)) {
    const Seconds t = local - span.offset;
    if (span.begin <= t && t < span.end && out.count < 2)
      out.at[static_cast<std::size_t>(out.count++)] = t;
    if (have_prev && prev.end + prev.offset <= local && local < span.begin + span.offset) {
      out.gap_end = span.begin;
      out.offset_before = prev.offset;
      out.offset_after = span.offset;
    }
    if (span.end >= kFarFuture || span.begin > local + kReach ||
        (have_prev && span.end <= prev.end))
      break;
    prev = span;
    have_prev = true;
  }
  if (out.count == 2 && out.at[1] < out.at[0]) std::swap(out.at[0], out.at[1]);
  return out;
}

}  // namespace

Seconds TimeZone::first_instant_of(std::int64_t local_day) const {
  const Seconds midnight = local_day * kSecondsPerDay;
  if (!zone_) return midnight;
  const auto found = lookup_local(*this, midnight);
  // Two midnights: the earlier. None: midnight was skipped, the day begins when the gap ends.
  return found.count > 0 ? found.at[0] : found.gap_end;
}

Seconds TimeZone::resolve_local(std::int64_t local_seconds, std::string_view what) const {
  if (!zone_) return local_seconds;
  const auto found = lookup_local(*this, local_seconds);
  if (found.count == 1) return found.at[0];
  if (found.count == 2) {
    throw InvalidInput(fmt::format(
        "'{}' is ambiguous in {}: the wall clock shows it twice, at UTC offsets {} and {}; "
        "add an offset to say which",
        what, name(), format_offset(offset_at(found.at[0])),
        format_offset(offset_at(found.at[1]))));
  }
  throw InvalidInput(fmt::format("'{}' does not exist in {}: clocks jump from {} to {} at {}", what,
                                 name(), format_offset(found.offset_before),
                                 format_offset(found.offset_after), format_instant(found.gap_end)));
}

// ---- Partition ---------------------------------------------------------------------------------

Partition partition_of(Seconds t, Grain grain, TimeZone tz) {
  if (grain == Grain::hour) {
    if (tz.is_utc()) {
      const Seconds s = floor_div(t, kSecondsPerHour) * kSecondsPerHour;
      return {grain, tz, s, s + kSecondsPerHour};
    }
    // One wall-clock hour at one offset: cut the wall hour by the offset span.
    const auto span = tz.span_at(t);
    const Seconds s = floor_div(t + span.offset, kSecondsPerHour) * kSecondsPerHour - span.offset;
    return {grain, tz, std::max(s, span.begin), std::min(s + kSecondsPerHour, span.end)};
  }
  const std::int64_t day = floor_div(t + tz.offset_at(t), kSecondsPerDay);
  auto days = period_days(grain, day);
  Seconds s = tz.first_instant_of(days.first);
  Seconds e = tz.first_instant_of(days.next);
  // A wall clock that fell back across midnight shows yesterday's date after today began.
  while (t >= e) {
    days = period_days(grain, days.next);
    s = e;
    e = tz.first_instant_of(days.next);
  }
  while (t < s) {
    days = period_days(grain, days.first - 1);
    e = s;
    s = tz.first_instant_of(days.first);
  }
  return {grain, tz, s, e};
}

Partition Partition::next() const { return partition_of(end_, grain_, tz_); }
Partition Partition::prev() const { return partition_of(start_ - 1, grain_, tz_); }

std::string Partition::label() const {
  const std::int32_t off = tz_.offset_at(start_);
  const std::int64_t wall = start_ + off;
  const auto c = detail::civil_from_days(floor_div(wall, kSecondsPerDay));
  switch (grain_) {
    case Grain::hour: {
      const std::int64_t h = floor_mod(wall, kSecondsPerDay) / kSecondsPerHour;
      if (tz_.is_utc()) return fmt::format("{:04}-{:02}-{:02}T{:02}", c.year, c.month, c.day, h);
      return fmt::format("{:04}-{:02}-{:02}T{:02}{}", c.year, c.month, c.day, h,
                         format_offset(off));
    }
    case Grain::day: return fmt::format("{:04}-{:02}-{:02}", c.year, c.month, c.day);
    case Grain::week: {
      // The ISO year is the year of the week's Thursday.
      const std::int64_t monday = floor_div(wall, kSecondsPerDay);
      const auto thursday = detail::civil_from_days(monday + 3);
      const std::int64_t jan1 = detail::days_from_civil_unchecked(thursday.year, 1, 1);
      return fmt::format("{:04}-W{:02}", thursday.year, (monday + 3 - jan1) / 7 + 1);
    }
    case Grain::month: return fmt::format("{:04}-{:02}", c.year, c.month);
    case Grain::quarter: return fmt::format("{:04}-Q{}", c.year, (c.month - 1) / 3 + 1);
    case Grain::year: return fmt::format("{:04}", c.year);
  }
  return {};
}

// ---- ranges ------------------------------------------------------------------------------------

std::vector<Partition> partitions(Grain grain, Seconds start, Seconds end, TimeZone tz,
                                  Align align) {
  if (end < start) {
    throw InvalidInput(
        fmt::format("end {} is before start {}", format_in(end, tz), format_in(start, tz)));
  }
  if (end == start) {
    throw InvalidInput(fmt::format("empty range: start and end are both {}", format_in(start, tz)));
  }
  const auto check = [&](Seconds bound, std::string_view which) {
    const Partition p = partition_of(bound, grain, tz);
    if (p.start() != bound && align == Align::strict) {
      throw InvalidInput(fmt::format(
          "{} {} is not on a{} {} boundary in {}: the nearest boundaries are {} and {} "
          "(or pass align='expand')",
          which, format_in(bound, tz), grain == Grain::hour ? "n" : "", to_string(grain), tz.name(),
          format_in(p.start(), tz), format_in(p.end(), tz)));
    }
    return p;
  };
  Partition p = check(start, "start");
  check(end, "end");
  std::vector<Partition> out;
  for (; p.start() < end; p = p.next()) out.push_back(p);
  return out;
}

// ---- parsing -----------------------------------------------------------------------------------

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  if (y < 1 || y > 9999) throw InvalidInput(fmt::format("year {} is out of range 1..9999", y));
  if (m < 1 || m > 12) {
    throw InvalidInput(
        fmt::format("invalid date {:04}-{:02}-{:02}: month {} is not 1..12", y, m, d, m));
  }
  const date::year_month_day ymd{date::year{static_cast<int>(y)}, date::month{m}, date::day{d}};
  if (!ymd.ok()) {
    const auto last = date::year_month_day_last{ymd.year(), date::month_day_last{ymd.month()}};
    throw InvalidInput(fmt::format("invalid date {:04}-{:02}-{:02}: {:04}-{:02} has {} days", y, m,
                                   d, y, m, static_cast<unsigned>(last.day())));
  }
  return date::sys_days{ymd}.time_since_epoch().count();
}

std::string format_instant(Seconds t) { return format_wall(t) + "Z"; }

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}
  [[nodiscard]] bool done() const { return pos_ == text_.size(); }
  [[nodiscard]] char peek() const { return done() ? '\0' : text_[pos_]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  // Exactly `n` digits.
  std::int64_t digits(std::size_t n, std::string_view what) {
    std::int64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const char c = peek();
      if (c < '0' || c > '9') fail(fmt::format("expected {} digits for the {}", n, what));
      v = v * 10 + (c - '0');
      ++pos_;
    }
    return v;
  }
  [[noreturn]] void fail(std::string_view why) const {
    throw InvalidInput(
        fmt::format("invalid date/time '{}': {} at position {}; expected ISO-8601 "
                    "such as 2026-08-01 or 2026-08-01T05:30:00+02:00",
                    text_, why, pos_ + 1));
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

ParsedInstant parse_instant(std::string_view text, TimeZone tz) {
  Scanner in(text);
  const std::int64_t y = in.digits(4, "year");
  if (!in.eat('-')) in.fail("expected '-'");
  const auto mo = static_cast<unsigned>(in.digits(2, "month"));
  if (!in.eat('-')) in.fail("expected '-'");
  const auto d = static_cast<unsigned>(in.digits(2, "day"));
  const std::int64_t day = days_from_civil(y, mo, d);
  if (in.done()) return {tz.first_instant_of(day), 0, true};

  if (!in.eat('T') && !in.eat(' ') && !in.eat('t')) in.fail("expected 'T' between date and time");
  const std::int64_t hh = in.digits(2, "hour");
  std::int64_t mm = 0, ss = 0, nanos = 0;
  if (in.eat(':')) {
    mm = in.digits(2, "minute");
    if (in.eat(':')) {
      ss = in.digits(2, "second");
      if (in.eat('.') || in.eat(',')) {
        std::int64_t scale = 100'000'000;
        if (in.peek() < '0' || in.peek() > '9') in.fail("expected digits after the decimal point");
        while (in.peek() >= '0' && in.peek() <= '9') {
          nanos += (in.peek() - '0') * scale;
          scale /= 10;
          in.eat(in.peek());
        }
      }
    }
  }
  if (hh > 23 || mm > 59 || ss > 59) {
    throw InvalidInput(
        fmt::format("invalid time in '{}': expected hour 00-23, minute and second "
                    "00-59",
                    text));
  }
  const std::int64_t local = day * kSecondsPerDay + hh * 3600 + mm * 60 + ss;
  if (in.done()) return {tz.resolve_local(local, text), nanos, false};
  if (in.eat('Z') || in.eat('z')) {
    if (!in.done()) in.fail("unexpected text after 'Z'");
    return {local, nanos, false};
  }
  const char sign = in.peek();
  if (sign != '+' && sign != '-') in.fail("expected 'Z' or a UTC offset like +02:00");
  in.eat(sign);
  const std::int64_t oh = in.digits(2, "offset hours");
  in.eat(':');
  const std::int64_t om = in.done() ? 0 : in.digits(2, "offset minutes");
  if (!in.done()) in.fail("unexpected text after the UTC offset");
  if (oh > 23 || om > 59) in.fail("UTC offset out of range");
  const std::int64_t offset = (sign == '-' ? -1 : 1) * (oh * 3600 + om * 60);
  return {local - offset, nanos, false};
}

}  // namespace backfill

// fmt calls format() on a formatter object (its formatter API): it stays a const member.
// NOLINTNEXTLINE(readability-convert-member-functions-to-static)
auto fmt::formatter<backfill::Partition>::format(const backfill::Partition& p,
                                                 format_context& ctx) const
    -> format_context::iterator {
  return fmt::format_to(ctx.out(), "Partition({} {} {}, {} .. {})", to_string(p.grain()), p.label(),
                        p.tz().name(), backfill::format_instant(p.start()),
                        backfill::format_instant(p.end()));
}
