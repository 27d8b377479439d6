// SQL-side rules over significant tokens. Each check looks at a word and its neighbours; the
// window/limit checks look inside one parenthesised block. Worst case O(n * b) for b the largest
// query block, linear in practice.
#include <algorithm>
#include <map>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "lint/lint_rules.hpp"

namespace backfill::detail::lint {

namespace {

using sql::Kind;

constexpr std::string_view kClockHint =
    "use the run's period instead: {{ start }} / {{ end }} (the period a backfill run processes)";

template <class Range>
bool contains(const Range& r, std::string_view s) {
  return std::find(std::begin(r), std::end(r), s) != std::end(r);
}
const FunctionName* find_fn(std::span<const FunctionName> fns, std::string_view s) {
  const auto it =
      std::find_if(fns.begin(), fns.end(), [&](const FunctionName& f) { return f.name == s; });
  return it == fns.end() ? nullptr : &*it;
}

// Words after which "name(" is not a call: create table random (...), insert into uuid (...).
constexpr std::string_view kNotCallAfter[] = {"table", "view",  "into",  "function", "procedure",
                                              "type",  "index", "macro", "sequence"};
// Words that may precede a subquery's "(": inside such parentheses FROM is a query's FROM;
// after any other word, "(" is a call's and FROM is an argument (extract(year from ts)).
constexpr std::string_view kBeforeSubquery[] = {
    "in",      "exists",    "as",    "from",   "join",    "any",  "all",   "some",
    "lateral", "select",    "where", "and",    "or",      "not",  "on",    "union",
    "except",  "intersect", "then",  "else",   "when",    "with", "using", "values",
    "into",    "table",     "by",    "having", "qualify", "is",   "array", "return"};
// Words that end a FROM item (so they are not its alias).
constexpr std::string_view kClauseWords[] = {"where",
                                             "group",
                                             "order",
                                             "limit",
                                             "join",
                                             "left",
                                             "right",
                                             "inner",
                                             "full",
                                             "cross",
                                             "outer",
                                             "natural",
                                             "on",
                                             "using",
                                             "union",
                                             "except",
                                             "intersect",
                                             "qualify",
                                             "having",
                                             "window",
                                             "lateral",
                                             "pivot",
                                             "unpivot",
                                             "tablesample",
                                             "sample",
                                             "for",
                                             "fetch",
                                             "offset",
                                             "set",
                                             "values",
                                             "select",
                                             "when",
                                             "returning",
                                             "asof",
                                             "positional",
                                             "semi",
                                             "anti",
                                             "partition",
                                             "with",
                                             "at",
                                             "before",
                                             "changes",
                                             "match_recognize",
                                             "final",
                                             "format"};

class Checker {
 public:
  Checker(const SqlView& v, const DialectRules& r, std::vector<RawFinding>& out)
      : v_(v), r_(r), out_(out) {
    collect_named_windows();
  }

  void run() {
    for (std::size_t i = 0; i < v_.size(); ++i) {
      if (v_[i].kind == Kind::string && r_.special_date_strings) special_string(i);
      if (v_[i].kind == Kind::word) word(i);
    }
  }

 private:
  void add(Rule rule, Severity sev, std::size_t first, std::size_t last, std::string message,
           std::string hint) {
    const std::size_t b = v_[first].begin;
    const std::size_t e = v_[std::min(last, v_.size() - 1)].end;
    out_.push_back({rule, sev, b, e - b, std::move(message), std::move(hint)});
  }
  [[nodiscard]] std::string span_text(std::size_t first, std::size_t last) const {
    return std::string(sql::slice(v_.source(), v_[first].begin, v_[last].end));
  }

