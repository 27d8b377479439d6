#include "arrow_py.hpp"

#include <cstring>

#include <fmt/format.h>

#include "backfill/error.hpp"

namespace backfill::bindings {
namespace {

using arrow::ArrayView;
using arrow::TimeUnit;
using arrow::TypeId;

struct PyTypes {
  py::object date, datetime, time, timedelta, utc, zoneinfo, decimal, epoch_utc, epoch_naive,
      epoch_date;
};

const PyTypes& pytypes() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<PyTypes> storage;
  return storage
      .call_once_and_store_result([] {
        auto dt = py::module_::import("datetime");
        PyTypes t;
        t.date = dt.attr("date");
        t.datetime = dt.attr("datetime");
        t.time = dt.attr("time");
        t.timedelta = dt.attr("timedelta");
        t.utc = dt.attr("timezone").attr("utc");
        t.zoneinfo = py::module_::import("zoneinfo").attr("ZoneInfo");
        t.decimal = py::module_::import("decimal").attr("Decimal");
        t.epoch_utc = t.datetime(1970, 1, 1, py::arg("tzinfo") = t.utc);
        t.epoch_naive = t.datetime(1970, 1, 1);
        t.epoch_date = t.date(1970, 1, 1);
        return t;
      })
      .get_stored();
}

std::int64_t per_second(TimeUnit u) {
  switch (u) {
    case TimeUnit::second: return 1;
    case TimeUnit::milli: return 1000;
    case TimeUnit::micro: return 1000000;
    case TimeUnit::nano: return 1000000000;
  }
  return 1;
}

// A timedelta for `v` units (nanoseconds are floored to microseconds: Python has no finer unit).
py::object delta_of(std::int64_t v, TimeUnit u) {
  const auto& t = pytypes();
  const std::int64_t ps = per_second(u);
  std::int64_t secs = v / ps;
  std::int64_t rem = v % ps;
  if (rem < 0) {
    rem += ps;
    secs -= 1;
  }
  const std::int64_t micros = ps >= 1000000 ? rem / (ps / 1000000) : rem * (1000000 / ps);
  return t.timedelta(py::arg("seconds") = secs, py::arg("microseconds") = micros);
}

py::object value_at(const ArrayView& a, std::int64_t i) {
  if (!a.is_valid(i)) return py::none();
  if (a.dictionary) {
    const std::int64_t k = a.type->id == TypeId::uint64
                               ? static_cast<std::int64_t>(a.values<std::uint64_t>()[i])
                               : a.int_at(i);
    return value_at(*a.dictionary, k);
  }
  const auto& t = pytypes();
  const auto& type = *a.type;
  switch (type.id) {
    case TypeId::null: return py::none();
    case TypeId::boolean: return py::bool_(a.bool_at(i));
    case TypeId::int8:
    case TypeId::int16:
    case TypeId::int32:
    case TypeId::int64:
    case TypeId::uint8:
    case TypeId::uint16:
    case TypeId::uint32: return py::int_(a.int_at(i));
    case TypeId::uint64: return py::int_(a.values<std::uint64_t>()[i]);
    case TypeId::float16: return py::float_(a.float16_at(i));
    case TypeId::float32: return py::float_(static_cast<double>(a.values<float>()[i]));
    case TypeId::float64: return py::float_(a.values<double>()[i]);
    case TypeId::decimal128: {
      const auto* p = a.values<std::uint64_t>() + i;  // pairs of words, little-endian
      const std::uint64_t lo =
          reinterpret_cast<const std::uint64_t*>(a.buffers[1])[2 * (a.offset + i)];
      const auto hi = static_cast<std::int64_t>(
          reinterpret_cast<const std::uint64_t*>(a.buffers[1])[2 * (a.offset + i) + 1]);
      (void)p;
      py::object n = (py::int_(hi).attr("__lshift__")(64)).attr("__or__")(py::int_(lo));
      // Decimal("<digits>E<-scale>") is exact; scaleb would round to the context's 28 digits.
      return t.decimal(py::str(n).attr("__add__")(py::str(fmt::format("E{}", -type.scale))));
    }
    case TypeId::utf8:
    case TypeId::large_utf8:
    case TypeId::utf8_view: {
      auto s = a.bytes_at(i);
      return py::str(s.data(), s.size());
    }
    case TypeId::binary:
    case TypeId::large_binary:
    case TypeId::binary_view:
    case TypeId::fixed_binary: {
      auto s = a.bytes_at(i);
      return py::bytes(s.data(), s.size());
    }
    case TypeId::date32: return t.epoch_date + t.timedelta(py::arg("days") = a.int_at(i));
    case TypeId::date64:
      return t.epoch_date + t.timedelta(py::arg("days") = a.values<std::int64_t>()[i] / 86400000);
    case TypeId::time32:
    case TypeId::time64: {
      return (t.epoch_naive + delta_of(a.int_at(i), type.unit)).attr("time")();
    }
    case TypeId::timestamp: {
      const auto v = a.values<std::int64_t>()[i];
      if (type.tz.empty()) return t.epoch_naive + delta_of(v, type.unit);
      py::object utc = t.epoch_utc + delta_of(v, type.unit);
      if (type.tz == "UTC" || type.tz == "Etc/UTC" || type.tz == "+00:00") return utc;
      return utc.attr("astimezone")(t.zoneinfo(type.tz));
    }
    case TypeId::duration: return delta_of(a.values<std::int64_t>()[i], type.unit);
    case TypeId::list:
    case TypeId::large_list: {
      std::int64_t b = 0;
      std::int64_t e = 0;
      if (type.id == TypeId::list) {
        b = a.values<std::int32_t>()[i];
        e = a.values<std::int32_t>()[i + 1];
      } else {
        b = a.values<std::int64_t>()[i];
        e = a.values<std::int64_t>()[i + 1];
      }
      py::list out;
      for (auto k = b; k < e; ++k) out.append(value_at(a.children.at(0), k));
      return out;
    }
    case TypeId::struct_: {
      py::dict out;
      for (std::size_t k = 0; k < a.children.size(); ++k) {
        out[py::str(type.children[k].name)] = value_at(a.children[k], i);
      }
      return out;
    }
  }
  return py::none();
}

template <class T>
T* capsule_pointer(py::handle cap, const char* name, std::string_view what) {
  if (!PyCapsule_IsValid(cap.ptr(), name)) {
    throw InvalidInput(
        fmt::format("{}: the Arrow PyCapsule interface returned {}, expected a "
                    "PyCapsule named '{}'",
                    what, py::repr(cap).cast<std::string>(), name));
  }
  return static_cast<T*>(PyCapsule_GetPointer(cap.ptr(), name));
}

void release_stream_capsule(PyObject* cap) {
  auto* s = static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(cap, "arrow_array_stream"));
  if (s == nullptr) {
    PyErr_Clear();
    return;
  }
  if (s->release != nullptr) s->release(s);
  delete s;  // NOLINT: allocated in stream_capsule
}

}  // namespace

