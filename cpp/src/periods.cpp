#include "backfill/periods.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backfill/error.hpp"

namespace backfill {

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
  std::erase_if(intervals, [](const Interval& iv) { return iv.end == iv.start; });
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  for (const auto& iv : intervals) {
    if (!intervals_.empty() && iv.start <= intervals_.back().end) {
      intervals_.back().end = std::max(intervals_.back().end, iv.end);
    } else {
      intervals_.push_back(iv);
    }
  }
}

Seconds PeriodSet::total_seconds() const noexcept {
  Seconds total = 0;
  for (const auto& iv : intervals_) total += iv.end - iv.start;
  return total;
}

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

PeriodSet PeriodSet::operator|(const PeriodSet& other) const {
  std::vector<Interval> all = intervals_;
  all.insert(all.end(), other.intervals_.begin(), other.intervals_.end());
  return PeriodSet(std::move(all));
}

PeriodSet PeriodSet::operator&(const PeriodSet& other) const {
  std::vector<Interval> out;
  auto a = intervals_.begin();
  auto b = other.intervals_.begin();
  while (a != intervals_.end() && b != other.intervals_.end()) {
    const Seconds s = std::max(a->start, b->start);
    const Seconds e = std::min(a->end, b->end);
    if (s < e) out.push_back({s, e});
    (a->end < b->end) ? ++a : ++b;
  }
  PeriodSet r;
  r.intervals_ = std::move(out);  // already sorted and disjoint
  return r;
}

PeriodSet PeriodSet::operator-(const PeriodSet& other) const {
  std::vector<Interval> out;
  auto b = other.intervals_.begin();
  for (const auto& iv : intervals_) {
    Seconds cur = iv.start;
    while (b != other.intervals_.end() && b->end <= cur) ++b;
    for (auto c = b; c != other.intervals_.end() && c->start < iv.end; ++c) {
      if (c->start > cur) out.push_back({cur, c->start});
      cur = std::max(cur, c->end);
    }
    if (cur < iv.end) out.push_back({cur, iv.end});
  }
  PeriodSet r;
  r.intervals_ = std::move(out);
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
