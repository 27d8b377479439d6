// The lint's analyses over a tokenized model. The SQL side sees "significant" tokens (no
// whitespace, comments or {% %} statements; a {{ }} block is one operand) with matched
// parentheses; the Jinja side reads each block's own tokens. Both produce RawFindings located by
// byte offset; lint.cpp turns those into positioned, suppressible Findings.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "backfill/lint.hpp"
#include "lint/lint_dialects.hpp"
#include "lint/sql_tokenizer.hpp"

namespace backfill::detail::lint {

struct RawFinding {
  Rule rule{};
  Severity severity{};
  std::size_t offset = 0;
  std::size_t length = 0;
  std::string message;
  std::string hint;
};

// A significant SQL token.
struct Sig {
  sql::Kind kind{};
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t block = sql::npos;   // for jinja_expr: the block index
  std::size_t match = sql::npos;   // for "(" and ")": the index of the partner
  std::size_t depth = 0;           // parenthesis depth (inside "(" is depth + 1)
  std::size_t parent = sql::npos;  // the "(" enclosing this token
  std::size_t statement = 0;       // index into SqlView::statements()
  bool conditional = false;        // inside a Jinja {% if %} ... {% endif %}
};

class SqlView {
 public:
  SqlView(std::string_view text, const sql::Lexed& lexed);
  [[nodiscard]] std::size_t size() const noexcept { return sig_.size(); }
  [[nodiscard]] const Sig& operator[](std::size_t i) const noexcept { return sig_[i]; }
  [[nodiscard]] std::string_view text(std::size_t i) const noexcept;
  // Case-insensitive keyword test on an unquoted word (false past the end).
  [[nodiscard]] bool word(std::size_t i, std::string_view lower) const noexcept;
  [[nodiscard]] bool sym(std::size_t i, std::string_view s) const noexcept;
  [[nodiscard]] std::string lower(std::size_t i) const;
  // Statement boundaries: [begin, end) index ranges split at ";" outside parentheses.
  using Range = std::pair<std::size_t, std::size_t>;
  [[nodiscard]] const std::vector<Range>& statements() const noexcept { return statements_; }
  // The index range of the query block holding i: from after the enclosing "(" (or the statement
  // start) to the matching ")" (or the statement end).
  [[nodiscard]] std::pair<std::size_t, std::size_t> block_of(std::size_t i) const noexcept;
  // Whether "order by" occurs in [b, e) at parenthesis depth d.
  [[nodiscard]] bool has_order_by(std::size_t b, std::size_t e, std::size_t d) const noexcept;
  // Whether the query block holding i has its own ORDER BY (O(1): precomputed).
  [[nodiscard]] bool block_ordered(std::size_t i) const noexcept;
  [[nodiscard]] std::string_view source() const noexcept { return text_; }

 private:
  std::string_view text_;
  std::vector<Sig> sig_;
  std::vector<std::pair<std::size_t, std::size_t>> statements_;
  std::vector<bool> paren_ordered_;      // by index of "(": ORDER BY directly inside
  std::vector<bool> statement_ordered_;  // by statement: ORDER BY outside any parentheses
};

// A model input found by either side, with the byte range that reads it.
struct Read {
  InputKind kind{};
  std::string name;        // normalized dotted name
  std::size_t offset = 0;  // where it is read
  std::size_t length = 0;
  bool implicit_filter_opt_out = false;  // ref('x').render(): microbatch does not filter it
};

// What the Jinja side learned about the model.
struct JinjaFacts {
  std::vector<RawFinding> findings;         // clock reads, randomness, unbalanced tags
  std::vector<Read> reads;                  // ref()/source() uses in SQL code
  std::vector<std::size_t> period_offsets;  // where a period parameter is referenced in SQL
  std::vector<std::pair<std::string, std::string>> config;  // literal config() kwargs
  std::vector<std::string> normalized;  // per block: its tokens without whitespace
};

[[nodiscard]] JinjaFacts analyze_jinja(std::string_view text, const sql::Lexed& lexed,
                                       const std::vector<std::string>& period_params);

// SQL-side rules: clock reads, randomness, unordered windows/aggregates/limits, sampling.
void check_sql_functions(const SqlView& v, const DialectRules& rules, std::vector<RawFinding>& out);

// SQL table reads after FROM / JOIN / USING (CTE names excluded).
[[nodiscard]] std::vector<Read> sql_reads(const SqlView& v);

// APPEND_ONLY: INSERT INTO without an earlier DELETE/TRUNCATE/replace of the same target.
void check_appends(const SqlView& v, const JinjaFacts& jinja, std::vector<RawFinding>& out);

// Case-insensitive comparison helpers.
[[nodiscard]] std::string to_lower(std::string_view s);
[[nodiscard]] bool iequals(std::string_view a, std::string_view b) noexcept;
// Whether dotted name `name` ends with the components of `suffix` ("raw.orders" ends with
// "orders"); both already normalized.
[[nodiscard]] bool name_ends_with(std::string_view name, std::string_view suffix) noexcept;

}  // namespace backfill::detail::lint
