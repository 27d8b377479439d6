#include "plan/axis.hpp"

#include <algorithm>

#include "calendar/civil.hpp"

namespace backfill::detail {

namespace {

// ISO weeks start on Monday; 1970-01-01 was a Thursday, so Monday 1969-12-29 is day -3.
constexpr std::int64_t kWeekEpochDay = -3;

constexpr std::int64_t months_of(Seconds t) {
  const auto c = civil_from_days(floor_div(t, kSecondsPerDay));
  return (static_cast<std::int64_t>(c.year) - 1970) * 12 + (c.month - 1);
}

Seconds start_of_month(std::int64_t m) {
  const std::int64_t year = 1970 + floor_div(m, 12);
  const auto month = static_cast<unsigned>(floor_mod(m, 12) + 1);
  return days_from_civil_unchecked(static_cast<int>(year), month, 1) * kSecondsPerDay;
}

}  // namespace

Axis::Axis(const std::optional<Partitioning>& p, bool force_table) {
  if (!p) return;
  partitioned_ = true;
  grain_ = p->grain;
  tz_ = p->tz;
  fast_ = tz_.is_utc() && !force_table;
  if (!fast_) table_ = std::make_shared<Table>();
}

std::int64_t Axis::index_of(Seconds t) const {
  if (!partitioned_) return 0;
  if (fast_) {
    switch (grain_) {
      case Grain::hour: return floor_div(t, kSecondsPerHour);
      case Grain::day: return floor_div(t, kSecondsPerDay);
      case Grain::week: return floor_div(floor_div(t, kSecondsPerDay) - kWeekEpochDay, 7);
      case Grain::month: return months_of(t);
      case Grain::quarter: return floor_div(months_of(t), 3);
      case Grain::year: return floor_div(months_of(t), 12);
    }
  }
  grow_to_time(t);
  const auto it = std::upper_bound(table_->starts.begin(), table_->starts.end(), t);
  return table_->first + (it - table_->starts.begin()) - 1;
}

Seconds Axis::start_of(std::int64_t i) const {
  if (!partitioned_) return i <= 0 ? INT64_MIN / 2 : INT64_MAX / 2;
  if (fast_) {
    switch (grain_) {
      case Grain::hour: return i * kSecondsPerHour;
      case Grain::day: return i * kSecondsPerDay;
      case Grain::week: return (i * 7 + kWeekEpochDay) * kSecondsPerDay;
      case Grain::month: return start_of_month(i);
      case Grain::quarter: return start_of_month(i * 3);
      case Grain::year: return start_of_month(i * 12);
    }
  }
  grow_to_index(i);
  return table_->starts[static_cast<std::size_t>(i - table_->first)];
}

// Both grow functions at least double the table so that a scan costs amortized O(1) per
// partition; the calendar does the DST work.
void Axis::grow_to_time(Seconds t) const {
  if (table_->starts.empty()) {
    const Partition p = partition_of(t, grain_, tz_);
    table_->starts = {p.start(), p.end()};
    table_->first = 0;
    return;
  }
  while (t < table_->starts.front()) {
    const std::size_t add = std::max<std::size_t>(table_->starts.size(), 16);
    std::vector<Seconds> front;
    front.reserve(add + table_->starts.size());
    Partition p = partition_of(table_->starts.front() - 1, grain_, tz_);
    for (std::size_t k = 0; k < add; ++k, p = p.prev()) front.push_back(p.start());
    std::reverse(front.begin(), front.end());
    table_->first -= static_cast<std::int64_t>(front.size());
    front.insert(front.end(), table_->starts.begin(), table_->starts.end());
    table_->starts = std::move(front);
  }
  while (t >= table_->starts.back()) {
    const std::size_t add = std::max<std::size_t>(table_->starts.size(), 16);
    Partition p = partition_of(table_->starts.back(), grain_, tz_);
    for (std::size_t k = 0; k < add; ++k) {
      p = p.next();
      table_->starts.push_back(p.start());
    }
  }
}

void Axis::grow_to_index(std::int64_t i) const {
  if (table_->starts.empty()) grow_to_time(0);
  while (i < table_->first) grow_to_time(table_->starts.front() - 1);
  while (i - table_->first >= static_cast<std::int64_t>(table_->starts.size()))
    grow_to_time(table_->starts.back());
}

}  // namespace backfill::detail
