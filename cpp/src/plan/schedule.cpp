// List scheduling of a plan's tasks at a given concurrency, priority by critical path.
//
// Cost of a task = its model's seconds per partition x its partitions. Priority is the bottom
// level (the longest cost path from the task to the end of the plan, itself included), the
// classic critical-path heuristic; ties go to the smaller task id so schedules are reproducible.
// O(T log T + D) for T tasks and D dependencies; temporaries are freed on return.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "common/parallel.hpp"
#include "plan/plan_internal.hpp"

namespace backfill {

namespace {

// Priorities are static, so tasks are ranked once (level descending, then task id) and the
// ready set is a hierarchical bitset over ranks: insert and pop-best touch one word per level
// (log64 n levels), instead of the cache-missing sift of a heap holding every ready task.
// Fills task_of_rank; `next` is scratch (its buffer is reused by the caller).
void rank_by_level(const std::vector<double>& level, std::vector<std::uint32_t>& task_of_rank,
                   std::vector<std::uint32_t>& next) {
  const std::size_t n = level.size();
  task_of_rank.resize(n);
  if (n == 0) return;
  // Ascending key = descending level: levels are >= 0, so their IEEE bits sort like the values.
  auto key = [&](std::size_t t) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &level[t], sizeof bits);
    return ~bits;
  };
  // Only the bits that differ between tasks matter: levels are sums of a few distinct costs, so
  // they usually span a few dozen bits, often 16 or fewer (one counting-sort pass).
  const std::uint64_t k0 = key(0);
  std::uint64_t varying = 0;
  for (std::size_t t = 1; t < n; ++t) varying |= key(t) ^ k0;
  for (std::size_t r = 0; r < n; ++r) task_of_rank[r] = static_cast<std::uint32_t>(r);
  if (varying == 0) return;  // one level for all: id order
  const int low = std::countr_zero(varying);
  const int span = 64 - std::countl_zero(varying) - low;
  // Stable LSD radix sort of task ids with digits of at most 16 bits, ids ascending among equal
  // keys. Counts read the levels in id order; only the scatter follows the current order.
  const int passes = (span + 15) / 16;
  const int width = (span + passes - 1) / passes;
  const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
  std::vector<std::uint32_t> count(std::size_t{1} << width);
  next.resize(n);
  for (int p = 0; p < passes; ++p) {
    const int shift = low + p * width;
    auto digit = [&](std::size_t t) { return static_cast<std::size_t>((key(t) >> shift) & mask); };
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t t = 0; t < n; ++t) ++count[digit(t)];
    std::uint32_t sum = 0;
    for (auto& c : count) sum += std::exchange(c, sum);
    for (const std::uint32_t t : task_of_rank) next[count[digit(t)]++] = t;
    task_of_rank.swap(next);
  }
}

class RankSet {
 public:
  explicit RankSet(std::size_t n) {
    std::size_t words = std::max<std::size_t>(1, (n + 63) / 64);
    levels_.emplace_back(words, 0);
    while (words > 1) {
      words = (words + 63) / 64;
      levels_.emplace_back(words, 0);
    }
  }
  [[nodiscard]] bool empty() const noexcept { return levels_.back()[0] == 0; }
  void insert(std::size_t r) {
    for (auto& level : levels_) {
      const bool was_empty = level[r / 64] == 0;
      level[r / 64] |= std::uint64_t{1} << (r % 64);
      if (!was_empty) return;
      r /= 64;
    }
  }
  std::size_t pop_min() {
    std::size_t r = 0;
    for (std::size_t k = levels_.size(); k-- > 0;) {
      r = r * 64 + static_cast<std::size_t>(std::countr_zero(levels_[k][r]));
    }
    std::size_t i = r;
    for (auto& level : levels_) {
      level[i / 64] &= ~(std::uint64_t{1} << (i % 64));
      if (level[i / 64] != 0) break;
      i /= 64;
    }
    return r;
  }

