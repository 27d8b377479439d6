#include "convert.hpp"

#include <fmt/format.h>

#include "backfill/error.hpp"

namespace backfill::bindings {
namespace {

struct DateTimeTypes {
  py::object datetime, date, timedelta, epoch, one_second;
};

const DateTimeTypes& types() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<DateTimeTypes> storage;
  return storage
      .call_once_and_store_result([] {
        auto dt = py::module_::import("datetime");
        DateTimeTypes t;
        t.datetime = dt.attr("datetime");
        t.date = dt.attr("date");
        t.timedelta = dt.attr("timedelta");
        t.epoch = t.datetime(1970, 1, 1, py::arg("tzinfo") = dt.attr("timezone").attr("utc"));
        t.one_second = t.timedelta(py::arg("seconds") = 1);
        return t;
      })
      .get_stored();
}

std::string show(py::handle value) { return py::repr(value).cast<std::string>(); }

}  // namespace

py::object to_datetime(Seconds t) {
  const auto& ty = types();
  return ty.epoch + ty.timedelta(py::arg("seconds") = t);
}

ParsedInstant to_instant(py::handle value, TimeZone tz) {
  const auto& ty = types();
  if (py::isinstance<py::str>(value)) return parse_instant(value.cast<std::string>(), tz);
  if (py::isinstance(value, ty.datetime)) {
    if (value.attr("utcoffset")().is_none()) {
      throw InvalidInput(fmt::format(
          "naive datetime {} has no time zone: pass a tz-aware datetime, or an ISO string or "
          "date (those are read as local time in {})",
          show(value), tz.name()));
    }
    const py::object delta = value - ty.epoch;
    const auto seconds = delta.attr("__floordiv__")(ty.one_second).cast<Seconds>();
    const py::object rest = delta.attr("__mod__")(ty.one_second);
    return {seconds, rest.attr("microseconds").cast<std::int64_t>() * 1000, false};
  }
  if (py::isinstance(value, ty.date)) {
    const auto days =
        days_from_civil(value.attr("year").cast<std::int64_t>(),
                        value.attr("month").cast<unsigned>(), value.attr("day").cast<unsigned>());
    return {tz.first_instant_of(days), 0, true};
  }
  throw InvalidInput(fmt::format(
      "cannot use {} as an instant: expected a tz-aware datetime, a date or an ISO-8601 string",
      show(value)));
}

Seconds to_whole_seconds(py::handle value, TimeZone tz, std::string_view what) {
  const auto p = to_instant(value, tz);
  if (p.nanos != 0) {
    throw InvalidInput(
        fmt::format("{} {} has a fraction of a second: partition boundaries are "
                    "whole seconds",
                    what, show(value)));
  }
  return p.seconds;
}

TimeZone to_zone(py::handle value) {
  if (value.is_none()) return {};
  if (!py::isinstance<py::str>(value)) {
    throw InvalidInput(
        fmt::format("time zone {} is not a string: expected an IANA name", show(value)));
  }
  return TimeZone::locate(value.cast<std::string>());
}

}  // namespace backfill::bindings
