// Explicit conversions between Python date/datetime/str and UTC seconds (never through the local
// time zone, which is why pybind11/chrono.h is not used).
#pragma once

#include <pybind11/pybind11.h>

#include "backfill/calendar.hpp"

namespace backfill::bindings {

namespace py = pybind11;

// datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=t).
[[nodiscard]] py::object to_datetime(Seconds t);

// A tz-aware datetime, a date (local to `tz`) or an ISO-8601 string (date-only and naive values
// local to `tz`). Naive datetimes and other types throw InvalidInput naming the value.
[[nodiscard]] ParsedInstant to_instant(py::handle value, TimeZone tz);

// An instant that must be whole seconds: a fraction throws InvalidInput naming `what`.
[[nodiscard]] Seconds to_whole_seconds(py::handle value, TimeZone tz, std::string_view what);

[[nodiscard]] TimeZone to_zone(py::handle value);  // a str IANA name, or None for UTC

}  // namespace backfill::bindings
