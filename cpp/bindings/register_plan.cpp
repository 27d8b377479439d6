// Graph, selector and planner bindings. Inputs are converted and validated with the GIL held;
// graph construction, selection and planning run with it released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "backfill/arrow.hpp"
#include "backfill/error.hpp"
#include "backfill/graph.hpp"
#include "backfill/plan.hpp"
#include "backfill/select.hpp"
#include "convert.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace py = pybind11;

namespace {

using GraphPtr = std::shared_ptr<Graph>;  // pybind11 holders cannot be shared_ptr<const T>

template <class T>
T get(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

Mapping to_mapping(const py::handle& item, const std::string& model) {
  const auto t = py::reinterpret_borrow<py::tuple>(item);
  if (t.size() != 4) {
    throw InvalidInput(
        fmt::format("model '{}': a dependency must be (parent, mapping, start, end)", model));
  }
  Mapping m;
  m.kind = parse_mapping_kind(t[1].cast<std::string>());
  if (m.kind == MappingKind::window) {
    m.start = t[2].cast<std::int32_t>();
    m.end = t[3].cast<std::int32_t>();
  }
  return m;
}

NodeSpec to_node(const py::handle& item) {
  const auto d = py::reinterpret_borrow<py::dict>(item);
  NodeSpec n;
  n.name = get<std::string>(d, "name", "");
  n.kind = get<std::string>(d, "kind", "model") == "source" ? NodeKind::source : NodeKind::model;
  if (d.contains("grain") && !d["grain"].is_none()) {
    Partitioning p;
    p.grain = parse_grain(d["grain"].cast<std::string>());
    p.tz = to_zone(d.contains("tz") ? py::handle(d["tz"]) : py::none());
    if (d.contains("begin") && !d["begin"].is_none()) {
      p.begin = to_whole_seconds(d["begin"], p.tz, fmt::format("begin of '{}'", n.name));
    }
    n.partitioning = p;
  }
  n.strategy = parse_strategy(get<std::string>(d, "strategy", "replace"));
  n.source_kind = parse_source_kind(get<std::string>(d, "source_kind", "raw"));
  if (d.contains("retention") && !d["retention"].is_none()) {
    n.retention = d["retention"].cast<Seconds>();
  }
  n.event_time = get<std::string>(d, "event_time", "");
  n.tags = get<std::vector<std::string>>(d, "tags", {});
  if (d.contains("depends_on")) {
    for (auto dep : d["depends_on"]) {
      const auto t = py::reinterpret_borrow<py::tuple>(dep);
      n.depends_on.push_back({t[0].cast<std::string>(), to_mapping(dep, n.name)});
    }
  }
  return n;
}

GraphPtr make_graph(const py::iterable& nodes) {
  std::vector<NodeSpec> specs;
  for (auto item : nodes) specs.push_back(to_node(item));
  py::gil_scoped_release release;
  return std::make_shared<Graph>(std::move(specs));
}

py::list names_of(const Graph& g, const std::vector<ModelId>& ids) {
  py::list out;
  for (ModelId id : ids) out.append(g.node(id).name);
  return out;
}

py::list marked_in_order(const Graph& g, const std::vector<bool>& marks) {
  py::list out;
  for (ModelId id : g.topological_order()) {
    if (marks[id.value]) out.append(g.node(id).name);
  }
  return out;
}

std::vector<double> to_costs(const Graph& g, const py::dict& costs) {
  std::vector<double> out(g.size(), -1.0);
  for (auto [key, value] : costs) {
    const ModelId id = g.at(key.cast<std::string>());
    const auto c = value.cast<double>();
    if (!std::isfinite(c) || c < 0) {
      throw InvalidInput(fmt::format("cost of '{}' is {}; expected seconds per partition >= 0",
                                     key.cast<std::string>(), c));
    }
    out[id.value] = c;
  }
  return out;
}

std::vector<double> to_overheads(const Graph& g, const py::dict& overheads) {
  std::vector<double> out(g.size(), 0.0);
  for (auto [key, value] : overheads) {
    const auto c = value.cast<double>();
    if (!std::isfinite(c) || c < 0) {
      throw InvalidInput(fmt::format("task overhead of '{}' is {}; expected seconds per task >= 0",
                                     key.cast<std::string>(), c));
    }
    out[g.at(key.cast<std::string>()).value] = c;
  }
  return out;
}

std::vector<std::uint32_t> to_runs(const Graph& g, const py::dict& runs) {
  std::vector<std::uint32_t> out(g.size(), 0);
  for (auto [key, value] : runs) {
    const auto k = value.cast<std::int64_t>();
    if (k < 1 || k > std::numeric_limits<std::uint32_t>::max()) {
      throw InvalidInput(
          fmt::format("partitions per run of '{}' is {}; expected a positive "
                      "integer",
                      key.cast<std::string>(), k));
    }
    out[g.at(key.cast<std::string>()).value] = static_cast<std::uint32_t>(k);
  }
  return out;
}

Plan py_plan(const GraphPtr& graph, const std::vector<std::string>& selected, py::handle start,
             py::handle end, py::handle as_of, py::handle tz, std::string_view propagate,
             std::uint32_t partitions_per_run, std::uint32_t concurrency, bool allow_append,
             const py::dict& costs, double default_cost, const py::dict& runs,
             const py::dict& overheads, bool include_in_progress) {
  const TimeZone zone = to_zone(tz);
  PlanRequest r;
  for (const auto& name : selected) r.selected.push_back(graph->at(name));
  r.start = to_instant(start, zone).seconds;
  const auto e = to_instant(end, zone);
  r.end = e.seconds + (e.nanos != 0 ? 1 : 0);  // a fractional end still covers its partition
  r.as_of = to_instant(as_of, zone).seconds;
  r.propagate = parse_propagate(propagate);
  r.partitions_per_run = partitions_per_run;
  r.concurrency = concurrency;
  r.allow_append = allow_append;
  r.include_in_progress = include_in_progress;
  r.cost_per_partition = to_costs(*graph, costs);
  r.default_cost = default_cost;
  r.runs_by_model = to_runs(*graph, runs);
  r.task_overhead = to_overheads(*graph, overheads);
  py::gil_scoped_release release;
  return plan(graph, std::move(r));
}

py::dict model_dict(const Plan& p, const ModelPlan& mp) {
  const NodeSpec& n = p.graph().node(mp.model);
  py::dict d;
  d["model"] = n.name;
  d["grain"] = n.partitioning ? py::cast(std::string(to_string(n.partitioning->grain)))
                              : py::object(py::none());
  d["strategy"] = std::string(to_string(n.strategy));
  d["partitions"] = mp.partitions;
  d["tasks"] = mp.tasks;
  d["first_task"] = mp.first_task;
  py::list periods;
  for (const auto& iv : mp.periods) {
    periods.append(py::make_tuple(to_datetime(iv.start), to_datetime(iv.end)));
  }
  d["periods"] = periods;
  if (mp.tasks > 0 && n.partitioning) {
    d["first"] = p.task_label(mp.first_task);
    const auto last_task = mp.first_task + mp.tasks - 1;
    const Partition last =
        partition_of(p.task_end()[last_task] - 1, n.partitioning->grain, n.partitioning->tz);
    d["last"] = last.label();
  } else {
    d["first"] = mp.tasks > 0 ? py::cast("full") : py::object(py::none());
    d["last"] = d["first"];
  }
  d["cost_per_partition"] = mp.cost_per_partition;
  d["cost_assumed"] = mp.cost_assumed;
  d["task_overhead"] = mp.task_overhead;
  d["partitions_per_run"] = mp.partitions_per_run;
  d["work"] = mp.work;
  d["sched_start"] = mp.sched_start;
  d["sched_end"] = mp.sched_end;
  return d;
}

py::dict task_dict(const Plan& p, std::uint32_t t) {
  if (t >= p.task_count()) {
    throw InvalidInput(
        fmt::format("task {} out of range; the plan has {} tasks", t, p.task_count()));
  }
  const NodeSpec& n = p.graph().node(p.task_model()[t]);
  py::dict d;
  d["task_id"] = t;
  d["model"] = n.name;
  const bool partitioned = n.partitioning.has_value();
  d["start"] = partitioned ? to_datetime(p.task_start()[t]) : py::object(py::none());
  d["end"] = partitioned ? to_datetime(p.task_end()[t]) : py::object(py::none());
  d["label"] = p.task_label(t);
  d["partitions"] = p.task_partitions()[t];
  d["wave"] = p.task_wave()[t];
  d["sched_start"] = p.sched_start()[t];
  d["sched_end"] = p.sched_end()[t];
  py::list deps;
  for (std::uint32_t dep : p.depends_on(t)) deps.append(dep);
  d["depends_on"] = deps;
  return d;
}

}  // namespace

void register_plan(py::module_& m) {
  py::class_<Graph, GraphPtr>(m, "Graph", "A validated model graph (sources and models).")
      .def(py::init(&make_graph), py::arg("nodes"))
      .def_property_readonly("size", &Graph::size)
      .def("topological_order", [](const Graph& g) { return names_of(g, g.topological_order()); })
      .def(
          "upstream",
          [](const Graph& g, const std::string& name, int depth) {
            return marked_in_order(g, g.ancestors(g.at(name), depth));
          },
          py::arg("name"), py::arg("depth") = -1)
      .def(
          "downstream",
          [](const Graph& g, const std::string& name, int depth) {
            return marked_in_order(g, g.descendants(g.at(name), depth));
          },
          py::arg("name"), py::arg("depth") = -1)
      .def(
          "parents",
          [](const Graph& g, const std::string& name) {
            py::list out;
            for (const Edge& e : g.in_edges(g.at(name))) {
              out.append(py::make_tuple(g.node(e.parent).name, to_string(e.mapping)));
            }
            return out;
          },
          py::arg("name"))
      .def(
          "select",
          [](const Graph& g, const std::string& selector, const std::string& exclude) {
            std::vector<ModelId> ids;
            {
              py::gil_scoped_release release;
              ids = select(g, selector, exclude);
            }
            return names_of(g, ids);
          },
          py::arg("selector"), py::arg("exclude") = "");

  py::class_<Plan>(m, "Plan", "A planned backfill: tasks, dependencies, schedule, findings.")
      .def_property_readonly("task_count", &Plan::task_count)
      .def_property_readonly("dependency_count", &Plan::dependency_count)
      .def_property_readonly("wave_count", &Plan::wave_count)
      .def_property_readonly("ok", &Plan::ok)
      .def_property_readonly("concurrency", [](const Plan& p) { return p.schedule().concurrency; })
      .def_property_readonly("total_work", [](const Plan& p) { return p.schedule().total_work; })
      .def_property_readonly("makespan", [](const Plan& p) { return p.schedule().makespan; })
      .def_property_readonly("critical_path",
                             [](const Plan& p) { return p.schedule().critical_path; })
      .def_property_readonly("as_of", [](const Plan& p) { return to_datetime(p.request().as_of); })
      .def_property_readonly("start", [](const Plan& p) { return to_datetime(p.request().start); })
      .def_property_readonly("end", [](const Plan& p) { return to_datetime(p.request().end); })
      .def_property_readonly("propagate",
                             [](const Plan& p) {
                               return p.request().propagate == Propagate::impact ? "impact"
                                                                                 : "clip";
                             })
      .def_property_readonly("include_in_progress",
                             [](const Plan& p) { return p.request().include_in_progress; })
      .def_property_readonly("partitions_per_run",
                             [](const Plan& p) { return p.request().partitions_per_run; })
      .def("models",
           [](const Plan& p) {
             py::list out;
             for (const auto& mp : p.models()) out.append(model_dict(p, mp));
             return out;
           })
      .def("findings",
           [](const Plan& p) {
             py::list out;
             for (const auto& f : p.findings()) {
               out.append(
                   py::make_tuple(f.code, std::string(to_string(f.severity)), f.model, f.message));
             }
             return out;
           })
      .def("tasks_table",
           [](const Plan& p) {
             std::shared_ptr<arrow::Table> t;
             {
               py::gil_scoped_release release;
               t = std::make_shared<arrow::Table>(task_table(p));
             }
             return t;
           })
      .def("task", &task_dict, py::arg("task_id"))
      .def(
          "depends_on",
          [](const Plan& p, std::uint32_t t) {
            if (t >= p.task_count()) throw InvalidInput(fmt::format("task {} out of range", t));
            auto deps = p.depends_on(t);
            return std::vector<std::uint32_t>(deps.begin(), deps.end());
          },
          py::arg("task_id"))
      .def(
          "rescheduled",
          [](const Plan& p, const py::dict& costs, double default_cost, std::uint32_t concurrency,
             const py::dict& overheads, std::vector<double> sizes) {
            auto c = to_costs(p.graph(), costs);
            auto o = to_overheads(p.graph(), overheads);
            py::gil_scoped_release release;
            return p.rescheduled(std::move(c), default_cost, concurrency, std::move(o),
                                 std::move(sizes));
          },
          py::arg("costs"), py::arg("default_cost"), py::arg("concurrency"),
          py::arg("overheads") = py::dict(), py::arg("sizes") = std::vector<double>{});

  m.def("plan", &py_plan, py::arg("graph"), py::arg("selected"), py::arg("start"), py::arg("end"),
        py::arg("as_of"), py::arg("tz") = py::none(), py::arg("propagate") = "impact",
        py::arg("partitions_per_run") = 1, py::arg("concurrency") = 4,
        py::arg("allow_append") = false, py::arg("costs") = py::dict(),
        py::arg("default_cost") = 1.0, py::arg("runs") = py::dict(),
        py::arg("overheads") = py::dict(), py::arg("include_in_progress") = false);
}

}  // namespace backfill::bindings
