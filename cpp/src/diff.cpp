// The diff's front and back: options validated into a plan, engine results into Arrow tables.
#include "backfill/diff.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "arrow/values.hpp"
#include "backfill/error.hpp"
#include "common/parallel.hpp"
#include "diff/diff_engine.hpp"
#include "diff/diff_front.hpp"

namespace backfill::diff {

using arrow::Column;
using arrow::DataType;
using arrow::ImportedTable;
using arrow::TypeId;
using detail::CompareMode;
using detail::Domain;

OnDuplicate parse_on_duplicate(std::string_view s) {
  if (s == "error") return OnDuplicate::error;
  if (s == "report") return OnDuplicate::report;
  throw InvalidInput(
      fmt::format("on_duplicate='{}' is not valid; expected 'error' or 'report'", s));
}

namespace {

// The logical type with physical variants folded: string layouts, binary layouts, list offsets
// and dictionary encoding do not change what a value is.
DataType normalized(const DataType& type) {
  DataType t = type.logical();
  t.dictionary = nullptr;
  switch (t.id) {
    case TypeId::large_utf8:
    case TypeId::utf8_view: t.id = TypeId::utf8; break;
    case TypeId::large_binary:
    case TypeId::binary_view: t.id = TypeId::binary; break;
    case TypeId::large_list: t.id = TypeId::list; break;
    default: break;
  }
  for (auto& c : t.children) {
    c.type = normalized(c.type);
    c.nullable = true;
  }
  return t;
}

std::string type_name(const DataType& t) {
  const std::string s = arrow::to_string(normalized(t));
  return s == "utf8" ? "string" : s;
}

std::string names_of(const ImportedTable& t) {
  std::string out;
  for (const auto& f : t.fields()) out += (out.empty() ? "" : ", ") + f.name;
  return out.empty() ? "none" : out;
}

std::size_t require(const ImportedTable& t, std::string_view side, std::string_view name,
                    std::string_view role) {
  if (auto i = t.find_column(name)) return *i;
  throw NotFound(
      fmt::format("{} column '{}' is not in {} (its columns: {})", role, name, side, names_of(t)));
}

// Keys must hash alike on both sides: any integer widths, any string layouts, else one type.
void check_key_types(const std::string& name, const DataType& a, const DataType& b) {
  const Domain da = detail::domain_of(a);
  const Domain db = detail::domain_of(b);
  if (da == Domain::nested || da == Domain::null) {
    throw InvalidInput(
        fmt::format("key column '{}' has type {}; keys must be scalar values", name, type_name(a)));
  }
  const bool loose = da == Domain::integer || da == Domain::bytes || da == Domain::floating ||
                     da == Domain::boolean;
  DataType na = normalized(a);
  DataType nb = normalized(b);
  na.tz.clear();  // instants compare alike whatever zone labels them
  nb.tz.clear();
  if (da != db || (!loose && !(na == nb))) {
    throw InvalidInput(fmt::format(
        "key column '{}' has type {} in old and {} in new; keys must have the same type on both "
        "sides (integers of any width and strings of any layout match)",
        name, type_name(a), type_name(b)));
  }
}

using front::SchemaChange;

// 10^e for 0 <= e <= 38 (the decimal128 range).
__int128 pow10(std::int32_t e) noexcept {
  __int128 p = 1;
  for (std::int32_t i = 0; i < e; ++i) p *= 10;
  return p;
}

constexpr std::int32_t kMaxPrecision = 38;

// How the next measure is summed (SumKind): a float on either side makes it a float; else a
// decimal on either side a decimal at the larger scale; else an integer.
void set_sum_kind(detail::DiffPlan& plan, const DataType& old_type, const DataType& new_type) {
  const DataType& to = old_type.logical();
  const DataType& tn = new_type.logical();
  const Domain d_o = detail::domain_of(to);
  const Domain d_n = detail::domain_of(tn);
  const std::int32_t s_o = d_o == Domain::decimal ? to.scale : 0;
  const std::int32_t s_n = d_n == Domain::decimal ? tn.scale : 0;
  const std::int32_t scale = std::max({0, s_o, s_n});
  auto kind = detail::SumKind::integer;
  if (d_o == Domain::floating || d_n == Domain::floating) {
    kind = detail::SumKind::floating;
  } else if (d_o == Domain::decimal || d_n == Domain::decimal) {
    kind = detail::SumKind::decimal;
  }
  // A scale that cannot be reached within 38 digits (negative scales) is summed as a float.
  if (kind == detail::SumKind::decimal &&
      (scale > kMaxPrecision || scale - s_o > kMaxPrecision || scale - s_n > kMaxPrecision)) {
    kind = detail::SumKind::floating;
  }
  const bool exact = kind != detail::SumKind::floating;
  plan.measure_kind.push_back(kind);
  plan.measure_scale.push_back(exact ? scale : 0);
  plan.measure_mult_old.push_back(exact ? pow10(scale - s_o) : 1);
  plan.measure_mult_new.push_back(exact ? pow10(scale - s_n) : 1);
}

}  // namespace

detail::DiffPlan front::make_plan(const ImportedTable& o, const ImportedTable& n,
                                  const Options& opt, std::vector<SchemaChange>& schema) {
  detail::DiffPlan plan;
  if (opt.key.empty()) throw InvalidInput("key must name at least one column");
  if (opt.sample < 0) {
    throw InvalidInput(fmt::format("sample={} is negative; expected a row count >= 0", opt.sample));
  }
  std::set<std::string> keys;
  for (const auto& k : opt.key) {
    if (!keys.insert(k).second)
      throw InvalidInput(fmt::format("key column '{}' is listed twice", k));
    const auto io = require(o, "old", k, "key");
    const auto in = require(n, "new", k, "key");
    check_key_types(k, o.fields()[io].type, n.fields()[in].type);
    plan.key.push_back(k);
    plan.key_old.push_back(io);
    plan.key_new.push_back(in);
  }
  plan.exact_key_hash = plan.key.size() == 1 &&
                        detail::domain_of(o.fields()[plan.key_old[0]].type) == Domain::integer &&
                        o.fields()[plan.key_old[0]].type.logical().id != TypeId::uint64 &&
                        n.fields()[plan.key_new[0]].type.logical().id != TypeId::uint64;

  // Schema changes, in old's column order then new's.
  for (const auto& f : o.fields()) {
    if (!n.find_column(f.name)) {
      schema.push_back({f.name, "removed", type_name(f.type), std::nullopt, std::nullopt});
    }
  }
  for (const auto& f : n.fields()) {
    auto io = o.find_column(f.name);
    if (!io) {
      schema.push_back({f.name, "added", std::nullopt, type_name(f.type), std::nullopt});
    } else if (type_name(o.fields()[*io].type) != type_name(f.type)) {
      const bool ok =
          detail::comparable(detail::domain_of(o.fields()[*io].type), detail::domain_of(f.type));
      schema.push_back({f.name, "retyped", type_name(o.fields()[*io].type), type_name(f.type), ok});
    }
  }

  // Compared columns.
  std::vector<std::string> names;
  for (const auto& x : opt.exclude) {
    if (!o.find_column(x) && !n.find_column(x)) {
      throw NotFound(
          fmt::format("exclude names column '{}', which is in neither table (old: {}; "
                      "new: {})",
                      x, names_of(o), names_of(n)));
    }
  }
  auto excluded = [&](const std::string& c) {
    return std::find(opt.exclude.begin(), opt.exclude.end(), c) != opt.exclude.end();
  };
  if (opt.columns) {
    for (const auto& c : *opt.columns) {
      (void)require(o, "old", c, "compared");
      (void)require(n, "new", c, "compared");
      if (keys.contains(c)) {
        throw InvalidInput(
            fmt::format("column '{}' is a key column; key columns are matched, not "
                        "compared",
                        c));
      }
      if (!excluded(c)) names.push_back(c);
    }
  } else {
    for (const auto& f : o.fields()) {
      if (!keys.contains(f.name) && n.find_column(f.name) && !excluded(f.name)) {
        names.push_back(f.name);
      }
    }
  }
  for (const auto& [col, tol] : opt.tolerance) {
    if (std::find(names.begin(), names.end(), col) == names.end()) {
      std::string list;
      for (const auto& c : names) list += (list.empty() ? "" : ", ") + c;
      throw NotFound(
          fmt::format("tolerance names column '{}', which is not a compared column "
                      "(compared: {})",
                      col, list.empty() ? "none" : list));
    }
  }
  for (const auto& [col, tol] : opt.tolerance) {
    if (!(tol.abs >= 0) || !(tol.rel >= 0)) {
      throw InvalidInput(
          fmt::format("tolerance for column '{}' is abs={}, rel={}; both must be "
                      ">= 0",
                      col, tol.abs, tol.rel));
    }
  }
  if (opt.default_tolerance &&
      (!(opt.default_tolerance->abs >= 0) || !(opt.default_tolerance->rel >= 0))) {
    throw InvalidInput("the __default__ tolerance must have abs >= 0 and rel >= 0");
  }
  for (const auto& name : names) {
    detail::ComparedColumn c;
    c.name = name;
    c.old_index = *o.find_column(name);
    c.new_index = *n.find_column(name);
    const DataType& to = o.fields()[c.old_index].type;
    const DataType& tn = n.fields()[c.new_index].type;
    const Domain d_o = detail::domain_of(to);
    const Domain d_n = detail::domain_of(tn);
    if (!detail::comparable(d_o, d_n)) continue;  // reported as an incomparable retype
    c.numeric = detail::is_numeric(d_o) && detail::is_numeric(d_n);
    auto it = opt.tolerance.find(name);
    std::optional<Tolerance> tol;
    if (it != opt.tolerance.end()) {
      if (!c.numeric) {
        throw InvalidInput(
            fmt::format("tolerance for column '{}' of type {} (old) / {} (new): "
                        "tolerances apply to numeric columns",
                        name, type_name(to), type_name(tn)));
      }
      tol = it->second;
    } else if (c.numeric && opt.default_tolerance) {
      tol = opt.default_tolerance;
    }
    if (tol && !tol->exact()) {
      c.mode = CompareMode::tolerance;
      c.tolerance = *tol;
    } else {
      c.mode = normalized(to) == normalized(tn) ? CompareMode::hash : CompareMode::value;
    }
    plan.compared.push_back(std::move(c));
  }

  // Partitions and measures.
  if (opt.partition_by) {
    const auto& p = *opt.partition_by;
    plan.part_old = require(o, "old", p, "partition_by");
    plan.part_new = require(n, "new", p, "partition_by");
    for (const auto* f : {&o.fields()[*plan.part_old], &n.fields()[*plan.part_new]}) {
      const Domain d = detail::domain_of(f->type);
      if (d != Domain::date && d != Domain::timestamp) {
        throw InvalidInput(
            fmt::format("partition_by column '{}' has type {}; expected a date or "
                        "timestamp column",
                        p, type_name(f->type)));
      }
    }
  }
  plan.grain = opt.grain;
  plan.tz = opt.tz;
  // The partitions table names a measure's columns <m>_old, <m>_new, <m>_delta, <m>_delta_pct
  // (no suffix ends another, so two measures never share a name), beside rows_old/rows_new.
  constexpr std::string_view kRowCounts = "rows";
  if (opt.measures) {
    for (const auto& m : *opt.measures) {
      if (m == kRowCounts) {
        throw InvalidInput(
            "measure column 'rows' would name its sums rows_old and rows_new, the "
            "partitions table's row counts; rename the column or leave it out of "
            "the measures");
      }
      const auto io = require(o, "old", m, "measure");
      const auto in = require(n, "new", m, "measure");
      for (const auto* f : {&o.fields()[io], &n.fields()[in]}) {
        if (!detail::is_numeric(detail::domain_of(f->type))) {
          throw InvalidInput(
              fmt::format("measure column '{}' has type {}; measures must be "
                          "numeric",
                          m, type_name(f->type)));
        }
      }
      plan.measures.push_back(m);
      plan.measure_old.push_back(io);
      plan.measure_new.push_back(in);
    }
  } else {
    for (const auto& c : plan.compared) {
      if (!c.numeric || c.name == kRowCounts) continue;  // see above: not summable under its name
      plan.measures.push_back(c.name);
      plan.measure_old.push_back(c.old_index);
      plan.measure_new.push_back(c.new_index);
    }
  }
  for (std::size_t m = 0; m < plan.measures.size(); ++m) {
    set_sum_kind(plan, o.fields()[plan.measure_old[m]].type, n.fields()[plan.measure_new[m]].type);
  }
  plan.sample = opt.sample;
  plan.on_duplicate = opt.on_duplicate;
  plan.threads = detail::thread_count(opt.threads);
  plan.merge_sorted = opt.merge_sorted;
  return plan;
}

namespace {

// ---- result tables ----

using OptStr = std::optional<std::string>;

Column text_column(const std::vector<OptStr>& v) {
  std::vector<std::string> s;
  arrow::Validity ok;
  for (const auto& x : v) {
    s.push_back(x.value_or(""));
    ok.push_back(x.has_value());
  }
  return arrow::utf8_column(s, ok);
}

Column float_column(const std::vector<std::optional<double>>& v) {
  std::vector<double> d;
  arrow::Validity ok;
  for (const auto& x : v) {
    d.push_back(x.value_or(0.0));
    ok.push_back(x.has_value());
  }
  return arrow::float64_column(d, ok);
}

std::optional<double> pct(double old_sum, double new_sum) {
  if (old_sum == 0 || !std::isfinite(old_sum)) return std::nullopt;
  return (new_sum - old_sum) / std::fabs(old_sum) * 100.0;
}

using detail::MeasureSum;
using detail::SumKind;
using OptSum = std::optional<MeasureSum>;

// An exact sum checked against the decimal128 range (38 digits), else InvalidInput naming it.
__int128 checked(const MeasureSum& s, const std::string& measure, std::string_view what) {
  const __int128 top = pow10(kMaxPrecision) - 1;
  if (s.overflow || s.exact > top || s.exact < -top) {
    throw InvalidInput(
        fmt::format("the {} of measure '{}' does not fit in 38 decimal digits "
                    "(decimal128); exclude the column from the measures",
                    what, measure));
  }
  return s.exact;
}

MeasureSum delta_of(const MeasureSum& o, const MeasureSum& n) {
  MeasureSum d;
  d.approx = n.approx - o.approx;
  d.overflow = o.overflow || n.overflow || __builtin_sub_overflow(n.exact, o.exact, &d.exact);
  return d;
}

// The percentage change, from the exact values for integer and decimal measures.
std::optional<double> pct_of(SumKind kind, const MeasureSum& o, const MeasureSum& n) {
  if (kind == SumKind::floating) return pct(o.approx, n.approx);
  if (o.exact == 0) return std::nullopt;
  const auto d = static_cast<long double>(n.exact) - static_cast<long double>(o.exact);
  const auto base = static_cast<long double>(o.exact < 0 ? -o.exact : o.exact);
  return static_cast<double>(d / base * 100.0L);
}

double approx_of(SumKind kind, std::int32_t scale, const MeasureSum& s) {
  if (kind == SumKind::floating) return s.approx;
  return static_cast<double>(static_cast<long double>(s.exact) /
                             static_cast<long double>(pow10(scale)));
}

// A measure's sums as an Arrow column of its kind: float64 (floats), int64 (integers; a
// decimal128(38, 0) when a sum leaves the int64 range), decimal128(38, scale) (decimals).
Column sum_column(SumKind kind, std::int32_t scale, const std::vector<OptSum>& v,
                  const std::string& measure, std::string_view what) {
  arrow::Validity ok;
  bool any_null = false;
  for (const auto& x : v) {
    ok.push_back(x.has_value());
    any_null |= !x.has_value();
  }
  if (!any_null) ok.clear();
  if (kind == SumKind::floating) {
    std::vector<double> d;
    d.reserve(v.size());
    for (const auto& x : v) d.push_back(x ? x->approx : 0.0);
    return arrow::float64_column(d, ok);
  }
  std::vector<__int128> e;
  bool fits64 = kind == SumKind::integer;
  for (const auto& x : v) {
    e.push_back(x ? checked(*x, measure, what) : 0);
    fits64 = fits64 && e.back() >= std::numeric_limits<std::int64_t>::min() &&
             e.back() <= std::numeric_limits<std::int64_t>::max();
  }
  if (fits64) {
    std::vector<std::int64_t> i(e.begin(), e.end());
    return arrow::int64_column(i, ok);
  }
  return arrow::decimal128_column(e, kMaxPrecision, scale, ok);
}

}  // namespace

std::shared_ptr<arrow::Table> front::schema_table(const std::vector<SchemaChange>& rows) {
  std::vector<OptStr> col, change, ot, nt;
  std::vector<bool> compared;
  arrow::Validity compared_ok;
  for (const auto& r : rows) {
    col.emplace_back(r.column);
    change.emplace_back(r.change);
    ot.push_back(r.old_type);
    nt.push_back(r.new_type);
    compared.push_back(r.compared.value_or(false));
    compared_ok.push_back(r.compared.has_value());
  }
  auto t = std::make_shared<arrow::Table>();
  t->add("column", text_column(col));
  t->add("change", text_column(change));
  t->add("old_type", text_column(ot));
  t->add("new_type", text_column(nt));
  t->add("compared", arrow::bool_column(compared, compared_ok));
  return t;
}

std::shared_ptr<arrow::Table> front::columns_table(const std::vector<arrow::Field>& o,
                                                   const std::vector<arrow::Field>& n,
                                                   const detail::DiffPlan& plan,
                                                   const detail::EngineResult& r) {
  std::vector<OptStr> col, ot, nt, mode, kind_text;
  std::vector<std::int64_t> changed, n2v, v2n;
  std::vector<std::optional<double>> maxd, pd;
  std::vector<OptSum> so, sn, delta;
  // The sums share a column: decimal128 at the largest scale when every measure is exact
  // (integers and decimals rescaled to it), float64 when any measure is a float.
  bool all_exact = !plan.measures.empty();
  bool all_integer = all_exact;
  std::int32_t scale = 0;
  for (std::size_t m = 0; m < plan.measures.size(); ++m) {
    all_exact = all_exact && plan.measure_kind[m] != SumKind::floating;
    all_integer = all_integer && plan.measure_kind[m] == SumKind::integer;
    scale = std::max(scale, plan.measure_scale[m]);
  }
  auto measure_of = [&](const std::string& name) -> std::optional<std::size_t> {
    for (std::size_t m = 0; m < plan.measures.size(); ++m) {
      if (plan.measures[m] == name) return m;
    }
    return std::nullopt;
  };
  // One sum as the shared column holds it (exact: rescaled to `scale`; else approx).
  auto shared = [&](std::size_t m, const MeasureSum& s) {
    MeasureSum out;
    const auto kind = plan.measure_kind[m];
    if (all_exact) {
      out.overflow = s.overflow || __builtin_mul_overflow(
                                       s.exact, pow10(scale - plan.measure_scale[m]), &out.exact);
    } else {
      out.approx = approx_of(kind, plan.measure_scale[m], s);
    }
    return out;
  };
  auto add_measure = [&](std::optional<std::size_t> m) {
    if (!m) {
      so.emplace_back();
      sn.emplace_back();
      delta.emplace_back();
      pd.emplace_back();
      kind_text.emplace_back();
      return;
    }
    const auto kind = plan.measure_kind[*m];
    const MeasureSum& a = r.sum_old[*m];
    const MeasureSum& b = r.sum_new[*m];
    (void)checked(a, plan.measures[*m], "sum");
    (void)checked(b, plan.measures[*m], "sum");
    (void)checked(delta_of(a, b), plan.measures[*m], "delta");
    so.emplace_back(shared(*m, a));
    sn.emplace_back(shared(*m, b));
    delta.emplace_back(delta_of(*so.back(), *sn.back()));
    pd.push_back(pct_of(kind, a, b));
    kind_text.emplace_back(kind == SumKind::integer   ? "integer"
                           : kind == SumKind::decimal ? "decimal"
                                                      : "float");
  };
  std::set<std::string> listed;
  for (std::size_t k = 0; k < plan.compared.size(); ++k) {
    const auto& c = plan.compared[k];
    const auto& st = r.columns[k];
    listed.insert(c.name);
    col.emplace_back(c.name);
    ot.emplace_back(type_name(o[c.old_index].type));
    nt.emplace_back(type_name(n[c.new_index].type));
    mode.emplace_back(c.mode == CompareMode::hash    ? "hash"
                      : c.mode == CompareMode::value ? "value"
                                                     : "tolerance");
    changed.push_back(st.changed);
    n2v.push_back(st.null_to_value);
    v2n.push_back(st.value_to_null);
    maxd.push_back(c.numeric ? std::optional<double>(st.max_abs_diff) : std::nullopt);
    add_measure(measure_of(c.name));
  }
  // Measures that are not compared columns (keys, excluded columns) still report their sums.
  std::vector<bool> ch_ok(changed.size(), true);
  for (std::size_t m = 0; m < plan.measures.size(); ++m) {
    if (listed.contains(plan.measures[m])) continue;
    col.emplace_back(plan.measures[m]);
    ot.emplace_back(type_name(o[plan.measure_old[m]].type));
    nt.emplace_back(type_name(n[plan.measure_new[m]].type));
    mode.emplace_back();
    changed.push_back(0);
    n2v.push_back(0);
    v2n.push_back(0);
    ch_ok.push_back(false);
    maxd.emplace_back();
    add_measure(m);
  }
  const arrow::Validity ok =
      ch_ok.size() == changed.size() &&
              std::all_of(ch_ok.begin(), ch_ok.end(), [](bool b) { return b; })
          ? arrow::Validity{}
          : ch_ok;
  const SumKind sum_kind = all_integer ? SumKind::integer
                           : all_exact ? SumKind::decimal
                                       : SumKind::floating;
  auto t = std::make_shared<arrow::Table>();
  t->add("column", text_column(col));
  t->add("old_type", text_column(ot));
  t->add("new_type", text_column(nt));
  t->add("compare", text_column(mode));
  t->add("changed", arrow::int64_column(changed, ok));
  t->add("null_to_value", arrow::int64_column(n2v, ok));
  t->add("value_to_null", arrow::int64_column(v2n, ok));
  t->add("max_abs_diff", float_column(maxd));
  t->add("sum_kind", text_column(kind_text));
  t->add("sum_old", sum_column(sum_kind, scale, so, "sums", "sum"));
  t->add("sum_new", sum_column(sum_kind, scale, sn, "sums", "sum"));
  t->add("delta", sum_column(sum_kind, scale, delta, "sums", "delta"));
  t->add("pct_delta", float_column(pd));
  return t;
}

std::shared_ptr<arrow::Table> front::partitions_table(const detail::DiffPlan& plan,
                                                      const detail::EngineResult& r) {
  std::vector<OptStr> label;
  std::vector<std::int64_t> start, end, ro, rn, added, removed, changed;
  arrow::Validity ok;
  const auto ms = plan.measures.size();
  std::vector<std::vector<OptSum>> mo(ms), mn(ms), md(ms);
  std::vector<std::vector<std::optional<double>>> mp(ms);
  for (const auto& [key, st] : r.partitions) {
    if (st.partition) {
      label.emplace_back(st.partition->label());
      start.push_back(st.partition->start());
      end.push_back(st.partition->end());
      ok.push_back(true);
    } else {
      label.emplace_back();
      start.push_back(0);
      end.push_back(0);
      ok.push_back(false);
    }
    ro.push_back(st.rows_old);
    rn.push_back(st.rows_new);
    added.push_back(st.added);
    removed.push_back(st.removed);
    changed.push_back(st.changed);
    for (std::size_t m = 0; m < ms; ++m) {
      mo[m].emplace_back(st.sum_old[m]);
      mn[m].emplace_back(st.sum_new[m]);
      md[m].emplace_back(delta_of(st.sum_old[m], st.sum_new[m]));
      mp[m].push_back(pct_of(plan.measure_kind[m], st.sum_old[m], st.sum_new[m]));
    }
  }
  const std::string tz = "UTC";
  auto t = std::make_shared<arrow::Table>();
  t->add("partition", text_column(label));
  t->add("start", arrow::timestamp_column(start, arrow::TimeUnit::second, tz, ok));
  t->add("end", arrow::timestamp_column(end, arrow::TimeUnit::second, tz, ok));
  t->add("rows_old", arrow::int64_column(ro));
  t->add("rows_new", arrow::int64_column(rn));
  t->add("added", arrow::int64_column(added));
  t->add("removed", arrow::int64_column(removed));
  t->add("changed", arrow::int64_column(changed));
  for (std::size_t m = 0; m < ms; ++m) {
    const auto& name = plan.measures[m];
    const auto kind = plan.measure_kind[m];
    const auto scale = plan.measure_scale[m];
    t->add(name + "_old", sum_column(kind, scale, mo[m], name, "sum"));
    t->add(name + "_new", sum_column(kind, scale, mn[m], name, "sum"));
    t->add(name + "_delta", sum_column(kind, scale, md[m], name, "delta"));
    t->add(name + "_delta_pct", float_column(mp[m]));
  }
  return t;
}

namespace {

std::vector<arrow::RowRef> refs_of(const detail::RowLocator& loc,
                                   const std::vector<std::int64_t>& rows) {
  std::vector<arrow::RowRef> out;
  out.reserve(rows.size());
  for (auto r : rows) out.push_back(loc.locate(r));
  return out;
}

}  // namespace

std::shared_ptr<arrow::Table> front::rows_table(const ImportedTable& t,
                                                const std::vector<std::int64_t>& rows) {
  const detail::RowLocator loc(t);
  const auto refs = refs_of(loc, rows);
  auto out = std::make_shared<arrow::Table>();
  for (std::size_t c = 0; c < t.fields().size(); ++c) {
    out->add(t.fields()[c].name, arrow::take_column(t, c, refs));
  }
  return out;
}

std::shared_ptr<arrow::Table> front::changed_table(const ImportedTable& o, const ImportedTable& n,
                                                   const detail::DiffPlan& plan,
                                                   const detail::EngineResult& r) {
  const detail::RowLocator lo(o);
  const detail::RowLocator ln(n);
  std::vector<std::int64_t> key_rows;
  std::vector<OptStr> column, old_text, new_text;
  for (const auto& [go, gn] : r.changed_rows) {
    const auto ro = lo.locate(go);
    const auto rn = ln.locate(gn);
    const auto& bo = o.batches()[static_cast<std::size_t>(ro.chunk)];
    const auto& bn = n.batches()[static_cast<std::size_t>(rn.chunk)];
    for (const auto& c : plan.compared) {
      const auto& ca = bo.column(c.old_index);
      const auto& cb = bn.column(c.new_index);
      if (detail::cells_equal(c, detail::value_at(ca, ro.row), detail::value_at(cb, rn.row))) {
        continue;
      }
      key_rows.push_back(gn);
      column.emplace_back(c.name);
      old_text.emplace_back(detail::render(ca, ro.row));
      new_text.emplace_back(detail::render(cb, rn.row));
    }
  }
  const auto refs = refs_of(ln, key_rows);
  auto t = std::make_shared<arrow::Table>();
  for (std::size_t k = 0; k < plan.key.size(); ++k) {
    t->add(plan.key[k], arrow::take_column(n, plan.key_new[k], refs));
  }
  t->add("column", text_column(column));
  t->add("old", text_column(old_text));
  t->add("new", text_column(new_text));
  return t;
}

Result diff(const ImportedTable& old_table, const ImportedTable& new_table,
            const Options& options) {
  std::vector<SchemaChange> schema;
  const detail::DiffPlan plan = front::make_plan(old_table, new_table, options, schema);
  detail::EngineResult r = detail::run_diff(old_table, new_table, plan);
  const auto clock = std::chrono::steady_clock::now();
  Result out;
  out.summary = r.summary;
  out.summary.schema_changed = !schema.empty();
  out.key = plan.key;
  out.measures = plan.measures;
  out.partition_by = options.partition_by;
  out.schema = front::schema_table(schema);
  out.columns = front::columns_table(old_table.fields(), new_table.fields(), plan, r);
  out.partitions = front::partitions_table(plan, r);
  out.changed_sample = front::changed_table(old_table, new_table, plan, r);
  out.added_sample = front::rows_table(new_table, r.added_rows);
  out.removed_sample = front::rows_table(old_table, r.removed_rows);
  out.timings = std::move(r.timings);
  out.timings.emplace_back(
      "results", std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count());
  return out;
}

}  // namespace backfill::diff
