// lint(): tokenize, run the Jinja and SQL analyses, decide UNBOUNDED_READ per statement, then
// apply severity overrides and suppressions (options and inline comments) and locate findings.
#include "backfill/lint.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "lint/lint_rules.hpp"
#include "lint/text_position.hpp"

namespace backfill {

namespace {

using detail::lint::RawFinding;
namespace sql = detail::sql;

constexpr std::size_t kMaxTextBytes = 200;  // longer offending text is cut (on a UTF-8 boundary)

std::string valid_period_param(const std::string& p) {
  const auto first = static_cast<unsigned char>(p.empty() ? '\0' : p[0]);
  const bool ok =
      (std::isalpha(first) != 0 || first == '_') && std::all_of(p.begin(), p.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
      });
  if (!ok) {
    throw InvalidInput(fmt::format(
        "period parameter '{}' is not a name; expected a Jinja identifier like 'start'", p));
  }
  return p;
}

std::string normalized_input(const std::string& name) {
  std::string out = detail::lint::to_lower(name);
  std::size_t part = 0;
  for (std::size_t i = 0; i <= out.size(); ++i) {
    if (i == out.size() || out[i] == '.') {
      if (i == part || out.find_first_not_of(" \t", part) >= i) {
        throw InvalidInput(fmt::format(
            "partitioned input '{}' has an empty name part; expected a model name ('orders'), "
            "'source.table' or a dotted table name",
            name));
      }
      part = i + 1;
    }
  }
  return out;
}

// "backfill: ignore CODE[,CODE...] reason" (or ignore-file) in a comment body.
struct Directive {
  bool file = false;
  std::vector<Rule> rules;
  std::vector<std::string> unknown;
  std::string reason;
};

std::optional<Directive> parse_directive(std::string_view body) {
  const std::string lower = detail::lint::to_lower(body);
  const std::size_t at = lower.find("backfill:");
  if (at == std::string::npos) return std::nullopt;
  std::size_t i = at + 9;
  while (i < body.size() && body[i] == ' ') ++i;
  Directive d;
  if (lower.compare(i, 11, "ignore-file") == 0) {
    d.file = true;
    i += 11;
  } else if (lower.compare(i, 6, "ignore") == 0) {
    i += 6;
  } else {
    return std::nullopt;
  }
  for (;;) {
    while (i < body.size() && (body[i] == ' ' || body[i] == ',' || body[i] == '=')) ++i;
    std::size_t j = i;
    while (j < body.size() &&
           (std::isupper(static_cast<unsigned char>(body[j])) != 0 || body[j] == '_')) {
      ++j;
    }
    if (j == i || (j < body.size() && std::isalnum(static_cast<unsigned char>(body[j])) != 0)) {
      break;
    }
    const std::string_view code = body.substr(i, j - i);
    try {
      d.rules.push_back(parse_rule(code));
    } catch (const InvalidInput&) {
      if (code.find('_') == std::string_view::npos) break;  // an upper-case word of the reason
      d.unknown.emplace_back(code);
    }
    i = j;
  }
  std::string_view reason = body.substr(std::min(i, body.size()));
  while (!reason.empty() && (reason.front() == ' ' || reason.front() == '-' ||
                             reason.front() == ':' || reason.front() == '\t')) {
    reason.remove_prefix(1);
  }
  while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back())) != 0) {
    reason.remove_suffix(1);
  }
  d.reason = std::string(reason);
  return d;
}

// The text of a comment without its delimiters.
std::string_view comment_body(std::string_view c) {
  if (c.starts_with("--") || c.starts_with("//")) return c.substr(2);
  if (c.starts_with("#")) return c.substr(1);
  if (c.starts_with("/*") || c.starts_with("{#")) {
    c.remove_prefix(2);
    if (c.ends_with("*/") || c.ends_with("#}")) c.remove_suffix(2);
  }
  return c;
}

