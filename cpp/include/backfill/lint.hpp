// SQL lint for backfill hazards: logic that makes a model give a different result each time it
// runs for the same period (clock reads, randomness, unordered windows), reads that ignore the
// run's period, and appends that double data on a re-run.
//
//   backfill::LintOptions opt; opt.dialect = backfill::parse_dialect("snowflake");
//   for (const auto& f : backfill::lint("select now() as loaded_at", opt).findings) ...
//
// The input is SQL with dbt-style Jinja. It is tokenized (never matched with regular expressions),
// so `'now()'` in a string, `-- now()` in a comment or a column named "now" is not a finding, while
// `{{ run_started_at }}` inside a string literal is (Jinja renders before SQL runs).
//
// Positions: `line` and `column` are 1-based. Lines end at "\n", "\r\n" or a lone "\r". Columns
// count Unicode code points from the start of the line (a tab is one column); each byte that is not
// part of a well-formed UTF-8 sequence counts as one column. `offset`/`length` are in bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backfill {

enum class Dialect : std::uint8_t { duckdb, postgres, snowflake, bigquery, spark };

// "duckdb", "postgres" (or "postgresql"), "snowflake", "bigquery", "spark" (or "databricks");
// anything else throws InvalidInput naming the value and the accepted names.
[[nodiscard]] Dialect parse_dialect(std::string_view name);
[[nodiscard]] std::string_view to_string(Dialect d) noexcept;

enum class Rule : std::uint8_t {
  clock_read,
  nondeterministic,
  unbounded_read,
  append_only,
  lint_parse
};
inline constexpr Rule kAllRules[] = {Rule::clock_read, Rule::nondeterministic, Rule::unbounded_read,
                                     Rule::append_only, Rule::lint_parse};

// Codes are "CLOCK_READ", "NONDETERMINISTIC", "UNBOUNDED_READ", "APPEND_ONLY", "LINT_PARSE".
[[nodiscard]] Rule parse_rule(std::string_view code);
[[nodiscard]] std::string_view to_string(Rule r) noexcept;

enum class Severity : std::uint8_t { info, warning, error };
[[nodiscard]] Severity parse_severity(std::string_view name);
[[nodiscard]] std::string_view to_string(Severity s) noexcept;

struct Finding {
  Rule rule{};
  Severity severity{};
  std::size_t line = 0;    // 1-based
  std::size_t column = 0;  // 1-based, in code points
  std::size_t offset = 0;  // bytes from the start of the input
  std::size_t length = 0;  // bytes of the offending text
  std::string text;        // the offending text as written (cut after 200 bytes)
  std::string message;
  std::string hint;
  bool suppressed = false;
  std::string reason;  // why it was suppressed (may be empty)
};

struct Suppression {
  Rule rule{};
  std::string reason;
};

struct LintOptions {
  Dialect dialect = Dialect::duckdb;
  // Inputs whose data is partitioned by period: model names of ref('m'), "src.tbl" of
  // source('src', 'tbl'), or table names. An entry matches a reference whose dotted name ends with
  // the entry's components (case-insensitive): "orders" matches raw.orders and ref('orders').
  std::vector<std::string> partitioned_inputs;
  // Jinja names (and SQL named parameters $x, :x, @x, ${x}) that carry the run's period.
  std::vector<std::string> period_params = {"start", "end"};
  // dbt microbatch filters ref()/source() by the batch implicitly. nullopt: on when the model's
  // config() sets incremental_strategy='microbatch'.
  std::optional<bool> microbatch;
  std::vector<Suppression> ignore;                  // per-model switch-off, with reasons
  std::vector<std::pair<Rule, Severity>> severity;  // per-rule severity overrides
};

enum class InputKind : std::uint8_t { ref, source, table };
[[nodiscard]] std::string_view to_string(InputKind k) noexcept;

// An input the model reads: ref('m'), source('s', 't') or a table named after FROM/JOIN.
struct InputRef {
  InputKind kind{};
  std::string name;  // "m", "s.t", "db.schema.t" (unquoted parts lower-cased)
  std::size_t line = 0;
  std::size_t column = 0;
  std::size_t offset = 0;
};

struct LintReport {
  std::vector<Finding> findings;  // sorted by position; suppressed ones included, flagged
  std::vector<InputRef> inputs;   // in order of appearance
  // Literal keyword arguments of the model's {{ config(...) }} (strings as written, booleans and
  // numbers as their text), e.g. {"incremental_strategy", "microbatch"}.
  std::vector<std::pair<std::string, std::string>> config;
};

// Lints one model. Never throws on malformed SQL (that is a LINT_PARSE finding); throws
// InvalidInput for a bad option (an empty partitioned input name, a malformed period parameter).
[[nodiscard]] LintReport lint(std::string_view sql, const LintOptions& options);

// Tokens, for tools and tests. They tile the input: each begins where the previous ended, and Jinja
// blocks are split into their own tokens (a SQL string holding "{{ x }}" becomes string, Jinja
// tokens, string).
struct Token {
  // SQL: whitespace word quoted_name string number symbol parameter comment invalid;
  // Jinja: jinja_open jinja_close jinja_whitespace jinja_name jinja_string jinja_number
  // jinja_symbol jinja_comment_text jinja_invalid.
  std::string_view kind;
  std::size_t offset = 0;
  std::size_t length = 0;
  std::size_t line = 0;
  std::size_t column = 0;
};
[[nodiscard]] std::vector<Token> tokenize(std::string_view sql, Dialect dialect);

}  // namespace backfill
