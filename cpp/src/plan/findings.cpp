// What would go wrong with a plan, each finding naming the model, the periods and a way out.
#include <fmt/format.h>

#include "plan/plan_internal.hpp"

namespace backfill::detail {

namespace {

std::string format_duration(Seconds s) {
  if (s % 86400 == 0) return fmt::format("{}d", s / 86400);
  if (s % 3600 == 0) return fmt::format("{}h", s / 3600);
  if (s % 60 == 0) return fmt::format("{}m", s / 60);
  return fmt::format("{}s", s);
}

struct Out {
  std::vector<PlanFinding>& list;
  void add(std::string_view code, Severity sev, const std::string& model, std::string message) {
    list.push_back({std::string(code), sev, model, std::move(message)});
  }
};

void retention(const Context& cx, ModelId id, const Edge& e, Out& out) {
  const Graph& g = cx.graph;
  const NodeSpec& src = g.node(e.parent);
  const NodeSpec& model = g.node(id);
  const Seconds cutoff = cx.request.as_of - *src.retention;
  const Axis& axis = cx.axes[id.value];
  const Axis& paxis = cx.axes[e.parent.value];
  const Spans& set = cx.sets[id.value];
  const std::string kept = fmt::format("{} keeps {} of data (nothing before {} as of {})", src.name,
                                       format_duration(*src.retention), format_instant(cutoff),
                                       format_instant(cx.request.as_of));
  const std::string tail =
      src.source_kind == SourceKind::kafka
          ? "; a Kafka topic replays only within its retention (by resetting the consumer "
            "group's offsets), so reloading those periods from the source is the last resort"
          : "; reloading those periods from the source is the last resort";
  if (!axis.partitioned()) {
    out.add("RETENTION", Severity::error, model.name,
            fmt::format("{} is rebuilt whole from {}, but {}: the rebuild would lose everything "
                        "older{}",
                        model.name, src.name, kept, tail));
    return;
  }
  Spans lost;
  if (!paxis.partitioned() || e.mapping.kind == MappingKind::all) {
    // Each partition reads the whole source: those whose period starts before the cutoff lost
    // rows.
    lost = intersect(set,
                     {std::numeric_limits<std::int64_t>::min() / 4, axis.index_of(cutoff - 1) + 1});
  } else {
    const Span read = read_range(paxis, axis, e.mapping, {set.front().lo, set.back().hi});
    const std::int64_t retained = paxis.index_of(cutoff - 1) + 1;  // first wholly kept
    if (read.lo < retained) {
      const Span gone{read.lo, std::min(read.hi, retained)};
      lost = intersect(set, impacted(paxis, axis, e.mapping, gone, {}));
    }
  }
  if (lost.empty()) return;
  out.add("RETENTION", Severity::error, model.name,
          fmt::format("{}: {} of {} read older data and cannot be replayed from it{}", kept,
                      describe(axis, lost), model.name, tail));
}

}  // namespace

std::vector<PlanFinding> findings(const Context& cx, const Plan& plan) {
  const Graph& g = cx.graph;
  const PlanRequest& r = cx.request;
  std::vector<PlanFinding> list;
  Out out{list};

  for (const ModelPlan& mp : plan.models()) {
    const ModelId id = mp.model;
    const std::uint32_t m = id.value;
    const NodeSpec& n = g.node(id);
    const Axis& axis = cx.axes[m];
    const Spans& set = cx.sets[m];
    const std::string what = describe(axis, set);

    if (mp.tasks > 0 && n.strategy == Strategy::append) {
      out.add("APPEND_STRATEGY", r.allow_append ? Severity::warning : Severity::error, n.name,
              fmt::format("{} appends rows: re-running {} would add their rows a second time; "
                          "make it replace the period or merge on a unique key{}",
                          n.name, what,
                          r.allow_append ? " (allowed by allow_append)"
                                         : ", or pass allow_append=True if its SQL clears the "
                                           "period itself"));
    }
    if (mp.tasks > 0 && !axis.partitioned()) {
      out.add("FULL_REBUILD", Severity::info, n.name,
              n.strategy == Strategy::view
                  ? fmt::format("{} is a view: recreated once, after its inputs", n.name)
                  : fmt::format("{} is unpartitioned (strategy {}): rebuilt whole, once, after "
                                "every task it reads",
                                n.name, to_string(n.strategy)));
    }
    if (axis.partitioned() && !cx.before_begin[m].empty()) {
      out.add("BEFORE_BEGIN", Severity::info, n.name,
              fmt::format("{} begins at {}: {} requested before it were skipped", n.name,
                          axis.partition(cx.begin_index[m]).label(),
                          describe(axis, {cx.before_begin[m]})));
    }
    if (axis.partitioned() && !cx.in_progress[m].empty()) {
      // Published by the regular runs as it fills, so leaving it out leaves old numbers.
      out.add("STALE_DOWNSTREAM", Severity::warning, n.name,
              fmt::format("{} of {} is still in progress at as_of {}: the regular runs have "
                          "published it with the old logic and inputs, and this backfill leaves "
                          "it stale until the regular schedule re-runs it; pass "
                          "include_in_progress=True (--include-in-progress) to rebuild it now",
                          describe(axis, cx.in_progress[m]), n.name, format_instant(r.as_of)));
    }
    if (axis.partitioned() && !cx.in_progress_kept[m].empty()) {
      out.add("IN_PROGRESS", Severity::info, n.name,
              fmt::format("{} of {} is still in progress at as_of {}: rebuilt with the data so "
                          "far; the regular schedule re-runs it as it fills",
                          describe(axis, cx.in_progress_kept[m]), n.name, format_instant(r.as_of)));
    }
    if (axis.partitioned() && !cx.not_ended[m].empty()) {
      out.add("NOT_ENDED", Severity::info, n.name,
              fmt::format("{} of {} had not started by as_of {} and were left to the regular "
                          "runs (pass a later as_of to include them)",
                          describe(axis, cx.not_ended[m]), n.name, format_instant(r.as_of)));
    }
    if (!cx.left_stale[m].empty()) {
      out.add("CLIPPED_IMPACT", Severity::warning, n.name,
              fmt::format("{} of {} read changed upstream partitions but lie outside the "
                          "requested period, so they keep the old numbers; use "
                          "propagate='impact' to rebuild them",
                          describe(axis, cx.left_stale[m]), n.name));
    }
    if (!cx.unbounded_all[m].empty() && mp.tasks > 0) {
      out.add("CLIPPED_IMPACT", Severity::warning, n.name,
              fmt::format("{} reads all of {}, so every partition of it changes, but it has no "
                          "begin: only the requested period is planned; set begin on {} to "
                          "rebuild its whole history",
                          n.name, cx.unbounded_all[m], n.name));
    }
    if (mp.tasks == 0) continue;
    for (const Edge& e : g.in_edges(id)) {
      const NodeSpec& parent = g.node(e.parent);
      if (parent.kind == NodeKind::source && parent.retention) retention(cx, id, e, out);
      if (axis.partitioned() && parent.partitioning && parent.event_time.empty() &&
          e.mapping.kind != MappingKind::all) {
        out.add("FULL_SCAN_INPUT", Severity::warning, n.name,
                fmt::format("{} reads {}, which is partitioned by {} but has no event_time "
                            "column, so each of its {} runs scans all of {}; set event_time on "
                            "{}",
                            n.name, parent.name, to_string(parent.partitioning->grain), mp.tasks,
                            parent.name, parent.name));
      }
    }
  }

  // Not-selected models downstream of rebuilt ones keep the old numbers. `cause` is the nearest
  // rebuilt ancestor (topological order makes one pass enough).
  std::vector<std::int64_t> cause(g.size(), -1);
  for (const ModelPlan& mp : plan.models()) {
    if (mp.tasks > 0) cause[mp.model.value] = mp.model.value;
  }
  for (ModelId id : g.topological_order()) {
    const NodeSpec& n = g.node(id);
    if (cx.selected[id.value] || n.kind != NodeKind::model) continue;
    for (const Edge& e : g.in_edges(id)) {
      if (cause[e.parent.value] >= 0) {
        cause[id.value] = cause[e.parent.value];
        break;
      }
    }
    if (cause[id.value] < 0) continue;
    const std::string& root = g.node(ModelId{static_cast<std::uint32_t>(cause[id.value])}).name;
    out.add("STALE_DOWNSTREAM", Severity::warning, n.name,
            fmt::format("{} is downstream of {} but not selected: it will keep showing the old "
                        "numbers for the rebuilt periods; select '{}+' to rebuild it too",
                        n.name, root, root));
  }
  return list;
}

}  // namespace backfill::detail
