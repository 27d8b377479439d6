// _core.ArrowTable: the Arrow result type every area returns (wrapped by backfill._arrow).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "arrow_py.hpp"
#include "backfill/arrow.hpp"
#include "backfill/error.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace {

using arrow::Table;

std::size_t column_position(const Table& t, py::handle key) {
  if (py::isinstance<py::int_>(key)) {
    auto i = key.cast<std::int64_t>();
    const auto n = static_cast<std::int64_t>(t.num_columns());
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      throw NotFound(fmt::format("column index {} out of range for a table of {} columns",
                                 key.cast<std::int64_t>(), n));
    }
    return static_cast<std::size_t>(i);
  }
  const auto name = key.cast<std::string>();
  for (std::size_t i = 0; i < t.num_columns(); ++i) {
    if (t.names()[i] == name) return i;
  }
  std::string names;
  for (const auto& n : t.names()) names += (names.empty() ? "" : ", ") + n;
  throw NotFound(fmt::format("no column '{}' (columns: {})", name, names));
}

// Copies any Arrow-compatible object into an owned table (exercises the whole import path).
std::shared_ptr<Table> copy_table(py::handle obj) {
  arrow::ImportedTable in = import_py(obj, "table");
  py::gil_scoped_release release;
  std::vector<arrow::RowRef> rows;
  rows.reserve(static_cast<std::size_t>(in.num_rows()));
  for (std::size_t b = 0; b < in.batches().size(); ++b) {
    for (std::int64_t r = 0; r < in.batches()[b].num_rows(); ++r) {
      rows.push_back(arrow::RowRef{static_cast<std::int32_t>(b), r});
    }
  }
  auto out = std::make_shared<Table>();
  for (std::size_t c = 0; c < in.fields().size(); ++c) {
    out->add(in.fields()[c].name, arrow::take_column(in, c, rows));
  }
  return out;
}

}  // namespace

void register_arrow(py::module_& m) {
  py::class_<Table, std::shared_ptr<Table>>(
      m, "ArrowTable",
      "An Arrow record batch owned by the C++ core (use backfill._arrow.ArrowTable)")
      .def_property_readonly("num_rows", &Table::num_rows)
      .def_property_readonly("num_columns", &Table::num_columns)
      .def_property_readonly("column_names", [](const Table& t) { return t.names(); })
      .def_property_readonly("types",
                             [](const Table& t) {
                               std::vector<std::string> out;
                               for (const auto& c : t.columns()) out.push_back(to_string(c.type));
                               return out;
                             })
      .def(
          "column",
          [](const Table& t, py::handle key) {
            return to_pylist(t.columns()[column_position(t, key)].view());
          },
          py::arg("key"))
      .def(
          "__arrow_c_stream__",
          [](const std::shared_ptr<Table>& t, py::handle requested_schema) {
            (void)requested_schema;  // we export our own schema; consumers may cast
            return stream_capsule(t);
          },
          py::arg("requested_schema") = py::none())
      .def("__len__", &Table::num_rows);
  // Every builder type once, so tests can check pyarrow reads what the builders export.
  m.def("_arrow_builder_sample", [] {
    auto t = std::make_shared<Table>();
    t->add("i64", arrow::int64_column({1, -2, 3}, {true, false, true}));
    t->add("i32", arrow::int32_column({7, 8, 9}));
    t->add("u64", arrow::uint64_column({0, UINT64_MAX, 5}));
    t->add("f64", arrow::float64_column({0.5, -1.25, 1e300}));
    t->add("b", arrow::bool_column({true, false, true}, {true, true, false}));
    t->add("s", arrow::utf8_column({"a", "", "h\xc3\xa9llo"}));
    t->add("ts_s", arrow::timestamp_column({0, 86400, -1}, arrow::TimeUnit::second, "UTC"));
    t->add("ts_us", arrow::timestamp_column({0, 1, 1767225600000000}, arrow::TimeUnit::micro,
                                            "Europe/Berlin"));
    t->add("d", arrow::date32_column({0, 20000, -1}));
    t->add("l", arrow::list_int64_column({{1, 2}, {}, {3}}, {true, false, true}));
    return t;
  });
  m.def("arrow_copy", &copy_table, py::arg("table"),
        "Imports any Arrow-compatible object and copies it into an ArrowTable (testing aid).");
}

}  // namespace backfill::bindings
