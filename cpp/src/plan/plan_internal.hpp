// Planner internals shared by plan.cpp, findings.cpp and schedule.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backfill/plan.hpp"
#include "plan/axis.hpp"

namespace backfill::detail {

// Sorted, disjoint, merged spans: normalize / unite / intersect / subtract / total_length in
// common/intervals.hpp.
using Spans = std::vector<Span>;

// start/end of the task of an unpartitioned model (exported as null).
inline constexpr Seconds kUnbounded = std::numeric_limits<Seconds>::min();

// Child partitions whose reads through mapping `m` touch the parent partitions `changed`;
// `history` stands for "every partition of the child" (mapping all, unpartitioned parent).
[[nodiscard]] Span impacted(const Axis& parent, const Axis& child, const Mapping& m, Span changed,
                            Span history);
// Parent partitions read by the child partitions `run` (both partitioned, mapping not all).
[[nodiscard]] Span read_range(const Axis& parent, const Axis& child, const Mapping& m, Span run);
// "89 partitions 2026-08-01..2026-10-28".
[[nodiscard]] std::string describe(const Axis& axis, const Spans& spans);

// Everything the phases of one planning call share. Vectors are indexed by ModelId.value.
struct Context {
  Context(const Graph& g, const PlanRequest& r);
  const Graph& graph;
  const PlanRequest& request;
  std::vector<Axis> axes;
  std::vector<char> selected;             // a selected model (sources never)
  std::vector<Spans> sets;                // partitions to rebuild
  std::vector<std::int64_t> limit;        // first partition not planned (not ended by as_of, or
                                          // not started by it with include_in_progress)
  std::vector<std::int64_t> started;      // first partition not started by as_of
  std::vector<std::int64_t> begin_index;  // first partition at or after `begin`
  std::vector<char> has_begin;
  std::vector<Span> before_begin;          // requested partitions before `begin`
  std::vector<Spans> not_ended;            // wanted partitions not started by as_of
  std::vector<Spans> in_progress;          // wanted partition in progress at as_of, left out
  std::vector<Spans> in_progress_kept;     // the same, planned (include_in_progress)
  std::vector<Spans> left_stale;           // clip mode: impacted partitions left out
  std::vector<std::string> unbounded_all;  // parent read whole while the model has no begin
  std::vector<std::uint32_t> first_task;
  std::vector<std::uint32_t> task_total;
  std::vector<std::int64_t> task_lo;  // first partition index by task id, while linking
};

struct PlanColumns {
  std::vector<ModelId> model;
  std::vector<Seconds> start;
  std::vector<Seconds> end;
  std::vector<std::uint32_t> parts;
  std::vector<std::uint32_t> wave;
  std::vector<std::uint64_t> dep_offsets;
  std::vector<std::uint32_t> deps;
  std::uint32_t waves = 0;
};

[[nodiscard]] std::vector<PlanFinding> findings(const Context& cx, const Plan& plan);

}  // namespace backfill::detail
