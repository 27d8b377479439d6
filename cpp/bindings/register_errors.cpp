// C++ errors -> the Python classes in backfill/errors.py (all derive from BackfillError).
#include <pybind11/pybind11.h>

#include "backfill/error.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace py = pybind11;

namespace {
struct ErrorClasses {
  py::object invalid_input, cycle, not_found, conflict, base;
};
const ErrorClasses& classes() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<ErrorClasses> storage;
  return storage
      .call_once_and_store_result([] {
        auto errors = py::module_::import("backfill.errors");
        return ErrorClasses{errors.attr("InvalidInputError"), errors.attr("CycleError"),
                            errors.attr("NotFoundError"), errors.attr("ConflictError"),
                            errors.attr("BackfillError")};
      })
      .get_stored();
}
}  // namespace

void register_errors(py::module_& m) {
  (void)m;
  // pybind11 stores translators as plain function pointers, void(*)(std::exception_ptr): the
  // lambda converts to one only with the parameter taken by value.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      const auto& c = classes();
      switch (e.kind()) {
        case ErrorKind::invalid_input: py::set_error(c.invalid_input, e.what()); return;
        case ErrorKind::cycle: py::set_error(c.cycle, e.what()); return;
        case ErrorKind::not_found: py::set_error(c.not_found, e.what()); return;
        case ErrorKind::conflict: py::set_error(c.conflict, e.what()); return;
      }
      py::set_error(c.base, e.what());
    }
  });
}

}  // namespace backfill::bindings