  void word(std::size_t i) {
    const bool after_dot = i > 0 && v_.sym(i - 1, ".");
    const std::string name = v_.lower(i);
    if (after_dot) {
      if (r_.sequence_nextval && name == "nextval") {
        const std::size_t first = i >= 2 ? i - 2 : i;
        add(Rule::nondeterministic, Severity::error, first, i,
            fmt::format("{} takes the next value of a sequence: a re-run of the period gets new "
                        "numbers",
                        span_text(first, i)),
            "derive keys from the data (a hash of the natural key) instead of a sequence");
      }
      return;
    }
    if (v_.sym(i + 1, ".") || (i > 0 && v_.word(i - 1, "as"))) return;  // qualifier or alias
    const bool call =
        v_.sym(i + 1, "(") && v_[i + 1].match != sql::npos &&
        !(i > 0 && v_[i - 1].kind == Kind::word && contains(kNotCallAfter, v_.lower(i - 1)));
    const std::size_t close = call ? v_[i + 1].match : i;
    const bool no_args = call && close == i + 2;

    if (contains(r_.clock_keywords, name)) {
      clock(i, close, call ? name + "()" : name);
    } else if (const auto* f = call ? find_fn(r_.clock_functions, name) : nullptr;
               f && (!f->zero_args_only || no_args)) {
      clock(i, close, name + "()");
    } else if (const auto* g = call ? find_fn(r_.random_functions, name) : nullptr;
               g && (!g->zero_args_only || no_args)) {
      add(Rule::nondeterministic, Severity::error, i, close,
          fmt::format("{}() returns a different value on every run, so re-running a period "
                      "changes its data",
                      name),
          name == "nextval" ? "derive keys from the data (a hash of the natural key)"
                            : "derive the value from the row (e.g. a hash of its key) or drop it");
    } else if (call && contains(kOrderedWindows, name)) {
      window(i, close, name);
    } else if (call && contains(r_.ordered_aggregates, name)) {
      aggregate(i, close, name);
    } else if (name == "limit" ||
               (name == "top" && (v_.word(i - 1, "select") || v_.word(i - 1, "distinct"))) ||
               (name == "fetch" && (v_.word(i + 1, "first") || v_.word(i + 1, "next")))) {
      limit(i, name);
    } else if (name == "distinct" && v_.word(i + 1, "on") && v_.sym(i + 2, "(")) {
      if (!v_.block_ordered(i)) {
        add(Rule::nondeterministic, Severity::error, i, v_[i + 2].match,
            "DISTINCT ON without ORDER BY keeps an arbitrary row of each group",
            "add an ORDER BY that decides which row is kept (ending in a unique key)");
      }
    } else if (name == "tablesample" ||
               (r_.using_sample && name == "sample" && v_.word(i - 1, "using")) ||
               (r_.bare_sample && name == "sample" && i > 0 &&
                (v_[i - 1].kind == Kind::word || v_[i - 1].kind == Kind::quoted_name ||
                 v_[i - 1].kind == Kind::jinja_expr) &&
                (v_.sym(i + 1, "(") || v_.word(i + 1, "bernoulli") || v_.word(i + 1, "system") ||
                 v_.word(i + 1, "block") || v_.word(i + 1, "row")))) {
      sample(i);
    }
  }

  void clock(std::size_t i, std::size_t last, const std::string& shown) {
    add(Rule::clock_read, Severity::error, i, last,
        fmt::format("{} reads the clock: a backfill run for a past period would use today's "
                    "date or time",
                    shown),
        std::string(kClockHint));
  }

