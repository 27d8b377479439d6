// Lint bindings: lint_sql and tokenize_sql return plain Python values; the Finding / LintResult
// classes live in backfill/lint.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "backfill/lint.hpp"
#include "register.hpp"

namespace backfill::bindings {

namespace py = pybind11;

namespace {

// str (UTF-8; lone surrogates from a surrogateescape decode become their original bytes) or bytes.
std::string sql_bytes(py::handle sql) {
  if (PyBytes_Check(sql.ptr())) return std::string(py::reinterpret_borrow<py::bytes>(sql));
  if (!PyUnicode_Check(sql.ptr())) {
    throw InvalidInput(fmt::format("sql must be str or bytes, not {}",
                                   py::type::of(sql).attr("__name__").cast<std::string>()));
  }
  const auto b = py::reinterpret_steal<py::object>(
      PyUnicode_AsEncodedString(sql.ptr(), "utf-8", "surrogateescape"));
  if (!b) throw py::error_already_set();
  return std::string(py::reinterpret_borrow<py::bytes>(b));
}

// Text that came from the input may hold invalid UTF-8: decode it with replacement characters.
py::str text(const std::string& s) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

py::dict py_lint(py::handle sql, const std::string& dialect,
                 const std::vector<std::string>& partitioned_inputs,
                 const std::vector<std::string>& period_params, std::optional<bool> microbatch,
                 const std::vector<std::pair<std::string, std::string>>& ignore,
                 const std::vector<std::pair<std::string, std::string>>& severity) {
  LintOptions opt;
  opt.dialect = parse_dialect(dialect);
  opt.partitioned_inputs = partitioned_inputs;
  opt.period_params = period_params;
  opt.microbatch = microbatch;
  for (const auto& [code, reason] : ignore) opt.ignore.push_back({parse_rule(code), reason});
  for (const auto& [code, sev] : severity) {
    opt.severity.emplace_back(parse_rule(code), parse_severity(sev));
  }
  const std::string text_in = sql_bytes(sql);
  LintReport report;
  {
    py::gil_scoped_release release;
    report = lint(text_in, opt);
  }
  py::list findings;
  for (const auto& f : report.findings) {
    py::dict d;
    d["code"] = std::string(to_string(f.rule));
    d["severity"] = std::string(to_string(f.severity));
    d["line"] = f.line;
    d["column"] = f.column;
    d["offset"] = f.offset;
    d["length"] = f.length;
    d["text"] = text(f.text);
    d["message"] = text(f.message);
    d["hint"] = text(f.hint);
    d["suppressed"] = f.suppressed;
    d["reason"] = text(f.reason);
    findings.append(d);
  }
  py::list inputs;
  for (const auto& in : report.inputs) {
    inputs.append(py::make_tuple(std::string(to_string(in.kind)), text(in.name), in.line, in.column,
                                 in.offset));
  }
  py::dict config;
  for (const auto& [k, v] : report.config) config[text(k)] = text(v);
  py::dict out;
  out["findings"] = findings;
  out["inputs"] = inputs;
  out["config"] = config;
  return out;
}

py::list py_tokenize(py::handle sql, const std::string& dialect) {
  const Dialect d = parse_dialect(dialect);
  const std::string text_in = sql_bytes(sql);
  std::vector<Token> tokens;
  {
    py::gil_scoped_release release;
    tokens = tokenize(text_in, d);
  }
  py::list out;
  for (const auto& t : tokens) {
    out.append(py::make_tuple(std::string(t.kind), t.offset, t.length, t.line, t.column));
  }
  return out;
}

}  // namespace

void register_lint(py::module_& m) {
  m.def("lint_sql", &py_lint, py::arg("sql"), py::arg("dialect"), py::arg("partitioned_inputs"),
        py::arg("period_params"), py::arg("microbatch"), py::arg("ignore"), py::arg("severity"),
        "Lint one model; returns {'findings': [dict], 'inputs': [tuple], 'config': dict}.");
  m.def("tokenize_sql", &py_tokenize, py::arg("sql"), py::arg("dialect"),
        "Tokens as (kind, byte offset, byte length, line, column) tuples that tile the input.");
  m.def(
      "lint_rules",
      [] {
        std::vector<std::string> out;
        for (const Rule r : kAllRules) out.emplace_back(to_string(r));
        return out;
      },
      "The rule codes of the lint.");
}

}  // namespace backfill::bindings