std::string clip(std::string_view s) {
  if (s.size() <= kMaxTextBytes) return std::string(s);
  std::size_t n = kMaxTextBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

class Linter {
 public:
  Linter(std::string_view text, const LintOptions& opt) : t_(text), opt_(opt) {
    for (const auto& p : opt.period_params) periods_.push_back(valid_period_param(p));
    for (const auto& p : opt.partitioned_inputs) partitioned_.push_back(normalized_input(p));
  }

  LintReport run() {
    const auto& rules = detail::lint::rules_for(opt_.dialect);
    lexed_ = sql::lex(t_, rules.syntax);
    for (const auto& issue : lexed_.issues) {
      raw_.push_back({Rule::lint_parse, Severity::error, issue.offset, issue.length, issue.message,
                      issue.hint});
    }
    if (const auto u = detail::check_utf8(t_); u.invalid_bytes > 0) {
      raw_.push_back({Rule::lint_parse, Severity::error, u.first_invalid, 1,
                      fmt::format("invalid UTF-8: byte 0x{:02X} begins no character ({} invalid "
                                  "byte{} in the input)",
                                  static_cast<unsigned char>(t_[u.first_invalid]), u.invalid_bytes,
                                  u.invalid_bytes == 1 ? "" : "s"),
                      "save the model as UTF-8 text"});
    }
    const detail::lint::SqlView view(t_, lexed_);
    auto jinja = detail::lint::analyze_jinja(t_, lexed_, periods_);
    raw_.insert(raw_.end(), jinja.findings.begin(), jinja.findings.end());
    detail::lint::check_sql_functions(view, rules, raw_);
    jinja_string_sql(rules);
    detail::lint::check_appends(view, jinja, raw_);

    auto reads = jinja.reads;
    const auto tables = detail::lint::sql_reads(view);
    reads.insert(reads.end(), tables.begin(), tables.end());
    std::stable_sort(reads.begin(), reads.end(),
                     [](const auto& a, const auto& b) { return a.offset < b.offset; });
    auto period_offsets = jinja.period_offsets;
    for (const auto& tok : lexed_.tokens) {
      const auto text = sql::slice(t_, tok.begin, tok.end);
      if (tok.kind == sql::Kind::parameter && is_period_parameter(text)) {
        period_offsets.push_back(tok.begin);
      }
      // Spark-style ${var} substitution is textual, so it also works inside string literals.
      constexpr auto none = std::string_view::npos;
      for (std::size_t at = tok.kind == sql::Kind::string ? text.find("${") : none; at != none;
           at = text.find("${", at + 2)) {
        const std::size_t close = text.find('}', at);
        if (close != none && is_period_parameter(text.substr(at, close - at + 1))) {
          period_offsets.push_back(tok.begin + at);
        }
      }
    }
    bool microbatch = false;
    for (const auto& [k, v] : jinja.config) {
      if (k == "incremental_strategy" && v == "microbatch") microbatch = true;
    }
    microbatch = opt_.microbatch.value_or(microbatch);
    unbounded(view, reads, period_offsets, microbatch);

    LintReport report;
    report.config = std::move(jinja.config);
    finish(report);
    detail::Locator loc(t_);
    for (const auto& r : reads) {
      const auto p = loc.locate(r.offset);
      report.inputs.push_back({r.kind, r.name, p.line, p.column, r.offset});
    }
    return report;
  }

 private:
  // dbt macros take SQL as Jinja strings: dbt.dateadd(..., from_date_or_timestamp="current_date"),
  // date_spine(end_date="now()"). Those strings render into the model, so their SQL is checked
  // for clock reads and randomness (offsets mapped back into the model).
  void jinja_string_sql(const detail::lint::DialectRules& rules) {
    for (const auto& b : lexed_.blocks) {
      if (b.type == sql::BlockType::comment ||
          (b.type == sql::BlockType::expr && b.context == sql::Context::comment)) {
        continue;
      }
      std::vector<std::string_view> calls;  // enclosing calls, innermost last ("" = bracket)
      std::string_view last_name;
      for (const auto& jt : b.tokens) {
        const auto tx = sql::slice(t_, jt.begin, jt.end);
        if (jt.kind == sql::JKind::whitespace) continue;
        if (jt.kind == sql::JKind::symbol && (tx == "(" || tx == "[" || tx == "{")) {
          calls.push_back(tx == "(" ? last_name : std::string_view{});
        } else if (jt.kind == sql::JKind::symbol && (tx == ")" || tx == "]" || tx == "}")) {
          if (!calls.empty()) calls.pop_back();
        }
        last_name = jt.kind == sql::JKind::name ? tx : std::string_view{};
        // Messages to the log or the user never reach the SQL.
        static constexpr std::string_view quiet[] = {
            "log",      "print",   "raise_compiler_error", "warn", "warn_or_error",
            "fromjson", "fromyaml"};
        const bool silent = std::any_of(calls.begin(), calls.end(), [](std::string_view c) {
          return std::find(std::begin(quiet), std::end(quiet), c) != std::end(quiet);
        });
        if (silent || jt.kind != sql::JKind::string || jt.end - jt.begin < 3) continue;
        const std::size_t base = jt.begin + 1;
        const std::string_view inner = sql::slice(t_, base, jt.end - 1);
        const auto sub = sql::lex(inner, rules.syntax);
        if (!sub.issues.empty()) continue;  // not SQL (an apostrophe in a message, say)
        const detail::lint::SqlView view(inner, sub);
        std::vector<RawFinding> found;
        detail::lint::check_sql_functions(view, rules, found);
        for (auto& f : found) {
          if (f.severity != Severity::error) continue;  // LIMIT etc. need the whole query
          f.offset += base;
          raw_.push_back(std::move(f));
        }
      }
    }
  }

  [[nodiscard]] bool is_period_parameter(std::string_view p) const {
    while (!p.empty() &&
           (p.front() == '$' || p.front() == ':' || p.front() == '@' || p.front() == '{')) {
      p.remove_prefix(1);
    }
    if (p.ends_with("}")) p.remove_suffix(1);
    return std::any_of(periods_.begin(), periods_.end(),
                       [&](const std::string& x) { return detail::lint::iequals(x, p); });
  }

  void unbounded(const detail::lint::SqlView& v, const std::vector<detail::lint::Read>& reads,
                 const std::vector<std::size_t>& period_offsets, bool microbatch) {
    if (partitioned_.empty()) return;
    std::vector<std::size_t> periods = period_offsets;
    std::sort(periods.begin(), periods.end());
    const auto& st = v.statements();
    for (std::size_t s = 0; s < st.size(); ++s) {
      // Byte range of the statement: from after the previous ";" to this one's.
      const std::size_t b = s == 0 ? 0 : v[st[s - 1].second].end;
      const std::size_t e = st[s].second < v.size() ? v[st[s].second].begin : t_.size();
      // O(log n) per statement: both lists are sorted by offset.
      const auto p = std::lower_bound(periods.begin(), periods.end(), b);
      if (p != periods.end() && *p < e) continue;
      const auto first = std::lower_bound(
          reads.begin(), reads.end(), b,
          [](const detail::lint::Read& r, std::size_t off) { return r.offset < off; });
      for (auto it = first; it != reads.end() && it->offset < e; ++it) {
        const auto& r = *it;
        const auto match =
            std::find_if(partitioned_.begin(), partitioned_.end(), [&](const std::string& p) {
              return detail::lint::name_ends_with(detail::lint::to_lower(r.name), p);
            });
        if (match == partitioned_.end()) continue;
        if (microbatch && r.kind != InputKind::table && !r.implicit_filter_opt_out) continue;
        const std::string shown = r.kind == InputKind::ref      ? fmt::format("ref('{}')", r.name)
                                  : r.kind == InputKind::source ? fmt::format("source '{}'", r.name)
                                                                : fmt::format("table {}", r.name);
        raw_.push_back(
            {Rule::unbounded_read, Severity::warning, r.offset, r.length,
             fmt::format("{} is partitioned by period, but this statement never refers to the "
                         "run's period ({}), so every run reads all of it{}",
                         shown, period_list(),
                         r.implicit_filter_opt_out ? " (.render() opts out of microbatch's "
                                                     "implicit filter)"
                                                   : ""),
             fmt::format("filter it to the period: WHERE <time column> >= '{{{{ {} }}}}' AND "
                         "<time column> < '{{{{ {} }}}}'{}",
                         periods_.empty() ? "start" : periods_.front(),
                         periods_.size() > 1 ? periods_[1] : "end",
                         r.kind == InputKind::table
                             ? ""
                             : " (or let dbt microbatch filter it: event_time on the input)")});
      }
    }
  }

  [[nodiscard]] std::string period_list() const {
    std::string out;
    for (const auto& p : periods_) {
      out += (out.empty() ? "" : ", ") + fmt::format("{{{{ {} }}}}", p);
    }
    return out.empty() ? "no period parameters configured" : out;
  }

  // Severity overrides, suppression, positions, sorting.
  void finish(LintReport& report) {
    std::stable_sort(raw_.begin(), raw_.end(),
                     [](const RawFinding& a, const RawFinding& b) { return a.offset < b.offset; });
    detail::Locator loc(t_);
    for (const auto& r : raw_) {
      Finding f;
      f.rule = r.rule;
      f.severity = r.severity;
      for (const auto& [rule, sev] : opt_.severity) {
        if (rule == r.rule) f.severity = sev;
      }
      const auto p = loc.locate(r.offset);
      f.line = p.line;
      f.column = p.column;
      f.offset = r.offset;
      f.length = r.length;
      f.text = clip(sql::slice(t_, r.offset, std::min(t_.size(), r.offset + r.length)));
      f.message = r.message;
      f.hint = r.hint;
      report.findings.push_back(std::move(f));
    }
    inline_suppressions(report, loc);
    for (auto& f : report.findings) {
      for (const auto& s : opt_.ignore) {
        if (s.rule == f.rule && !f.suppressed) {
          f.suppressed = true;
          f.reason = s.reason;
        }
      }
    }
    std::stable_sort(report.findings.begin(), report.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.offset < b.offset; });
  }

  void inline_suppressions(LintReport& report, detail::Locator& loc) {
    struct Scope {
      std::size_t line;  // 0: the whole file
      Directive d;
    };
    std::vector<Scope> scopes;
    std::vector<Finding> extra;
    const auto& toks = lexed_.tokens;
    for (std::size_t i = 0; i < toks.size(); ++i) {
      const auto& tok = toks[i];
      if (tok.kind != sql::Kind::comment && tok.kind != sql::Kind::jinja_comment) continue;
      auto d = parse_directive(comment_body(sql::slice(t_, tok.begin, tok.end)));
      if (!d) continue;
      const auto here = loc.locate(tok.begin);
      const auto problem = [&](std::string msg) {
        Finding f{Rule::lint_parse,
                  Severity::warning,
                  here.line,
                  here.column,
                  tok.begin,
                  tok.end - tok.begin,
                  clip(sql::slice(t_, tok.begin, tok.end)),
                  std::move(msg),
                  "write: -- backfill: ignore CLOCK_READ <reason>",
                  false,
                  {}};
        extra.push_back(std::move(f));
      };
      for (const auto& u : d->unknown) {
        problem(
            fmt::format("unknown rule '{}' in a suppression comment; expected CLOCK_READ, "
                        "NONDETERMINISTIC, UNBOUNDED_READ, APPEND_ONLY or LINT_PARSE",
                        u));
      }
      if (d->rules.empty()) {
        if (d->unknown.empty()) problem("a suppression comment that names no rule");
        continue;
      }
      std::size_t line = 0;
      if (!d->file) {
        // Trailing comment: its own line. A comment alone on its line: the next line of code.
        std::size_t j = i;
        while (j > 0 && toks[j - 1].kind == sql::Kind::whitespace &&
               sql::slice(t_, toks[j - 1].begin, toks[j - 1].end).find_first_of("\r\n") ==
                   std::string_view::npos) {
          --j;
        }
        const bool trailing = j > 0 && toks[j - 1].kind != sql::Kind::whitespace;
        if (trailing) {
          line = here.line;
        } else {
          std::size_t k = i + 1;
          while (k < toks.size() &&
                 (toks[k].kind == sql::Kind::whitespace || toks[k].kind == sql::Kind::comment ||
                  toks[k].kind == sql::Kind::jinja_comment)) {
            ++k;
          }
          if (k == toks.size()) continue;
          line = loc.locate(toks[k].begin).line;
        }
      }
      scopes.push_back({line, std::move(*d)});
    }
    std::multimap<std::size_t, const Scope*> by_line;  // 0: file-wide
    for (const auto& s : scopes) by_line.emplace(s.line, &s);
    for (auto& f : report.findings) {
      for (const std::size_t line : {f.line, std::size_t{0}}) {
        const auto [lo, hi] = by_line.equal_range(line);
        for (auto it = lo; it != hi && !f.suppressed; ++it) {
          const auto& rules = it->second->d.rules;
          if (std::find(rules.begin(), rules.end(), f.rule) != rules.end()) {
            f.suppressed = true;
            f.reason = it->second->d.reason;
          }
        }
      }
    }
    report.findings.insert(report.findings.end(), extra.begin(), extra.end());
  }

  std::string_view t_;
  const LintOptions& opt_;
  std::vector<std::string> periods_;
  std::vector<std::string> partitioned_;
  sql::Lexed lexed_;
  std::vector<RawFinding> raw_;
};

}  // namespace