  // 'now'::timestamp, date 'today', cast('now' as timestamp): Postgres reads the clock.
  void special_string(std::size_t i) {
    std::string body = to_lower(v_.text(i));
    if (body.size() < 2) return;
    body = body.substr(1, body.size() - 2);
    const auto b = body.find_first_not_of(" \t");
    const auto e = body.find_last_not_of(" \t");
    if (b == std::string::npos) return;
    body = body.substr(b, e - b + 1);
    if (body != "now" && body != "today" && body != "yesterday" && body != "tomorrow") return;
    static constexpr std::string_view types[] = {"date", "timestamp", "timestamptz", "time",
                                                 "timetz"};
    std::size_t first = i;
    std::size_t last = i;
    if (v_.sym(i + 1, "::") && i + 2 < v_.size()) {
      last = i + 2;
    } else if (i > 0 && v_[i - 1].kind == Kind::word && contains(types, v_.lower(i - 1))) {
      first = i - 1;
    } else if (i >= 2 && v_.sym(i - 1, "(") && v_.word(i - 2, "cast") && v_.word(i + 1, "as")) {
      first = i - 2;
      last = v_[i - 1].match == sql::npos ? i : v_[i - 1].match;
    } else {
      return;
    }
    add(Rule::clock_read, Severity::error, first, last,
        fmt::format("'{}' as a date/time is evaluated when the query runs: a backfill run for a "
                    "past period would use today's date",
                    body),
        std::string(kClockHint));
  }

  // The window spec "(...)" after OVER at j, resolving named windows; true if rows are ordered
  // (or unknown because Jinja writes part of it).
  [[nodiscard]] bool window_ordered(std::size_t over, int hops = 0) const {
    std::size_t open = sql::npos;
    if (v_.sym(over + 1, "(")) {
      open = over + 1;
    } else if (over + 1 < v_.size() && v_[over + 1].kind == Kind::word) {
      const auto it = named_.find(v_.lower(over + 1));
      if (it == named_.end()) return true;  // defined elsewhere: cannot tell
      open = it->second;
    }
    return open == sql::npos || spec_ordered(open, hops);
  }
  [[nodiscard]] bool spec_ordered(std::size_t open, int hops) const {
    const std::size_t close = v_[open].match == sql::npos ? v_.size() : v_[open].match;
    for (std::size_t j = open + 1; j < close; ++j) {
      if (v_[j].kind == Kind::jinja_expr) return true;
    }
    if (v_.has_order_by(open + 1, close, v_[open].depth + 1)) return true;
    // (base_window partition by ...): the base window's ORDER BY counts.
    if (open + 1 < close && v_[open + 1].kind == Kind::word && hops < 8) {
      const std::string w = v_.lower(open + 1);
      if (w != "partition" && w != "order" && w != "rows" && w != "range" && w != "groups") {
        const auto it = named_.find(w);
        return it == named_.end() || spec_ordered(it->second, hops + 1);
      }
    }
    return false;
  }
  // After a call's ")": skip IGNORE/RESPECT NULLS and FILTER (...); the index of OVER or npos.
  [[nodiscard]] std::size_t over_after(std::size_t close) const {
    std::size_t j = close + 1;
    for (;;) {
      if ((v_.word(j, "ignore") || v_.word(j, "respect")) && v_.word(j + 1, "nulls")) {
        j += 2;
      } else if (v_.word(j, "filter") && v_.sym(j + 1, "(") && v_[j + 1].match != sql::npos) {
        j = v_[j + 1].match + 1;
      } else {
        break;
      }
    }
    return v_.word(j, "over") ? j : sql::npos;
  }

  void window(std::size_t i, std::size_t close, const std::string& name) {
    const std::size_t over = over_after(close);
    if (over == sql::npos || window_ordered(over)) return;
    const std::size_t last = v_.sym(over + 1, "(") && v_[over + 1].match != sql::npos
                                 ? v_[over + 1].match
                                 : std::min(over + 1, v_.size() - 1);
    add(Rule::nondeterministic, Severity::error, i, last,
        fmt::format("{}() OVER a window without ORDER BY depends on the order rows happen to "
                    "arrive in, which differs between runs",
                    name),
        "add ORDER BY to the window, ending in a unique key so ties are broken the same way");
  }

