// Calendar bindings: Partition, PeriodSet, partition_of, partitions, parse helpers.
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "backfill/calendar.hpp"
#include "backfill/error.hpp"
#include "backfill/periods.hpp"
#include "convert.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace py = pybind11;

namespace {

Partition py_partition_of(py::handle instant, std::string_view grain, py::handle tz) {
  const TimeZone zone = to_zone(tz);
  const Grain g = parse_grain(grain);
  return partition_of(to_instant(instant, zone).seconds, g, zone);
}

std::vector<Partition> py_partitions(std::string_view grain, py::handle start, py::handle end,
                                     py::handle tz, std::string_view align) {
  const TimeZone zone = to_zone(tz);
  const Grain g = parse_grain(grain);
  const Align a = parse_align(align);
  auto s = to_instant(start, zone);
  auto e = to_instant(end, zone);
  if (a == Align::strict) {
    for (const auto* b : {&s, &e}) {
      if (b->nanos != 0) {
        throw InvalidInput(fmt::format(
            "{} {} is not on a {} boundary: it has a fraction of a second (or pass "
            "align='expand')",
            b == &s ? "start" : "end", py::repr(b == &s ? start : end).cast<std::string>(), grain));
      }
    }
  } else if (e.nanos != 0) {
    e.seconds += 1;  // expand: the partition holding the fractional end is included
  }
  py::gil_scoped_release release;
  return partitions(g, s.seconds, e.seconds, zone, a);
}

PeriodSet make_period_set(const py::iterable& items, py::handle tz) {
  const TimeZone zone = to_zone(tz);
  std::vector<Interval> intervals;
  for (py::handle item : items) {
    const auto pair = py::reinterpret_borrow<py::sequence>(item);
    if (py::len(pair) != 2) {
      throw InvalidInput(
          fmt::format("period {} is not a (start, end) pair", py::repr(item).cast<std::string>()));
    }
    intervals.push_back({to_whole_seconds(pair[0], zone, "period start"),
                         to_whole_seconds(pair[1], zone, "period end")});
  }
  return PeriodSet(std::move(intervals));
}

py::list intervals_of(const PeriodSet& set) {
  py::list out;
  for (const auto& iv : set.intervals()) {
    out.append(py::make_tuple(to_datetime(iv.start), to_datetime(iv.end)));
  }
  return out;
}

}  // namespace

void register_calendar(py::module_& m) {
  py::class_<Partition>(m, "Partition", "One partition: a grain, a zone and [start, end) in UTC.")
      .def_property_readonly("grain", [](const Partition& p) { return to_string(p.grain()); })
      .def_property_readonly("tz", [](const Partition& p) { return p.tz().name(); })
      .def_property_readonly("start", [](const Partition& p) { return to_datetime(p.start()); })
      .def_property_readonly("end", [](const Partition& p) { return to_datetime(p.end()); })
      .def_property_readonly("start_epoch", &Partition::start)
      .def_property_readonly("end_epoch", &Partition::end)
      .def_property_readonly("length_seconds", &Partition::length)
      .def_property_readonly("label", &Partition::label)
      .def("next", &Partition::next)
      .def("prev", &Partition::prev)
      .def(
          "contains",
          [](const Partition& p, py::handle instant) {
            return p.contains(to_instant(instant, p.tz()).seconds);
          },
          py::arg("instant"))
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def(py::self < py::self)
      .def(py::self <= py::self)
      .def(py::self > py::self)
      .def(py::self >= py::self)
      .def("__hash__",
           [](const Partition& p) {
             return py::hash(
                 py::make_tuple(p.start(), p.end(), static_cast<int>(p.grain()), p.tz().name()));
           })
      .def("__repr__", [](const Partition& p) { return fmt::format("{}", p); })
      .def("__str__", &Partition::label)
      .def(py::pickle(
          [](const Partition& p) {
            return py::make_tuple(p.start(), to_string(p.grain()), p.tz().name());
          },
          [](const py::tuple& t) {
            return partition_of(t[0].cast<Seconds>(), parse_grain(t[1].cast<std::string>()),
                                TimeZone::locate(t[2].cast<std::string>()));
          }));

  py::class_<PeriodSet>(m, "PeriodSet", "A normalized set of half-open UTC intervals.")
      .def(py::init(
               [](const py::iterable& items, py::handle tz) { return make_period_set(items, tz); }),
           py::arg("intervals") = py::list(), py::arg("tz") = py::none())
      .def_property_readonly("intervals", &intervals_of)
      .def_property_readonly("total_seconds", &PeriodSet::total_seconds)
      .def("is_empty", &PeriodSet::is_empty)
      .def("__bool__", [](const PeriodSet& s) { return !s.is_empty(); })
      .def("__len__", [](const PeriodSet& s) { return s.intervals().size(); })
      .def("__iter__", [](const PeriodSet& s) { return intervals_of(s).attr("__iter__")(); })
      .def(
          "contains",
          [](const PeriodSet& s, py::handle value) {
            if (py::isinstance<Partition>(value)) {
              const auto& p = value.cast<const Partition&>();
              return s.contains(Interval{p.start(), p.end()});
            }
            return s.contains(to_instant(value, {}).seconds);
          },
          py::arg("value"))
      .def("__contains__",
           [](const PeriodSet& s, py::handle value) {
             if (py::isinstance<Partition>(value)) {
               const auto& p = value.cast<const Partition&>();
               return s.contains(Interval{p.start(), p.end()});
             }
             return s.contains(to_instant(value, {}).seconds);
           })
      .def("union", [](const PeriodSet& a, const PeriodSet& b) { return a | b; })
      .def("intersection", [](const PeriodSet& a, const PeriodSet& b) { return a & b; })
      .def("difference", [](const PeriodSet& a, const PeriodSet& b) { return a - b; })
      .def(py::self | py::self)
      .def(py::self & py::self)
      .def(py::self - py::self)
      .def(py::self == py::self)
      .def(
          "partitions",
          [](const PeriodSet& s, std::string_view grain, py::handle tz, std::string_view cover) {
            const TimeZone zone = to_zone(tz);
            const Grain g = parse_grain(grain);
            const Cover c = parse_cover(cover);
            py::gil_scoped_release release;
            return s.partitions(g, zone, c);
          },
          py::arg("grain"), py::arg("tz") = py::none(), py::arg("cover") = "overlap")
      .def("__repr__", [](const PeriodSet& s) { return "PeriodSet(" + to_string(s) + ")"; });

  m.def("tz_database_dir", &TimeZone::database_dir,
        "The directory of compiled zone files time zones are read from.");
  m.def("set_tz_database_dir", &TimeZone::set_database_dir, py::arg("path"),
        "Reads time zones from `path` (set before the first zone is used).");
  m.def("partition_of", &py_partition_of, py::arg("instant"), py::arg("grain"),
        py::arg("tz") = py::none());
  m.def("partitions", &py_partitions, py::arg("grain"), py::arg("start"), py::arg("end"),
        py::arg("tz") = py::none(), py::arg("align") = "strict");
  m.def(
      "parse_instant",
      [](std::string_view text, py::handle tz) {
        return to_datetime(parse_instant(text, to_zone(tz)).seconds);
      },
      py::arg("text"), py::arg("tz") = py::none());
  m.def(
      "check_zone", [](py::handle tz) { return std::string(to_zone(tz).name()); }, py::arg("tz"));
  m.def(
      "check_grain", [](std::string_view g) { return std::string(to_string(parse_grain(g))); },
      py::arg("grain"));
}

}  // namespace backfill::bindings
