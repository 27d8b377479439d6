// The private extension module: submodule-free, each area registers itself.
#include <pybind11/pybind11.h>

#include "register.hpp"

PYBIND11_MODULE(_core, m, pybind11::mod_gil_not_used()) {
  m.doc() = "backfill's C++ core (private: use the backfill package)";
  backfill::bindings::register_errors(m);
  backfill::bindings::register_calendar(m);
  backfill::bindings::register_arrow(m);
  backfill::bindings::register_diff(m);
  backfill::bindings::register_fingerprint(m);
  backfill::bindings::register_lint(m);
}