  void aggregate(std::size_t i, std::size_t close, const std::string& name) {
    if (i >= 2 && v_.sym(i - 1, "(") && v_[i - 2].kind == Kind::word &&
        contains(kSortingFunctions, v_.lower(i - 2))) {
      return;  // array_sort(array_agg(x)): the order is restored
    }
    if (v_.has_order_by(i + 2, close, v_[i + 1].depth + 1)) return;
    if (v_.word(close + 1, "within") && v_.word(close + 2, "group")) return;
    const std::size_t over = over_after(close);
    if (over != sql::npos && window_ordered(over)) return;
    add(Rule::nondeterministic, Severity::warning, i, close,
        fmt::format("{}() without ORDER BY collects values in the order rows arrive, which can "
                    "differ between runs",
                    name),
        fmt::format("order the values: {}(x ORDER BY x) (or WITHIN GROUP (ORDER BY x))", name));
  }

  void limit(std::size_t i, const std::string& name) {
    // {% if target.name == 'dev' %} limit 100 {% endif %}: a development shortcut, not what
    // production runs, so a LIMIT under a Jinja condition is left alone.
    if (v_.block_ordered(i) || v_[i].conditional) return;
    const std::size_t last = i + 1 < v_.size() && v_[i + 1].kind == Kind::number ? i + 1 : i;
    add(Rule::nondeterministic, Severity::warning, i, last,
        fmt::format("{} without ORDER BY keeps whichever rows come first, which can differ "
                    "between runs",
                    to_lower(name) == "fetch" ? "FETCH FIRST" : to_upper(name)),
        "add an ORDER BY (ending in a unique key) to the same query");
  }

  void sample(std::size_t i) {
    const std::size_t e = v_.block_of(i).second;
    const std::size_t d = v_[i].depth;
    bool seeded = false;
    std::size_t last = i;
    for (std::size_t j = i + 1; j < e; ++j) {
      if (v_[j].depth == d && v_[j].kind == Kind::word && contains(kClauseWords, v_.lower(j)) &&
          !v_.word(j, "sample")) {
        break;
      }
      if (v_.word(j, "repeatable") || v_.word(j, "seed")) seeded = true;
      // DuckDB: USING SAMPLE 10% (bernoulli, 42): the second argument is the seed.
      if (r_.using_sample && v_[j].depth == d + 1 && v_.sym(j, ",")) seeded = true;
      last = j;
    }
    if (seeded) return;
    add(Rule::nondeterministic, Severity::error, i, last,
        "sampling without a seed picks different rows on every run",
        r_.using_sample ? "fix the seed: USING SAMPLE 10% (bernoulli, 42) or REPEATABLE (42)"
                        : "fix the seed with REPEATABLE (n) / SEED (n), or sample by a hash of "
                          "the key");
  }

  static std::string to_upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
  }

  // WINDOW w AS (...), v AS (...)
  void collect_named_windows() {
    for (std::size_t i = 0; i < v_.size(); ++i) {
      if (!v_.word(i, "window")) continue;
      std::size_t j = i + 1;
      while (j + 2 < v_.size() && v_[j].kind == Kind::word && v_.word(j + 1, "as") &&
             v_.sym(j + 2, "(") && v_[j + 2].match != sql::npos) {
        named_.emplace(v_.lower(j), j + 2);
        j = v_[j + 2].match + 1;
        if (!v_.sym(j, ",")) break;
        ++j;
      }
    }
  }

