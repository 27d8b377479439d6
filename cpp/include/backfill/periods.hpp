// PeriodSet: a normalized set of half-open UTC intervals (sorted, disjoint, non-adjacent), the
// currency in which the planner and the ledger say which periods are done, missing or changed.
//
//   auto todo = PeriodSet::of(aug1, oct29) - done;
//   for (const auto& p : todo.partitions(Grain::day, tz)) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backfill/calendar.hpp"

namespace backfill {

struct Interval {
  Seconds start;
  Seconds end;  // exclusive
  friend constexpr bool operator==(const Interval&, const Interval&) noexcept = default;
};

// Which partitions of a grain a set covers: those that overlap it, or those wholly inside it.
enum class Cover : std::uint8_t { overlap, within };
[[nodiscard]] Cover parse_cover(std::string_view name);

class PeriodSet {
 public:
  PeriodSet() = default;
  // Sorts and merges; empty intervals vanish; an interval with end < start throws InvalidInput.
  explicit PeriodSet(std::vector<Interval> intervals);
  [[nodiscard]] static PeriodSet of(Seconds start, Seconds end) {
    return PeriodSet({{start, end}});
  }

  [[nodiscard]] const std::vector<Interval>& intervals() const noexcept { return intervals_; }
  [[nodiscard]] bool is_empty() const noexcept { return intervals_.empty(); }
  [[nodiscard]] Seconds total_seconds() const noexcept;
  [[nodiscard]] bool contains(Seconds t) const noexcept;           // O(log n)
  [[nodiscard]] bool contains(const Interval& iv) const noexcept;  // wholly inside, O(log n)
  [[nodiscard]] bool overlaps(const Interval& iv) const noexcept;  // O(log n)

  // Set algebra, each O(n + m).
  [[nodiscard]] PeriodSet operator|(const PeriodSet& other) const;
  [[nodiscard]] PeriodSet operator&(const PeriodSet& other) const;
  [[nodiscard]] PeriodSet operator-(const PeriodSet& other) const;

  // Partitions of `grain` in `tz` that overlap the set (or lie wholly inside it), in time order.
  [[nodiscard]] std::vector<Partition> partitions(Grain grain, TimeZone tz = {},
                                                  Cover cover = Cover::overlap) const;

  friend bool operator==(const PeriodSet&, const PeriodSet&) = default;

 private:
  std::vector<Interval> intervals_;
};

[[nodiscard]] std::string to_string(const PeriodSet& set);

}  // namespace backfill
