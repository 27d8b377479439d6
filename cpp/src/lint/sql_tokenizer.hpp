// The SQL + Jinja tokenizer behind the lint. Two layers, as dbt renders them:
//  1. Jinja blocks ({{ }}, {% %}, {# #}) are found first, over the raw text, exactly as Jinja's
//     own lexer does: inside a block, strings and brackets are tokens, so "}}" in a string or a
//     dict literal does not end it; {% raw %} ... {% endraw %} holds plain text.
//  2. SQL is tokenized around them. A block met between SQL tokens becomes one jinja_* SQL token;
//     a block met inside a SQL string, quoted name or comment stays part of that token and records
//     that context (a "{{ run_started_at }}" inside a string literal still renders into the SQL).
// Both layers tile their span: every byte belongs to exactly one token. Malformed input
// (unterminated strings, comments, blocks; control bytes) produces tokens plus ParseIssues, never
// an exception. Linear in the input size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backfill::detail::sql {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

// What differs between dialects at the lexical level.
struct Syntax {
  bool backtick_names = false;        // `name` (bigquery, spark)
  bool double_quote_strings = false;  // "text" is a string, not a name (bigquery, spark)
  bool nested_comments = false;       // /* /* */ */ (postgres, duckdb, spark)
  bool dollar_quotes = false;         // $$text$$ (postgres, duckdb, snowflake)
  bool dollar_tags = false;           // $tag$text$tag$ (postgres, duckdb)
  bool hash_comments = false;         // # comment (bigquery)
  bool slash_comments = false;        // // comment (snowflake)
  bool backslash_escapes = false;     // '\'' in plain strings (snowflake, bigquery, spark)
  bool e_strings = false;             // E'\'' (postgres, duckdb)
  bool triple_quotes = false;         // '''text''' and """text""" (bigquery)
};

enum class Kind : std::uint8_t {
  whitespace,
  word,         // unquoted identifier or keyword
  quoted_name,  // "name" or `name`
  string,       // 'text', E'text', $$text$$, '''text'''
  number,
  symbol,         // operators and punctuation
  parameter,      // $1, $name, ?, :name, @name, ${name}
  comment,        // -- line, /* block */, # line, // line
  jinja_expr,     // a {{ }} block between SQL tokens
  jinja_stmt,     // a {% %} block between SQL tokens
  jinja_comment,  // a {# #} block between SQL tokens
  invalid,        // control bytes that begin no token
};
[[nodiscard]] std::string_view kind_name(Kind k) noexcept;

enum class JKind : std::uint8_t {
  open,
  close,
  whitespace,
  name,
  string,
  number,
  symbol,
  text,
  invalid
};
[[nodiscard]] std::string_view jkind_name(JKind k) noexcept;

// Where a Jinja block sits in the SQL around it.
enum class Context : std::uint8_t { code, string, quoted_name, comment };

struct JinjaToken {
  JKind kind{};
  std::size_t begin = 0;
  std::size_t end = 0;
};

enum class BlockType : std::uint8_t { expr, stmt, comment };

struct JinjaBlock {
  BlockType type{};
  std::size_t begin = 0;  // at "{{" / "{%" / "{#"
  std::size_t end = 0;    // one past the closing delimiter (or the end of the input)
  bool terminated = true;
  Context context = Context::code;
  std::vector<JinjaToken> tokens;  // tile [begin, end): open, inner tokens, close
};

struct SqlToken {
  Kind kind{};
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t block = npos;  // for jinja_* tokens: index into Lexed::blocks
};

struct ParseIssue {
  std::size_t offset = 0;
  std::size_t length = 0;
  std::string message;
  std::string hint;
};

struct Lexed {
  std::vector<SqlToken> tokens;    // tile the whole input
  std::vector<JinjaBlock> blocks;  // in order of position
  std::vector<ParseIssue> issues;  // in order of position
};

[[nodiscard]] Lexed lex(std::string_view text, const Syntax& syntax);

// The text of a token (or any span).
[[nodiscard]] inline std::string_view slice(std::string_view text, std::size_t b,
                                            std::size_t e) noexcept {
  return text.substr(b, e - b);
}

}  // namespace backfill::detail::sql