  const SqlView& v_;
  const DialectRules& r_;
  std::vector<RawFinding>& out_;
  std::map<std::string, std::size_t, std::less<>> named_;
};

// A dotted name at j: parts are runs of byte-adjacent words, quoted names and {{ }} blocks
// (so {{ target.schema }}_stg.orders is two parts). Returns one past its last token.
struct Name {
  std::string text;  // normalized
  std::size_t first = 0;
  std::size_t last = 0;
  bool only_jinja = false;  // {{ ref('x') }}: the Jinja side reports it
};

bool name_token(const SqlView& v, std::size_t j) {
  return j < v.size() && (v[j].kind == Kind::word || v[j].kind == Kind::quoted_name ||
                          v[j].kind == Kind::jinja_expr);
}

std::string normalized_part(const SqlView& v, std::size_t j, const JinjaFacts* jinja) {
  const std::string_view t = v.text(j);
  if (v[j].kind == Kind::word) return to_lower(t);
  if (v[j].kind == Kind::quoted_name) {
    return std::string(t.substr(1, t.size() >= 2 ? t.size() - 2 : 0));
  }
  if (jinja && v[j].block < jinja->normalized.size()) {
    return "{{" + jinja->normalized[v[j].block] + "}}";
  }
  return std::string(t);
}

std::optional<Name> parse_name(const SqlView& v, std::size_t j, const JinjaFacts* jinja) {
  if (!name_token(v, j)) return std::nullopt;
  Name n{{}, j, j, true};
  std::size_t k = j;
  for (;;) {
    // one part: adjacent pieces
    n.text += normalized_part(v, k, jinja);
    n.only_jinja = n.only_jinja && v[k].kind == Kind::jinja_expr;
    while (name_token(v, k + 1) && v[k + 1].begin == v[k].end) {
      ++k;
      n.text += normalized_part(v, k, jinja);
      n.only_jinja = false;
    }
    n.last = k;
    if (v.sym(k + 1, ".") && name_token(v, k + 2)) {
      n.text += '.';
      n.only_jinja = false;
      k += 2;
      continue;
    }
    return n;
  }
}

}  // namespace

void check_sql_functions(const SqlView& v, const DialectRules& rules,
                         std::vector<RawFinding>& out) {
  Checker(v, rules, out).run();
}

std::vector<Read> sql_reads(const SqlView& v) {
  // CTE names: WITH [RECURSIVE] a [(cols)] AS [NOT] [MATERIALIZED] (...), b AS (...)
  std::vector<std::string> ctes;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v.word(i, "with")) continue;
    std::size_t j = i + 1 + (v.word(i + 1, "recursive") ? 1 : 0);
    while (j < v.size() && (v[j].kind == Kind::word || v[j].kind == Kind::quoted_name)) {
      std::string cte = normalized_part(v, j, nullptr);
      std::size_t k = j + 1;
      if (v.sym(k, "(") && v[k].match != sql::npos) k = v[k].match + 1;
      if (!v.word(k, "as")) break;
      ++k;
      if (v.word(k, "not")) ++k;
      if (v.word(k, "materialized")) ++k;
      if (!v.sym(k, "(") || v[k].match == sql::npos) break;
      ctes.push_back(std::move(cte));
      j = v[k].match + 1;
      if (!v.sym(j, ",")) break;
      ++j;
    }
  }
  std::vector<Read> reads;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool from =
        v.word(i, "from") && !(i > 0 && (v.word(i - 1, "delete") || v.word(i - 1, "distinct")));
    const bool join = v.word(i, "join");
    const bool using_ = v.word(i, "using") && !v.word(i + 1, "sample");
    if (!from && !join && !using_) continue;
    if (from && v[i].parent != sql::npos) {
      // FROM inside a call's parentheses is an argument: extract(year from ts).
      const std::size_t open = v[i].parent;
      if (open > 0 && v[open - 1].kind == Kind::word &&
          !contains(kBeforeSubquery, v.lower(open - 1))) {
        continue;
      }
    }
    std::size_t j = i + 1;
    for (;;) {
      if (v.word(j, "lateral") || v.word(j, "only")) ++j;
      if (v.sym(j, "(")) {
        if (v[j].match == sql::npos) break;
        j = v[j].match + 1;
      } else {
        const auto n = parse_name(v, j, nullptr);
        if (!n) break;
        j = n->last + 1;
        if (v.sym(j, "(")) {  // a table function: read_parquet(...), generate_series(...)
          if (v[j].match == sql::npos) break;
          j = v[j].match + 1;
        } else if (!n->only_jinja && !contains(ctes, n->text)) {
          reads.push_back({InputKind::table, n->text, v[n->first].begin,
                           v[n->last].end - v[n->first].begin, false});
        }
      }
      if (!from) break;  // JOIN and USING take one item
      // alias, then "," for another FROM item
      if (v.word(j, "as")) ++j;
      if (j < v.size() && (v[j].kind == Kind::quoted_name ||
                           (v[j].kind == Kind::word && !contains(kClauseWords, v.lower(j))))) {
        ++j;
        if (v.sym(j, "(") && v[j].match != sql::npos) j = v[j].match + 1;  // alias(cols)
      }
      if (!v.sym(j, ",")) break;
      ++j;
    }
  }
  return reads;
}

