// Partition-index space for one partitioning: partition i of (grain, tz) <-> instants. The planner
// works on integer index intervals; this is the only place that touches the calendar.
//
// Fast path: UTC hours, days and ISO weeks are fixed widths, and UTC months, quarters and years
// are civil arithmetic: O(1) without look-ups. Any other zone falls back to a table of partition
// starts built with the calendar (partition_of / Partition::next) and grown on demand, so DST,
// half-hour offsets and skipped midnights follow the calendar's rules exactly; look-ups are
// O(log n) in the table size. An unpartitioned node has the single index 0 covering all time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backfill/calendar.hpp"
#include "backfill/graph.hpp"
#include "common/intervals.hpp"

namespace backfill::detail {

// Half-open interval of partition indices; sets of them are normalized vectors of
// common/intervals.hpp.
using Span = HalfOpen<std::int64_t>;

class Axis {
 public:
  Axis() = default;  // unpartitioned
  explicit Axis(const std::optional<Partitioning>& p, bool force_table = false);

  [[nodiscard]] bool partitioned() const noexcept { return partitioned_; }
  [[nodiscard]] Grain grain() const noexcept { return grain_; }
  [[nodiscard]] TimeZone tz() const noexcept { return tz_; }
  [[nodiscard]] bool fast() const noexcept { return fast_; }

  // The partition containing instant t.
  [[nodiscard]] std::int64_t index_of(Seconds t) const;
  // Start of partition i (its end is start_of(i + 1)).
  [[nodiscard]] Seconds start_of(std::int64_t i) const;
  // Partitions overlapping [t0, t1) (t0 < t1).
  [[nodiscard]] Span covering(Seconds t0, Seconds t1) const {
    return {index_of(t0), index_of(t1 - 1) + 1};
  }
  // The calendar partition for index i (labels, display).
  [[nodiscard]] Partition partition(std::int64_t i) const {
    return partition_of(start_of(i), grain_, tz_);
  }

 private:
  void grow_to_time(Seconds t) const;
  void grow_to_index(std::int64_t i) const;

  bool partitioned_ = false;
  bool fast_ = true;
  Grain grain_ = Grain::day;
  TimeZone tz_{};
  // Table fallback: starts[k] is the start of partition (k + first); grown at both ends. Copies
  // of an axis share the table, so models of one (grain, zone) build it once per plan.
  struct Table {
    std::vector<Seconds> starts;
    std::int64_t first = 0;
  };
  std::shared_ptr<Table> table_;
};

}  // namespace backfill::detail