Rule parse_rule(std::string_view code) {
  for (const Rule r : kAllRules) {
    if (to_string(r) == code) return r;
  }
  throw InvalidInput(
      fmt::format("unknown lint rule '{}'; expected one of CLOCK_READ, "
                  "NONDETERMINISTIC, UNBOUNDED_READ, APPEND_ONLY, LINT_PARSE",
                  code));
}

std::string_view to_string(Rule r) noexcept {
  switch (r) {
    case Rule::clock_read: return "CLOCK_READ";
    case Rule::nondeterministic: return "NONDETERMINISTIC";
    case Rule::unbounded_read: return "UNBOUNDED_READ";
    case Rule::append_only: return "APPEND_ONLY";
    case Rule::lint_parse: return "LINT_PARSE";
  }
  return "LINT_PARSE";
}

Severity parse_severity(std::string_view name) {
  if (name == "error") return Severity::error;
  if (name == "warning") return Severity::warning;
  if (name == "info") return Severity::info;
  throw InvalidInput(
      fmt::format("unknown severity '{}'; expected one of error, warning, info", name));
}

std::string_view to_string(Severity s) noexcept {
  switch (s) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "error";
}

std::string_view to_string(InputKind k) noexcept {
  switch (k) {
    case InputKind::ref: return "ref";
    case InputKind::source: return "source";
    case InputKind::table: return "table";
  }
  return "table";
}

