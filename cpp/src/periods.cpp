#include "backfill/periods.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "common/intervals.hpp"

namespace backfill {

// The shared interval algorithms read Interval through its start/end.
template <>
struct detail::IntervalTraits<Interval> {
  using Point = Seconds;
  [[nodiscard]] static constexpr Seconds lo(const Interval& i) noexcept { return i.start; }
  [[nodiscard]] static constexpr Seconds hi(const Interval& i) noexcept { return i.end; }
  [[nodiscard]] static constexpr Interval make(Seconds lo, Seconds hi) noexcept { return {lo, hi}; }
};

Cover parse_cover(std::string_view name) {
  if (name == "overlap") return Cover::overlap;
  if (name == "within") return Cover::within;
  throw InvalidInput(fmt::format("unknown cover '{}': expected 'overlap' or 'within'", name));
}

PeriodSet::PeriodSet(std::vector<Interval> intervals) {
  for (const auto& iv : intervals) {
    if (iv.end < iv.start) {
      throw InvalidInput(fmt::format("interval end {} is before its start {}",
                                     format_instant(iv.end), format_instant(iv.start)));
    }
  }
  intervals_ = detail::normalize(std::move(intervals));
}

Seconds PeriodSet::total_seconds() const noexcept { return detail::total_length(intervals_); }

namespace {
// The first interval whose end is after t (the only one that can contain t).
auto first_ending_after(const std::vector<Interval>& v, Seconds t) {
  return std::upper_bound(v.begin(), v.end(), t,
                          [](Seconds x, const Interval& iv) { return x < iv.end; });
}
}  // namespace

bool PeriodSet::contains(Seconds t) const noexcept {
  const auto it = first_ending_after(intervals_, t);
  return it != intervals_.end() && it->start <= t;
}

bool PeriodSet::contains(const Interval& iv) const noexcept {
  if (iv.end <= iv.start) return true;
  const auto it = first_ending_after(intervals_, iv.start);
  return it != intervals_.end() && it->start <= iv.start && iv.end <= it->end;
}

bool PeriodSet::overlaps(const Interval& iv) const noexcept {
  if (iv.end <= iv.start) return false;
  const auto it = first_ending_after(intervals_, iv.start);
  return it != intervals_.end() && it->start < iv.end;
}

// The operands are normalized, so the results are too.
PeriodSet PeriodSet::operator|(const PeriodSet& other) const {
  PeriodSet r;
  r.intervals_ = detail::unite(intervals_, other.intervals_);
  return r;
}

PeriodSet PeriodSet::operator&(const PeriodSet& other) const {
  PeriodSet r;
  r.intervals_ = detail::intersect(intervals_, other.intervals_);
  return r;
}

PeriodSet PeriodSet::operator-(const PeriodSet& other) const {
  PeriodSet r;
  r.intervals_ = detail::subtract(intervals_, other.intervals_);
  return r;
}

std::vector<Partition> PeriodSet::partitions(Grain grain, TimeZone tz, Cover cover) const {
  std::vector<Partition> out;
  for (const auto& iv : intervals_) {
    for (Partition p = partition_of(iv.start, grain, tz); p.start() < iv.end; p = p.next()) {
      if (cover == Cover::within && !(iv.start <= p.start() && p.end() <= iv.end)) continue;
      // Two intervals can overlap the same partition; keep it once.
      if (!out.empty() && out.back() == p) continue;
      out.push_back(p);
    }
  }
  return out;
}

std::string to_string(const PeriodSet& set) {
  std::string out = "{";
  for (const auto& iv : set.intervals()) {
    if (out.size() > 1) out += ", ";
    out += fmt::format("[{}, {})", format_instant(iv.start), format_instant(iv.end));
  }
  return out + "}";
}

}  // namespace backfill
