// One register_<area> function per area of the core.
#pragma once

#include <pybind11/pybind11.h>

namespace backfill::bindings {

void register_errors(pybind11::module_& m);
void register_calendar(pybind11::module_& m);
void register_arrow(pybind11::module_& m);
void register_diff(pybind11::module_& m);
void register_fingerprint(pybind11::module_& m);
void register_lint(pybind11::module_& m);

}  // namespace backfill::bindings
