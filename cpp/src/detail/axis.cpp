#include "detail/axis.hpp"

#include <algorithm>

#include "detail/civil.hpp"

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
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), t);
  return first_ + (it - starts_.begin()) - 1;
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
  return starts_[static_cast<std::size_t>(i - first_)];
}

// Both grow functions at least double the table so that a scan costs amortized O(1) per
// partition; the calendar does the DST work.
void Axis::grow_to_time(Seconds t) const {
  if (starts_.empty()) {
    const Partition p = partition_of(t, grain_, tz_);
    starts_ = {p.start(), p.end()};
    first_ = 0;
    return;
  }
  while (t < starts_.front()) {
    const std::size_t add = std::max<std::size_t>(starts_.size(), 16);
    std::vector<Seconds> front;
    front.reserve(add + starts_.size());
    Partition p = partition_of(starts_.front() - 1, grain_, tz_);
    for (std::size_t k = 0; k < add; ++k, p = p.prev()) front.push_back(p.start());
    std::reverse(front.begin(), front.end());
    first_ -= static_cast<std::int64_t>(front.size());
    front.insert(front.end(), starts_.begin(), starts_.end());
    starts_ = std::move(front);
  }
  while (t >= starts_.back()) {
    const std::size_t add = std::max<std::size_t>(starts_.size(), 16);
    Partition p = partition_of(starts_.back(), grain_, tz_);
    for (std::size_t k = 0; k < add; ++k) {
      p = p.next();
      starts_.push_back(p.start());
    }
  }
}

void Axis::grow_to_index(std::int64_t i) const {
  if (starts_.empty()) grow_to_time(0);
  while (i < first_) grow_to_time(starts_.front() - 1);
  while (i - first_ >= static_cast<std::int64_t>(starts_.size())) grow_to_time(starts_.back());
}

}  // namespace backfill::detail