void check_appends(const SqlView& v, const JinjaFacts& jinja, std::vector<RawFinding>& out) {
  std::vector<std::string> cleared;  // targets deleted, truncated or replaced so far
  const auto same = [](const std::string& a, const std::string& b) {
    return name_ends_with(a, b) || name_ends_with(b, a);
  };
  for (const auto& [b, e] : v.statements()) {
    std::size_t k = b;
    while (k < e && v[k].kind == Kind::jinja_expr) ++k;  // {{ config(...) }} before the DML
    if (k >= e) continue;
    const std::string head = v.lower(k);
    std::optional<Name> target;
    if (head == "delete" && v.word(k + 1, "from")) {
      target = parse_name(v, k + 2, &jinja);
    } else if (head == "truncate") {
      target = parse_name(v, k + 1 + (v.word(k + 1, "table") ? 1 : 0), &jinja);
    } else if (head == "drop" && v.word(k + 1, "table")) {
      std::size_t j = k + 2;
      if (v.word(j, "if") && v.word(j + 1, "exists")) j += 2;
      target = parse_name(v, j, &jinja);
    } else if (head == "create" && v.word(k + 1, "or") && v.word(k + 2, "replace")) {
      std::size_t j = k + 3;
      while (j < e && !v.word(j, "table") && !v.word(j, "view") && j < k + 6) ++j;
      target = parse_name(v, j + 1, &jinja);
    } else if (head == "insert") {
      if (v.word(k + 1, "overwrite")) {
        std::size_t j = k + 2;
        if (v.word(j, "into") || v.word(j, "table")) ++j;
        target = parse_name(v, j, &jinja);
      } else if (v.word(k + 1, "into")) {
        const auto t = parse_name(v, k + 2, &jinja);
        if (!t) continue;
        bool upsert = false;
        for (std::size_t j = k; j + 1 < e; ++j) {
          if ((v.word(j, "on") && v.word(j + 1, "conflict")) ||
              (v.word(j, "replace") && v.word(j + 1, "where")) ||
              (v.word(j, "on") && v.word(j + 1, "duplicate"))) {
            upsert = true;
          }
        }
        const bool is_cleared = std::any_of(cleared.begin(), cleared.end(),
                                            [&](const std::string& c) { return same(c, t->text); });
        if (!upsert && !is_cleared) {
          const std::size_t bo = v[k].begin;
          out.push_back(
              {Rule::append_only, Severity::error, bo, v[t->last].end - bo,
               fmt::format("INSERT INTO {} appends: running the same period twice doubles its "
                           "rows, because nothing deletes or overwrites the period first",
                           sql::slice(v.source(), v[t->first].begin, v[t->last].end)),
               fmt::format("delete the period first (DELETE FROM {} WHERE <time column> >= "
                           "'{{{{ start }}}}' AND < '{{{{ end }}}}'), or use MERGE / INSERT "
                           "OVERWRITE",
                           sql::slice(v.source(), v[t->first].begin, v[t->last].end))});
        }
        continue;
      }
    }
    if (target) cleared.push_back(target->text);
  }
}

}  // namespace backfill::detail::lint
