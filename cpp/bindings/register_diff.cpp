// _core.diff: inputs converted and imported holding the GIL, the diff run without it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "arrow_py.hpp"
#include "backfill/diff.hpp"
#include "backfill/error.hpp"
#include "convert.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace {

py::dict summary_dict(const diff::Summary& s) {
  py::dict d;
  d["rows_old"] = s.rows_old;
  d["rows_new"] = s.rows_new;
  d["matched"] = s.matched;
  d["unchanged"] = s.unchanged;
  d["changed"] = s.changed;
  d["added"] = s.added;
  d["removed"] = s.removed;
  d["duplicate_keys"] = s.duplicate_keys;
  d["duplicate_rows_old"] = s.duplicate_rows_old;
  d["duplicate_rows_new"] = s.duplicate_rows_new;
  d["null_keys_old"] = s.null_keys_old;
  d["null_keys_new"] = s.null_keys_new;
  d["schema_changed"] = s.schema_changed;
  d["identical"] = s.identical();
  return d;
}

diff::Options make_options(std::vector<std::string> key,
                           std::optional<std::vector<std::string>> columns,
                           std::vector<std::string> exclude,
                           std::optional<std::string> partition_by, std::string_view grain,
                           py::handle tz,
                           const std::map<std::string, std::pair<double, double>>& tolerance,
                           std::optional<std::pair<double, double>> default_tolerance,
                           std::optional<std::vector<std::string>> measures, std::int64_t sample,
                           std::string_view on_duplicate, unsigned threads) {
  diff::Options o;
  o.key = std::move(key);
  o.columns = std::move(columns);
  o.exclude = std::move(exclude);
  o.partition_by = std::move(partition_by);
  o.grain = parse_grain(grain);
  o.tz = to_zone(tz);
  for (const auto& [c, t] : tolerance) o.tolerance[c] = diff::Tolerance{t.first, t.second};
  if (default_tolerance) {
    o.default_tolerance = diff::Tolerance{default_tolerance->first, default_tolerance->second};
  }
  o.measures = std::move(measures);
  o.sample = sample;
  o.on_duplicate = diff::parse_on_duplicate(on_duplicate);
  o.threads = threads;
  return o;
}

py::dict result_dict(diff::Result& r) {
  py::dict out;
  out["summary"] = summary_dict(r.summary);
  out["key"] = r.key;
  out["measures"] = r.measures;
  out["partition_by"] = r.partition_by;
  out["schema"] = r.schema;
  out["columns"] = r.columns;
  out["partitions"] = r.partitions;
  out["changed_sample"] = r.changed_sample;
  out["added_sample"] = r.added_sample;
  out["removed_sample"] = r.removed_sample;
  out["timings"] = r.timings;
  return out;
}

py::dict py_diff(py::handle old_obj, py::handle new_obj, std::vector<std::string> key,
                 std::optional<std::vector<std::string>> columns, std::vector<std::string> exclude,
                 std::optional<std::string> partition_by, std::string_view grain, py::handle tz,
                 const std::map<std::string, std::pair<double, double>>& tolerance,
                 std::optional<std::pair<double, double>> default_tolerance,
                 std::optional<std::vector<std::string>> measures, std::int64_t sample,
                 std::string_view on_duplicate, unsigned threads) {
  const diff::Options o = make_options(
      std::move(key), std::move(columns), std::move(exclude), std::move(partition_by), grain, tz,
      tolerance, default_tolerance, std::move(measures), sample, on_duplicate, threads);
  arrow::ImportedTable a = import_py(old_obj, "old");
  arrow::ImportedTable b = import_py(new_obj, "new");
  diff::Result r;
  {
    py::gil_scoped_release release;
    r = diff::diff(a, b, o);
  }
  return result_dict(r);
}

// _core.DiffStream: each pair imported holding the GIL, diffed without it, released (the
// producers' release callbacks) holding it again.
class PyStream {
 public:
  explicit PyStream(diff::Options o) : stream_(std::move(o)) {}

  void add(py::handle old_obj, py::handle new_obj) {
    arrow::ImportedTable a = import_py(old_obj, "old");
    arrow::ImportedTable b = import_py(new_obj, "new");
    py::gil_scoped_release release;
    stream_.add(a, b);
  }

  std::optional<py::dict> finish() {
    std::optional<diff::Result> r;
    {
      py::gil_scoped_release release;
      r = stream_.finish();
    }
    if (!r) return std::nullopt;
    return result_dict(*r);
  }

  [[nodiscard]] bool whole_needed() const noexcept { return stream_.whole_needed(); }
  [[nodiscard]] std::int64_t pairs() const noexcept { return stream_.pairs(); }
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> carried() const noexcept {
    return stream_.carried();
  }

 private:
  diff::Stream stream_;
};

}  // namespace

void register_diff(py::module_& m) {
  m.def("diff", &py_diff, py::arg("old"), py::arg("new"), py::arg("key"),
        py::arg("columns") = py::none(), py::arg("exclude") = std::vector<std::string>{},
        py::arg("partition_by") = py::none(), py::arg("grain") = "day", py::arg("tz") = py::none(),
        py::arg("tolerance") = std::map<std::string, std::pair<double, double>>{},
        py::arg("default_tolerance") = py::none(), py::arg("measures") = py::none(),
        py::arg("sample") = 10, py::arg("on_duplicate") = "error", py::arg("threads") = 0U);
  py::class_<PyStream>(m, "DiffStream")
      .def(
          py::init([](std::vector<std::string> key, std::optional<std::vector<std::string>> columns,
                      std::vector<std::string> exclude, std::optional<std::string> partition_by,
                      std::string_view grain, py::handle tz,
                      const std::map<std::string, std::pair<double, double>>& tolerance,
                      std::optional<std::pair<double, double>> default_tolerance,
                      std::optional<std::vector<std::string>> measures, std::int64_t sample,
                      std::string_view on_duplicate, unsigned threads) {
            return std::make_unique<PyStream>(
                make_options(std::move(key), std::move(columns), std::move(exclude),
                             std::move(partition_by), grain, tz, tolerance, default_tolerance,
                             std::move(measures), sample, on_duplicate, threads));
          }),
          py::arg("key"), py::arg("columns") = py::none(),
          py::arg("exclude") = std::vector<std::string>{}, py::arg("partition_by") = py::none(),
          py::arg("grain") = "day", py::arg("tz") = py::none(),
          py::arg("tolerance") = std::map<std::string, std::pair<double, double>>{},
          py::arg("default_tolerance") = py::none(), py::arg("measures") = py::none(),
          py::arg("sample") = 10, py::arg("on_duplicate") = "error", py::arg("threads") = 0U)
      .def("add", &PyStream::add, py::arg("old"), py::arg("new"))
      .def("finish", &PyStream::finish)
      .def_property_readonly("whole_needed", &PyStream::whole_needed)
      .def_property_readonly("pairs", &PyStream::pairs)
      .def_property_readonly("carried", &PyStream::carried);
}

}  // namespace backfill::bindings