 private:
  std::vector<std::vector<std::uint64_t>> levels_;
};

}  // namespace

void Plan::run_schedule() {
  const std::size_t n = model_.size();
  const auto& costs = request_.cost_per_partition;
  auto per_partition = [&](ModelId id) {
    return id.value < costs.size() && costs[id.value] >= 0 ? costs[id.value]
                                                           : request_.default_cost;
  };
  // Seconds per partition by model; a task costs that times its partitions.
  std::vector<double> model_cost(graph_->size());
  for (std::uint32_t m = 0; m < model_cost.size(); ++m) model_cost[m] = per_partition(ModelId{m});
  const auto& overheads = request_.task_overhead;
  auto overhead_of = [&](ModelId id) {
    return id.value < overheads.size() && overheads[id.value] > 0 ? overheads[id.value] : 0.0;
  };
  std::vector<double> model_overhead(graph_->size());
  for (std::uint32_t m = 0; m < model_overhead.size(); ++m) {
    model_overhead[m] = overhead_of(ModelId{m});
  }
  auto cost = [&](std::size_t t) {
    return model_overhead[model_[t].value] +
           model_cost[model_[t].value] * task_size(static_cast<std::uint32_t>(t));
  };

  // Two independent halves, one per core: (a) bottom levels and the ranking by them, (b) the
  // successor lists (the reverse of depends_on) as CSR over task ids.
  std::vector<std::uint32_t> task_of_rank;
  std::vector<std::uint32_t> rank;  // by task; first the ranking's scratch buffer
  std::vector<std::uint64_t> succ_offsets(n + 1, 0);
  // Every slot is written before it is read: no zero fill.
  const auto succ = std::make_unique_for_overwrite<std::uint32_t[]>(deps_.size());
  std::vector<std::uint32_t> waiting(n);  // unfinished dependencies by task
  detail::parallel_invoke(
      n >= (1 << 14),
      [&] {
        // Bottom levels: dependencies have smaller ids, so one reverse pass suffices. level[d]
        // holds the best successor level pushed so far until d itself is reached.
        std::vector<double> level(n, 0);
        for (std::size_t t = n; t-- > 0;) {
          level[t] += cost(t);
          for (std::uint32_t d : depends_on(static_cast<std::uint32_t>(t))) {
            level[d] = std::max(level[d], level[t]);
          }
        }
        rank_by_level(level, task_of_rank, rank);
        rank.resize(n);
        for (std::uint32_t r = 0; r < n; ++r) rank[task_of_rank[r]] = r;
      },
      [&] {
        for (std::uint32_t d : deps_) ++succ_offsets[d + 1];
        for (std::size_t t = 0; t < n; ++t) succ_offsets[t + 1] += succ_offsets[t];
        // Fill with succ_offsets[d] as the cursor of d's list, then shift the offsets back.
        for (std::uint32_t t = 0; t < n; ++t) {
          for (std::uint32_t d : depends_on(t)) succ[succ_offsets[d]++] = t;
        }
        for (std::size_t t = n; t > 0; --t) succ_offsets[t] = succ_offsets[t - 1];
        succ_offsets[0] = 0;
        for (std::size_t t = 0; t < n; ++t) {
          waiting[t] = static_cast<std::uint32_t>(dep_offsets_[t + 1] - dep_offsets_[t]);
        }
      });

  struct Running {
    double finish;
    std::uint32_t task;
    bool operator<(const Running& o) const noexcept {
      return finish != o.finish ? finish > o.finish : task > o.task;
    }
  };
  RankSet ready(n);
  for (std::uint32_t t = 0; t < n; ++t) {
    if (waiting[t] == 0) ready.insert(rank[t]);
  }
  sched_start_.assign(n, 0);
  sched_end_.assign(n, 0);
  std::priority_queue<Running> running;
  const std::uint32_t slots = request_.concurrency;
  double now = 0;
  std::size_t done = 0;
  while (done < n) {
    while (running.size() < slots && !ready.empty()) {
      const std::uint32_t t = task_of_rank[ready.pop_min()];
      sched_start_[t] = now;
      sched_end_[t] = now + cost(t);
      running.push({sched_end_[t], t});
    }
    if (running.empty()) throw Conflict("scheduler stalled: the task graph is not acyclic");
    now = running.top().finish;
    while (!running.empty() && running.top().finish <= now) {
      const std::uint32_t t = running.top().task;
      running.pop();
      ++done;
      for (std::uint64_t k = succ_offsets[t]; k < succ_offsets[t + 1]; ++k) {
        if (--waiting[succ[k]] == 0) ready.insert(rank[succ[k]]);
      }
    }
  }

  schedule_ = Schedule{};
  schedule_.concurrency = slots;
  for (std::size_t t = 0; t < n; ++t) {
    schedule_.total_work += cost(t);
    schedule_.makespan = std::max(schedule_.makespan, sched_end_[t]);
  }
  // Critical path: from the best-ranked task (a root: a dependency never ranks after its
  // dependent) follow the best-ranked successor, i.e. the one with the highest bottom level.
  if (n > 0) {
    std::uint32_t t = task_of_rank[0];
    while (true) {
      schedule_.critical_path.push_back(t);
      if (succ_offsets[t] == succ_offsets[t + 1]) break;
      std::uint32_t best = rank[succ[succ_offsets[t]]];
      for (std::uint64_t k = succ_offsets[t]; k < succ_offsets[t + 1]; ++k) {
        best = std::min(best, rank[succ[k]]);
      }
      t = task_of_rank[best];
    }
  }

  for (ModelPlan& mp : models_) {
    mp.cost_per_partition = per_partition(mp.model);
    mp.cost_assumed = !(mp.model.value < costs.size() && costs[mp.model.value] >= 0);
    mp.task_overhead = overhead_of(mp.model);
    mp.work = 0;
    mp.sched_start = 0;
    mp.sched_end = 0;
    for (std::uint32_t t = mp.first_task; t < mp.first_task + mp.tasks; ++t) {
      mp.work += cost(t);
      mp.sched_start =
          t == mp.first_task ? sched_start_[t] : std::min(mp.sched_start, sched_start_[t]);
      mp.sched_end = std::max(mp.sched_end, sched_end_[t]);
    }
  }
}
Plan Plan::rescheduled(std::vector<double> cost_per_partition, double default_cost,
                       std::uint32_t concurrency, std::vector<double> task_overhead,
                       std::vector<double> task_size) const {
  if (concurrency == 0) throw InvalidInput("concurrency is 0; expected at least 1");
  if (!(default_cost >= 0) || default_cost == std::numeric_limits<double>::infinity()) {
    throw InvalidInput("default cost must be a finite number of seconds >= 0");
  }
  Plan copy = *this;
  copy.request_.cost_per_partition = std::move(cost_per_partition);
  copy.request_.default_cost = default_cost;
  copy.request_.concurrency = concurrency;
  for (const double o : task_overhead) {
    if (!std::isfinite(o)) throw InvalidInput("task overhead must be a finite number of seconds");
  }
  copy.request_.task_overhead = std::move(task_overhead);
  if (!task_size.empty() && task_size.size() != task_count()) {
    throw InvalidInput(fmt::format("task sizes: {} given for {} tasks; expected one per task",
                                   task_size.size(), task_count()));
  }
  for (std::size_t t = 0; t < task_size.size(); ++t) {
    if (!std::isfinite(task_size[t])) {
      throw InvalidInput(
          fmt::format("task {} has size {}; expected a finite number (negative: "
                      "its partitions)",
                      t, task_size[t]));
    }
  }
  copy.size_ = std::move(task_size);
  copy.run_schedule();
  return copy;
}

}  // namespace backfill