LintReport lint(std::string_view sql, const LintOptions& options) {
  return Linter(sql, options).run();
}

std::vector<Token> tokenize(std::string_view sql_text, Dialect dialect) {
  const auto lexed = sql::lex(sql_text, detail::lint::rules_for(dialect).syntax);
  std::vector<Token> out;
  detail::Locator loc(sql_text);
  const auto emit = [&](std::string_view kind, std::size_t b, std::size_t e) {
    if (e <= b) return;
    const auto p = loc.locate(b);
    out.push_back({kind, b, e - b, p.line, p.column});
  };
  const auto emit_block = [&](const sql::JinjaBlock& blk) {
    for (const auto& jt : blk.tokens) emit(sql::jkind_name(jt.kind), jt.begin, jt.end);
  };
  std::size_t bi = 0;
  for (const auto& tok : lexed.tokens) {
    if (tok.block != sql::npos) {
      emit_block(lexed.blocks[tok.block]);
      bi = tok.block + 1;
      continue;
    }
    std::size_t pos = tok.begin;
    while (bi < lexed.blocks.size() && lexed.blocks[bi].begin < tok.end) {
      emit(sql::kind_name(tok.kind), pos, lexed.blocks[bi].begin);
      emit_block(lexed.blocks[bi]);
      pos = lexed.blocks[bi].end;
      ++bi;
    }
    emit(sql::kind_name(tok.kind), pos, tok.end);
  }
  return out;
}

}  // namespace backfill
