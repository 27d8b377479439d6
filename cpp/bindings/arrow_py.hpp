// Arrow PyCapsule interface glue shared by every binding that takes or returns tables.
//
//   arrow::ImportedTable t = import_py(obj, "old");          // holding the GIL
//   return py::cast(std::make_shared<arrow::Table>(...));     // an _core.ArrowTable
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>

#include "backfill/arrow.hpp"

namespace backfill::bindings {

namespace py = pybind11;

// Consumes any object exposing __arrow_c_stream__ or __arrow_c_array__ (pyarrow, polars, DuckDB,
// pandas >= 2.2, nanoarrow...), or a pandas DataFrame through pyarrow. Throws InvalidInput naming
// `what` and the object's type otherwise. Call with the GIL held (producers may need it).
[[nodiscard]] arrow::ImportedTable import_py(py::handle obj, std::string_view what);

// Python values of an array (None for nulls): ints, floats, bool, str, bytes, Decimal, date,
// datetime (tz-aware when the type has a zone), time, timedelta, lists and dicts.
[[nodiscard]] py::list to_pylist(const arrow::ArrayView& array);

// A PyCapsule "arrow_array_stream" owning a stream of `table`.
[[nodiscard]] py::object stream_capsule(std::shared_ptr<const arrow::Table> table);

}  // namespace backfill::bindings