arrow::ImportedTable import_py(py::handle obj, std::string_view what) {
  if (py::hasattr(obj, "__arrow_c_stream__")) {
    py::object cap = obj.attr("__arrow_c_stream__")();
    auto* stream = capsule_pointer<ArrowArrayStream>(cap, "arrow_array_stream", what);
    return arrow::import_stream(stream);
  }
  if (py::hasattr(obj, "__arrow_c_array__")) {
    py::object pair = obj.attr("__arrow_c_array__")();
    auto tup = py::reinterpret_borrow<py::tuple>(pair);
    auto* schema = capsule_pointer<ArrowSchema>(tup[0], "arrow_schema", what);
    auto* array = capsule_pointer<ArrowArray>(tup[1], "arrow_array", what);
    return arrow::import_array(schema, array);
  }
  // Older pandas has no PyCapsule methods: go through pyarrow when it is installed.
  const std::string module = py::str(py::type::of(obj).attr("__module__"));
  if (module.starts_with("pandas")) {
    py::object pa;
    try {
      pa = py::module_::import("pyarrow");
    } catch (const py::error_already_set&) {
      throw InvalidInput(
          fmt::format("{}: a pandas DataFrame needs pyarrow to be read as Arrow "
                      "(pip install pyarrow)",
                      what));
    }
    py::object table = pa.attr("Table").attr("from_pandas")(obj, py::arg("preserve_index") = false);
    return import_py(table, what);
  }
  // DuckDB relations of versions without __arrow_c_stream__ still export a RecordBatchReader.
  if (module.starts_with("duckdb") && py::hasattr(obj, "fetch_record_batch")) {
    return import_py(obj.attr("fetch_record_batch")(), what);
  }
  throw InvalidInput(fmt::format(
      "{} must be an Arrow-compatible table (an object with __arrow_c_stream__ or "
      "__arrow_c_array__: a pyarrow Table, polars or pandas DataFrame, DuckDB relation...), got "
      "{}",
      what, py::repr(py::type::of(obj)).cast<std::string>()));
}

py::list to_pylist(const arrow::ArrayView& array) {
  py::list out;
  for (std::int64_t i = 0; i < array.length; ++i) out.append(value_at(array, i));
  return out;
}

py::object stream_capsule(std::shared_ptr<const arrow::Table> table) {
  auto stream = std::make_unique<ArrowArrayStream>();
  arrow::export_table(std::move(table), stream.get());
  PyObject* cap = PyCapsule_New(stream.get(), "arrow_array_stream", &release_stream_capsule);
  if (cap == nullptr) throw py::error_already_set();
  stream.release();  // NOLINT: the capsule owns it now
  return py::reinterpret_steal<py::object>(cap);
}

}  // namespace backfill::bindings
