// The backfill planner: a selection and a period -> partition-scoped tasks with exact
// dependencies, waves, a list schedule and findings.
//
//   backfill::PlanRequest r{.selected = backfill::select(*g, "fct_daily_sales+"),
//                           .start = aug1, .end = oct29, .as_of = now};
//   backfill::Plan p = backfill::plan(g, r);   // p.task_count(), p.findings(), p.schedule()
//
// Planning runs on integer partition indices per model (see src/plan/axis.hpp), so UTC plans
// never touch the tz database; other zones go through the calendar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backfill/calendar.hpp"
#include "backfill/graph.hpp"
#include "backfill/lint.hpp"
#include "backfill/periods.hpp"

namespace backfill {

// impact: a change spreads forward to selected downstream models through the mappings.
// clip: each model keeps only its partitions overlapping [start, end); the rest is reported.
enum class Propagate : std::uint8_t { impact, clip };
[[nodiscard]] Propagate parse_propagate(std::string_view name);

// Severity (info, warning, error) is shared with the linter's findings.
struct PlanFinding {
  std::string code;  // APPEND_STRATEGY, RETENTION, STALE_DOWNSTREAM, ...
  Severity severity = Severity::info;
  std::string model;
  std::string message;
};

struct PlanRequest {
  std::vector<ModelId> selected;  // models (e.g. from select()); sources are ignored
  Seconds start = 0;
  Seconds end = 0;    // exclusive
  Seconds as_of = 0;  // partitions ending after it are left out...
  // ...except the one in progress at as_of (started, not ended) when this is set: dbt runs that
  // batch, and a regular schedule has published it so far, so leaving it out leaves it stale.
  bool include_in_progress = false;
  Propagate propagate = Propagate::impact;
  std::uint32_t partitions_per_run = 1;
  std::uint32_t concurrency = 4;
  bool allow_append = false;
  // Seconds per partition by ModelId.value; missing or negative entries use default_cost.
  std::vector<double> cost_per_partition;
  double default_cost = 1.0;
  // Partitions per task by ModelId.value (automatic batching decides them per model); missing
  // or 0 entries use partitions_per_run.
  std::vector<std::uint32_t> runs_by_model;
  // Fixed seconds per task by ModelId.value (start-up, commit, fingerprint: what a task costs
  // beyond its partitions); missing or negative entries are 0. A task of k partitions of model
  // m costs task_overhead[m] + k * cost_per_partition[m].
  std::vector<double> task_overhead;
};

// Per planned model (selected models, in topological order).
struct ModelPlan {
  ModelId model;
  std::int64_t partitions = 0;
  std::uint32_t tasks = 0;
  std::uint32_t first_task = 0;   // its tasks are [first_task, first_task + tasks)
  std::vector<Interval> periods;  // UTC, merged; empty when nothing is left to do
  double cost_per_partition = 0;
  bool cost_assumed = true;              // no cost was given for it
  double task_overhead = 0;              // seconds per task beyond its partitions
  std::uint32_t partitions_per_run = 1;  // the most partitions one of its tasks has
  double work = 0;                       // seconds of work over all its tasks
  double sched_start = 0;                // first task start / last task end in the schedule
  double sched_end = 0;
};

struct Schedule {
  std::uint32_t concurrency = 1;
  double total_work = 0;
  double makespan = 0;
  std::vector<std::uint32_t> critical_path;  // task ids, first to last
};

class Plan {
 public:
  [[nodiscard]] const Graph& graph() const noexcept { return *graph_; }
  [[nodiscard]] std::shared_ptr<const Graph> graph_ptr() const noexcept { return graph_; }
  [[nodiscard]] const PlanRequest& request() const noexcept { return request_; }

