// The planner: per-model partition sets (request, clip, impact), tasks, exact task dependencies,
// waves; findings in plan/findings.cpp, the list schedule in plan/schedule.cpp.
//
// Assumptions, stated once:
// - Models are visited in topological order, so a model's parents are final before it is read,
//   and task ids (assigned in that order) make every dependency point to a smaller id.
// - Partition sets are sorted, disjoint, merged index spans (detail::Span; set operations in
//   common/intervals.hpp); a model's tasks are consecutive runs of at most `partitions_per_run`
//   partitions inside one span, so a parent's tasks are sorted by index and a child task's
//   parents are found by binary search.
// - Mappings are monotone (a later child partition never reads an earlier parent partition than
//   an earlier one does), so "parent partitions read by a run of child partitions" is one span.
#include "backfill/plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "plan/plan_internal.hpp"

namespace backfill {

using detail::Axis;
using detail::Span;
using detail::Spans;

Propagate parse_propagate(std::string_view name) {
  if (name == "impact") return Propagate::impact;
  if (name == "clip") return Propagate::clip;
  throw InvalidInput(fmt::format("unknown propagate mode '{}'; expected 'impact' or 'clip'", name));
}

bool Plan::ok() const noexcept {
  return std::none_of(findings_.begin(), findings_.end(),
                      [](const PlanFinding& f) { return f.severity == Severity::error; });
}

std::string Plan::task_label(std::uint32_t task) const {
  const NodeSpec& n = graph_->node(model_.at(task));
  if (!n.partitioning) return "full";
  return partition_of(start_[task], n.partitioning->grain, n.partitioning->tz).label();
}

namespace detail {

Span impacted(const Axis& parent, const Axis& child, const Mapping& m, Span changed, Span history) {
  if (!child.partitioned()) return {0, 1};
  if (m.kind == MappingKind::all || !parent.partitioned()) return history;
  const Span x = child.covering(parent.start_of(changed.lo), parent.start_of(changed.hi));
  if (m.kind == MappingKind::window) return {x.lo - m.end, x.hi - m.start};
  return x;
}

Span read_range(const Axis& parent, const Axis& child, const Mapping& m, Span run) {
  if (m.kind == MappingKind::window) run = {run.lo + m.start, run.hi + m.end};
  return parent.covering(child.start_of(run.lo), child.start_of(run.hi));
}

std::string describe(const Axis& axis, const Spans& spans) {
  const std::int64_t n = total_length(spans);
  if (n == 0) return "no partitions";
  if (!axis.partitioned()) return "the whole table";
  const std::string first = axis.partition(spans.front().lo).label();
  const std::string last = axis.partition(spans.back().hi - 1).label();
  const std::string_view noun = n == 1 ? "partition" : "partitions";
  if (n == 1) return fmt::format("1 {} {}", noun, first);
  return fmt::format("{} {} {}..{}{}", n, noun, first, last,
                     spans.size() > 1 ? fmt::format(" in {} runs", spans.size()) : "");
}

}  // namespace detail

namespace {

void check_request(const Graph& g, const PlanRequest& r) {
  if (r.start >= r.end) {
    throw InvalidInput(fmt::format("start {} is not before end {}; expected start < end",
                                   format_instant(r.start), format_instant(r.end)));
  }
  if (r.partitions_per_run == 0) {
    throw InvalidInput("partitions_per_run is 0; expected at least 1");
  }
  if (r.concurrency == 0) throw InvalidInput("concurrency is 0; expected at least 1");
  if (!std::isfinite(r.default_cost) || r.default_cost < 0) {
    throw InvalidInput(
        fmt::format("default cost {} is not a finite number of seconds >= 0", r.default_cost));
  }
  for (std::size_t i = 0; i < r.task_overhead.size(); ++i) {
    if (!std::isfinite(r.task_overhead[i])) {
      throw InvalidInput(
          fmt::format("task overhead of '{}' is {}; expected a finite number of "
                      "seconds",
                      g.node(ModelId{static_cast<std::uint32_t>(i)}).name, r.task_overhead[i]));
    }
  }
  for (std::size_t i = 0; i < r.cost_per_partition.size(); ++i) {
    if (std::isnan(r.cost_per_partition[i]) || std::isinf(r.cost_per_partition[i])) {
      throw InvalidInput(fmt::format("cost of '{}' is {}; expected a finite number of seconds",
                                     g.node(ModelId{static_cast<std::uint32_t>(i)}).name,
                                     r.cost_per_partition[i]));
    }
  }
  for (ModelId id : r.selected) {
    if (id.value >= g.size()) {
      throw InvalidInput(fmt::format("selected model id {} is out of range", id.value));
    }
  }
}

// Phase 1: which partitions of each selected model the backfill rebuilds.
void plan_sets(detail::Context& cx) {
  const Graph& g = cx.graph;
  const PlanRequest& r = cx.request;
  for (ModelId id : g.topological_order()) {
    const std::uint32_t m = id.value;
    if (!cx.selected[m]) continue;
    const Axis& axis = cx.axes[m];
    if (!axis.partitioned()) {
      cx.sets[m] = {{0, 1}};
      continue;
    }
    const Span request = axis.covering(r.start, r.end);
    const Span allowed{cx.begin_index[m], cx.limit[m]};
    const Span own{std::max(request.lo, allowed.lo), std::min(request.hi, allowed.hi)};
    cx.before_begin[m] = {request.lo, std::min(request.hi, allowed.lo)};
    const Span history{cx.has_begin[m] ? cx.begin_index[m] : request.lo, cx.limit[m]};

    Spans impact;
    for (const Edge& e : g.in_edges(id)) {
      const std::uint32_t p = e.parent.value;
      if (!cx.selected[p] || cx.sets[p].empty()) continue;
      if ((e.mapping.kind == MappingKind::all || !cx.axes[p].partitioned()) && !cx.has_begin[m]) {
        cx.unbounded_all[m] = g.node(e.parent).name;
      }
      for (const Span& s : cx.sets[p]) {
        impact.push_back(detail::impacted(cx.axes[p], axis, e.mapping, s, history));
      }
    }
    impact = detail::normalize(std::move(impact));
    Spans kept = own.empty() ? Spans{} : Spans{own};
    const Spans impact_allowed = detail::intersect(impact, allowed);
    Spans wanted{request};
    if (r.propagate == Propagate::impact) wanted.insert(wanted.end(), impact.begin(), impact.end());
    // Wanted partitions past the limit: the one in progress at as_of (published by the regular
    // runs so far, so left stale) and those not started yet (nothing published, nothing stale).
    constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
    wanted = detail::normalize(std::move(wanted));
    const Span running{axis.index_of(r.as_of), cx.started[m]};
    cx.in_progress[m] =
        detail::intersect(wanted, {std::max({running.lo, allowed.hi, allowed.lo}), running.hi});
    cx.not_ended[m] = detail::intersect(wanted, {std::max(allowed.hi, running.hi), kForever});
    if (r.propagate == Propagate::impact) {
      kept.insert(kept.end(), impact_allowed.begin(), impact_allowed.end());
      kept = detail::normalize(std::move(kept));
    } else {
      cx.left_stale[m] = detail::subtract(impact_allowed, kept);
    }
    if (r.include_in_progress) cx.in_progress_kept[m] = detail::intersect(kept, running);
    cx.sets[m] = std::move(kept);
  }
}

// Phase 2: tasks, one per run of up to k consecutive partitions; their index spans are kept in
// `cx.task_span` for the dependency search.
std::uint32_t runs_of(const PlanRequest& r, ModelId id) {
  return id.value < r.runs_by_model.size() && r.runs_by_model[id.value] > 0
             ? r.runs_by_model[id.value]
             : r.partitions_per_run;
}

void make_tasks(detail::Context& cx, detail::PlanColumns& cols) {
  const Graph& g = cx.graph;
  std::size_t total = 0;
  for (ModelId id : g.topological_order()) {
    const std::uint32_t k = runs_of(cx.request, id);
    for (const Span& s : cx.sets[id.value]) {
      total += static_cast<std::size_t>((s.size() + k - 1) / k);
    }
  }
  if (total >= std::numeric_limits<std::uint32_t>::max()) {
    throw InvalidInput(
        fmt::format("the plan would have {} tasks; expected fewer than 2^32 (raise "
                    "partitions_per_run or narrow the period)",
                    total));
  }
  cols.model.reserve(total);
  cols.start.reserve(total);
  cols.end.reserve(total);
  cols.parts.reserve(total);
  cx.task_lo.reserve(total);
  cx.first_task.assign(g.size(), 0);
  cx.task_total.assign(g.size(), 0);
  for (ModelId id : g.topological_order()) {
    const std::uint32_t m = id.value;
    if (!cx.selected[m]) continue;
    const Axis& axis = cx.axes[m];
    const std::uint32_t k = runs_of(cx.request, id);
    cx.first_task[m] = static_cast<std::uint32_t>(cols.model.size());
    for (const Span& s : cx.sets[m]) {
      for (std::int64_t lo = s.lo; lo < s.hi; lo += k) {
        const std::int64_t hi = std::min<std::int64_t>(lo + k, s.hi);
        cols.model.push_back(id);
        if (axis.partitioned()) {
          cols.start.push_back(axis.start_of(lo));
          cols.end.push_back(axis.start_of(hi));
        } else {
          cols.start.push_back(detail::kUnbounded);
          cols.end.push_back(detail::kUnbounded);
        }
        cols.parts.push_back(static_cast<std::uint32_t>(hi - lo));
        cx.task_lo.push_back(lo);
      }
    }
    cx.task_total[m] = static_cast<std::uint32_t>(cols.model.size()) - cx.first_task[m];
  }
}

// Phase 3: each task depends on exactly the tasks of selected parents whose partitions its
// mapping reads; waves are longest-path levels. Per edge a cursor walks the parent's tasks
// forward (mappings are monotone and a model's runs are sorted), and edges are visited in
// parent task order, so each task's dependencies come out sorted: O(T * parents + D).
void link_tasks(detail::Context& cx, detail::PlanColumns& cols) {
  const Graph& g = cx.graph;
  const std::size_t n = cols.model.size();
  cols.dep_offsets.assign(1, 0);
  cols.dep_offsets.reserve(n + 1);
  // Generous, so the array is not regrown and copied: capacity never written is address space
  // only (its pages are never touched).
  cols.deps.reserve(n * 8);
  cols.wave.assign(n, 0);
  std::uint32_t max_wave = 0;
  struct Link {
    const Edge* edge;
    std::uint32_t first;
    std::uint32_t last;
    bool whole;  // every parent task (mapping all, or an unpartitioned side)
    bool same;   // parent and child share one axis (grain, zone): reads are index arithmetic
    std::uint32_t cursor;
  };
  std::vector<Link> links;
  // Task t covers partitions [lo[t], lo[t] + parts[t]) of its model.
  const std::int64_t* lo = cx.task_lo.data();
  const std::uint32_t* parts = cols.parts.data();
  for (ModelId id : g.topological_order()) {
    const std::uint32_t m = id.value;
    if (!cx.selected[m] || cx.task_total[m] == 0) continue;
    const Axis& axis = cx.axes[m];
    links.clear();
    for (const Edge& e : g.in_edges(id)) {
      const std::uint32_t p = e.parent.value;
      if (!cx.selected[p] || cx.task_total[p] == 0) continue;
      const bool whole =
          !axis.partitioned() || !cx.axes[p].partitioned() || e.mapping.kind == MappingKind::all;
      const bool same =
          !whole && cx.axes[p].grain() == axis.grain() && cx.axes[p].tz() == axis.tz();
      links.push_back({&e, cx.first_task[p], cx.first_task[p] + cx.task_total[p], whole, same,
                       cx.first_task[p]});
    }
    std::sort(links.begin(), links.end(),
              [](const Link& a, const Link& b) { return a.first < b.first; });
    const std::uint32_t end = cx.first_task[m] + cx.task_total[m];
    for (std::uint32_t t = cx.first_task[m]; t < end; ++t) {
      std::uint32_t wave = 0;
      for (Link& l : links) {
        if (l.whole) {
          for (std::uint32_t d = l.first; d < l.last; ++d) {
            cols.deps.push_back(d);
            wave = std::max(wave, cols.wave[d] + 1);
          }
          continue;
        }
        const Mapping& mapping = l.edge->mapping;
        Span read{lo[t], lo[t] + parts[t]};
        if (!l.same) {
          read = detail::read_range(cx.axes[l.edge->parent.value], axis, mapping, read);
        } else if (mapping.kind == MappingKind::window) {
          read = {read.lo + mapping.start, read.hi + mapping.end};
        }
        while (l.cursor < l.last && lo[l.cursor] + parts[l.cursor] <= read.lo) ++l.cursor;
        for (std::uint32_t d = l.cursor; d < l.last && lo[d] < read.hi; ++d) {
          cols.deps.push_back(d);
          wave = std::max(wave, cols.wave[d] + 1);
        }
      }
      cols.wave[t] = wave;
      max_wave = std::max(max_wave, wave);
      cols.dep_offsets.push_back(cols.deps.size());
    }
  }
  cols.waves = n == 0 ? 0 : max_wave + 1;
}

}  // namespace

Plan plan(std::shared_ptr<const Graph> graph, PlanRequest request) {
  if (!graph) throw InvalidInput("plan() needs a graph");
  const Graph& g = *graph;
  check_request(g, request);

  detail::Context cx(g, request);
  plan_sets(cx);

  Plan out;
  detail::PlanColumns cols;
  make_tasks(cx, cols);
  link_tasks(cx, cols);

  out.graph_ = std::move(graph);
  out.model_ = std::move(cols.model);
  out.start_ = std::move(cols.start);
  out.end_ = std::move(cols.end);
  out.parts_ = std::move(cols.parts);
  out.wave_ = std::move(cols.wave);
  out.dep_offsets_ = std::move(cols.dep_offsets);
  out.deps_ = std::move(cols.deps);
  out.waves_ = cols.waves;
  cx.task_lo = {};  // free before scheduling

  for (ModelId id : g.topological_order()) {
    const std::uint32_t m = id.value;
    if (!cx.selected[m]) continue;
    ModelPlan mp;
    mp.model = id;
    mp.partitions = detail::total_length(cx.sets[m]);
    mp.tasks = cx.task_total[m];
    mp.first_task = cx.first_task[m];
    mp.partitions_per_run = runs_of(cx.request, id);
    for (const Span& s : cx.sets[m]) {
      if (cx.axes[m].partitioned()) {
        mp.periods.push_back({cx.axes[m].start_of(s.lo), cx.axes[m].start_of(s.hi)});
      }
    }
    out.models_.push_back(std::move(mp));
  }
  out.findings_ = detail::findings(cx, out);
  out.request_ = std::move(request);
  out.run_schedule();
  return out;
}

namespace detail {

Context::Context(const Graph& g, const PlanRequest& r)
    : graph(g),
      request(r),
      selected(g.size(), 0),
      sets(g.size()),
      limit(g.size(), 0),
      started(g.size(), 0),
      begin_index(g.size(), std::numeric_limits<std::int64_t>::min() / 4),
      has_begin(g.size(), 0),
      before_begin(g.size()),
      not_ended(g.size()),
      in_progress(g.size()),
      in_progress_kept(g.size()),
      left_stale(g.size()),
      unbounded_all(g.size()) {
  axes.reserve(g.size());
  // One axis (and so one calendar table) per (grain, zone): copies share the table.
  std::vector<Axis> distinct;
  for (std::uint32_t m = 0; m < g.size(); ++m) {
    const NodeSpec& n = g.node(ModelId{m});
    const Axis fresh(n.partitioning);
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](const Axis& a) {
      return a.partitioned() == fresh.partitioned() && a.grain() == fresh.grain() &&
             a.tz() == fresh.tz();
    });
    if (same == distinct.end()) same = distinct.insert(distinct.end(), fresh);
    axes.push_back(*same);
    if (n.partitioning) {
      // A partition is in progress when it started before as_of and ends after it; an as_of on
      // a partition boundary has none.
      started[m] = axes[m].index_of(r.as_of - 1) + 1;
      limit[m] = r.include_in_progress ? started[m] : axes[m].index_of(r.as_of);
      if (n.partitioning->begin) {
        has_begin[m] = 1;
        begin_index[m] = axes[m].index_of(*n.partitioning->begin);
      }
    }
  }
  for (ModelId id : r.selected) {
    if (g.node(id).kind == NodeKind::model) selected[id.value] = 1;
  }
}

}  // namespace detail

}  // namespace backfill
