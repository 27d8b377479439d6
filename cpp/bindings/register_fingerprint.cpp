// _core.fingerprint: the table imported holding the GIL, hashed without it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "arrow_py.hpp"
#include "backfill/fingerprint.hpp"
#include "convert.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace {

py::dict fingerprint_dict(const fingerprint::Fingerprint& f) {
  py::dict d;
  d["kind"] = std::string(fingerprint::kKind);
  d["rows"] = f.rows;
  d["digest"] = f.digest();
  py::dict cols;
  for (std::size_t i = 0; i < f.columns.size(); ++i)
    cols[py::str(f.columns[i])] = f.column_digest(i);
  d["columns"] = cols;
  return d;
}

py::dict py_fingerprint(py::handle table, std::optional<std::vector<std::string>> columns,
                        std::optional<std::string> partition_by, std::string_view grain,
                        py::handle tz, unsigned threads) {
  fingerprint::Options o;
  o.columns = std::move(columns);
  o.partition_by = std::move(partition_by);
  o.grain = parse_grain(grain);
  o.tz = to_zone(tz);
  o.threads = threads;
  arrow::ImportedTable t = import_py(table, "table");
  fingerprint::Result r;
  std::shared_ptr<arrow::Table> parts;
  {
    py::gil_scoped_release release;
    r = fingerprint::fingerprint(t, o);
    if (o.partition_by) parts = fingerprint::partitions_table(r);
  }
  py::dict out = fingerprint_dict(r.total);
  if (parts) {
    out["partitions"] = parts;
    py::list by;
    for (const auto& p : r.partitions) {
      by.append(py::make_tuple(p.partition ? py::object(py::str(p.partition->label())) : py::none(),
                               fingerprint_dict(p.fingerprint)));
    }
    out["by_partition"] = by;
  } else {
    out["partitions"] = py::none();
    out["by_partition"] = py::list();
  }
  return out;
}

}  // namespace

void register_fingerprint(py::module_& m) {
  m.def("fingerprint", &py_fingerprint, py::arg("table"), py::arg("columns") = py::none(),
        py::arg("partition_by") = py::none(), py::arg("grain") = "day", py::arg("tz") = py::none(),
        py::arg("threads") = 0U);
  m.def("_fingerprint_columns_table",
        [](const std::vector<std::string>& names, const std::vector<std::string>& digests) {
          auto t = std::make_shared<arrow::Table>();
          t->add("column", arrow::utf8_column(names));
          t->add("digest", arrow::utf8_column(digests));
          return t;
        });
}

}  // namespace backfill::bindings