  // Task columns, one entry per task; task ids are positions (tasks of a model are contiguous,
  // models in topological order, so every dependency has a smaller id).
  [[nodiscard]] std::size_t task_count() const noexcept { return model_.size(); }
  [[nodiscard]] std::span<const ModelId> task_model() const noexcept { return model_; }
  [[nodiscard]] std::span<const Seconds> task_start() const noexcept { return start_; }
  [[nodiscard]] std::span<const Seconds> task_end() const noexcept { return end_; }
  [[nodiscard]] std::span<const std::uint32_t> task_partitions() const noexcept { return parts_; }
  [[nodiscard]] std::span<const std::uint32_t> task_wave() const noexcept { return wave_; }
  [[nodiscard]] std::span<const double> sched_start() const noexcept { return sched_start_; }
  [[nodiscard]] std::span<const double> sched_end() const noexcept { return sched_end_; }
  [[nodiscard]] std::span<const std::uint32_t> depends_on(std::uint32_t task) const noexcept {
    return {deps_.data() + dep_offsets_[task], deps_.data() + dep_offsets_[task + 1]};
  }
  [[nodiscard]] std::span<const std::uint64_t> dep_offsets() const noexcept { return dep_offsets_; }
  [[nodiscard]] std::span<const std::uint32_t> dep_values() const noexcept { return deps_; }
  [[nodiscard]] std::size_t dependency_count() const noexcept { return deps_.size(); }
  // The label of a task's first partition ("2026-08-01"; "all" for unpartitioned models).
  [[nodiscard]] std::string task_label(std::uint32_t task) const;

  [[nodiscard]] std::uint32_t wave_count() const noexcept { return waves_; }
  [[nodiscard]] const std::vector<ModelPlan>& models() const noexcept { return models_; }
  [[nodiscard]] const std::vector<PlanFinding>& findings() const noexcept { return findings_; }
  [[nodiscard]] bool ok() const noexcept;
  [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }

  // The same tasks scheduled with other costs (seconds per partition by ModelId.value; negative:
  // default_cost; task_overhead: seconds per task, as in PlanRequest) and concurrency.
  // task_size: by task id, how many typical partitions of its model each task's work is (a day
  // with 20x the rows of a typical day is 20); empty, or a negative entry: the task's partition
  // count. A task then costs task_overhead[m] + task_size[t] * cost_per_partition[m]. One size
  // per task, each finite. O(T log T + D) for T tasks and D dependencies.
  [[nodiscard]] Plan rescheduled(std::vector<double> cost_per_partition, double default_cost,
                                 std::uint32_t concurrency, std::vector<double> task_overhead = {},
                                 std::vector<double> task_size = {}) const;
  // The size of each task in typical partitions (see rescheduled); the partition counts unless
  // sizes were given.
  [[nodiscard]] double task_size(std::uint32_t task) const noexcept {
    return size_.empty() || size_[task] < 0 ? static_cast<double>(parts_[task]) : size_[task];
  }

 private:
  friend Plan plan(std::shared_ptr<const Graph> graph, PlanRequest request);
  void run_schedule();

  std::shared_ptr<const Graph> graph_;
  PlanRequest request_;
  std::vector<ModelId> model_;
  std::vector<Seconds> start_;
  std::vector<Seconds> end_;
  std::vector<std::uint32_t> parts_;
  std::vector<double> size_;  // empty: parts_ (see task_size)
  std::vector<std::uint32_t> wave_;
  std::vector<double> sched_start_;
  std::vector<double> sched_end_;
  std::vector<std::uint64_t> dep_offsets_{0};
  std::vector<std::uint32_t> deps_;
  std::uint32_t waves_ = 0;
  std::vector<ModelPlan> models_;
  std::vector<PlanFinding> findings_;
  Schedule schedule_;
};

// Plans `request` over `graph`. Throws InvalidInput for start >= end, partitions_per_run or
// concurrency of 0, or a cost that is not a finite non-negative number.
// Complexity: O(M + E) model work, then O(T log T + D) for T tasks and D task dependencies
// (per edge a cursor walks the parent's sorted runs). The schedule uses a second hardware
// thread when there is one; results do not depend on it.
[[nodiscard]] Plan plan(std::shared_ptr<const Graph> graph, PlanRequest request);

}  // namespace backfill

namespace backfill::arrow {
class Table;
}

namespace backfill {

// The task table, built column by column from the plan (no per-task objects): task_id int64,
// model dictionary<int32, utf8>, start/end timestamp[us, UTC] (null for unpartitioned models),
// label utf8, partitions int32, wave int32, sched_start/sched_end float64 (seconds from the
// backfill's start), depends_on list<int64>. O(T + D), filled in parallel chunks of rows; labels
// are formatted once per distinct (grain, zone, partition).
[[nodiscard]] arrow::Table task_table(const Plan& plan);

}  // namespace backfill
