// SQL + Jinja tokenizer (see sql_tokenizer.hpp). Every scan loop advances at least one byte per
// iteration and never reads past text.size(), so the whole lexer is O(n) and memory-safe on any
// byte string (the libFuzzer target in tests/fuzz checks both).
#include "lint/sql_tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace backfill::detail::sql {

std::string_view kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::whitespace: return "whitespace";
    case Kind::word: return "word";
    case Kind::quoted_name: return "quoted_name";
    case Kind::string: return "string";
    case Kind::number: return "number";
    case Kind::symbol: return "symbol";
    case Kind::parameter: return "parameter";
    case Kind::comment: return "comment";
    case Kind::jinja_expr: return "jinja_expression";
    case Kind::jinja_stmt: return "jinja_statement";
    case Kind::jinja_comment: return "jinja_comment";
    case Kind::invalid: return "invalid";
  }
  return "invalid";
}

std::string_view jkind_name(JKind k) noexcept {
  switch (k) {
    case JKind::open: return "jinja_open";
    case JKind::close: return "jinja_close";
    case JKind::whitespace: return "jinja_whitespace";
    case JKind::name: return "jinja_name";
    case JKind::string: return "jinja_string";
    case JKind::number: return "jinja_number";
    case JKind::symbol: return "jinja_symbol";
    case JKind::text: return "jinja_comment_text";
    case JKind::invalid: return "jinja_invalid";
  }
  return "jinja_invalid";
}

namespace {

constexpr std::size_t kMaxIssues = 50;  // garbage input would otherwise report every byte

[[nodiscard]] constexpr bool is_space(unsigned char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
[[nodiscard]] constexpr bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
[[nodiscard]] constexpr bool is_alpha(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
// Bytes >= 0x80 belong to identifiers: SQL engines accept Unicode letters in names.
[[nodiscard]] constexpr bool is_word_start(unsigned char c) noexcept {
  return is_alpha(c) || c == '_' || c >= 0x80;
}
[[nodiscard]] constexpr bool is_word_char(unsigned char c) noexcept {
  return is_word_start(c) || is_digit(c) || c == '$';
}
[[nodiscard]] constexpr bool is_control(unsigned char c) noexcept {
  return (c < 0x20 && !is_space(c)) || c == 0x7f;
}

void add_issue(std::vector<ParseIssue>& issues, std::size_t offset, std::size_t length,
               std::string message, std::string hint) {
  if (issues.size() < kMaxIssues) {
    issues.push_back({offset, length, std::move(message), std::move(hint)});
  } else if (issues.size() == kMaxIssues) {
    issues.push_back({offset, length, "too many lexical problems; stopped reporting them",
                      "fix the problems above first"});
  }
}

// ---------------------------------------------------------------- Jinja layer

class JinjaScanner {
 public:
  JinjaScanner(std::string_view text, std::vector<ParseIssue>& issues)
      : t_(text), issues_(issues) {}

  std::vector<JinjaBlock> scan() {
    std::vector<JinjaBlock> blocks;
    std::size_t i = 0;
    while (i + 1 < t_.size()) {
      if (t_[i] != '{' || (t_[i + 1] != '{' && t_[i + 1] != '%' && t_[i + 1] != '#')) {
        ++i;
        continue;
      }
      JinjaBlock b = t_[i + 1] == '#' ? comment(i) : block(i);
      i = b.end;
      const bool raw = b.type == BlockType::stmt && first_name(b) == "raw";
      blocks.push_back(std::move(b));
      if (raw) i = skip_raw(i, blocks.back());
    }
    return blocks;
  }

 private:
  [[nodiscard]] unsigned char at(std::size_t i) const noexcept {
    return i < t_.size() ? static_cast<unsigned char>(t_[i]) : 0;
  }
  [[nodiscard]] bool starts(std::size_t i, std::string_view s) const noexcept {
    return t_.substr(std::min(i, t_.size())).starts_with(s);
  }

  [[nodiscard]] std::string_view first_name(const JinjaBlock& b) const {
    for (const auto& tok : b.tokens) {
      if (tok.kind == JKind::name) return slice(t_, tok.begin, tok.end);
      if (tok.kind != JKind::open && tok.kind != JKind::whitespace) break;
    }
    return {};
  }

  JinjaBlock comment(std::size_t begin) {
    JinjaBlock b{BlockType::comment, begin, begin, true, Context::code, {}};
    const std::size_t close = t_.find("#}", begin + 2);
    const std::size_t body_end = close == std::string_view::npos ? t_.size() : close;
    b.tokens.push_back({JKind::open, begin, begin + 2});
    if (body_end > begin + 2) b.tokens.push_back({JKind::text, begin + 2, body_end});
    if (close == std::string_view::npos) {
      b.terminated = false;
      b.end = t_.size();
      add_issue(issues_, begin, 2, "unterminated Jinja comment: '{#' is never closed by '#}'",
                "close the comment with '#}'");
    } else {
      b.tokens.push_back({JKind::close, close, close + 2});
      b.end = close + 2;
    }
    return b;
  }

  // {{ ... }} or {% ... %}: tokens up to the closing delimiter at bracket depth 0.
  JinjaBlock block(std::size_t begin) {
    const bool expr = t_[begin + 1] == '{';
    JinjaBlock b{expr ? BlockType::expr : BlockType::stmt, begin, begin, true, Context::code, {}};
    const char closer = expr ? '}' : '%';
    std::size_t i = begin + 2;
    if (at(i) == '-' || (!expr && at(i) == '+')) ++i;  // whitespace control
    b.tokens.push_back({JKind::open, begin, i});
    std::string brackets;  // open brackets, innermost last
    while (i < t_.size()) {
      const unsigned char c = at(i);
      if (!brackets.empty() && at(i) == static_cast<unsigned char>(closer) && at(i + 1) == '}' &&
          (!expr || brackets.back() != '{')) {
        // "}}" / "%}" while a bracket is open: Jinja fails here; report it and end the block
        // so the rest of the file is still checked.
        add_issue(issues_, i, 2,
                  fmt::format("unbalanced Jinja: '{}' is not closed before '{}}}'", brackets.back(),
                              closer),
                  fmt::format("close the '{}' inside the block", brackets.back()));
        brackets.clear();
      }
      if (brackets.empty()) {
        std::size_t j = i;
        if (c == '-' || c == '+') ++j;
        if (at(j) == static_cast<unsigned char>(closer) && at(j + 1) == '}' &&
            (j == i || c == '-' || !expr)) {
          b.tokens.push_back({JKind::close, i, j + 2});
          b.end = j + 2;
          return b;
        }
      }
      const std::size_t start = i;
      JKind kind = JKind::symbol;
      if (is_space(c)) {
        while (i < t_.size() && is_space(at(i))) ++i;
        kind = JKind::whitespace;
      } else if (is_alpha(c) || c == '_') {
        while (i < t_.size() && (is_alpha(at(i)) || is_digit(at(i)) || at(i) == '_')) ++i;
        kind = JKind::name;
      } else if (is_digit(c)) {
        while (i < t_.size() &&
               (is_digit(at(i)) || at(i) == '_' || at(i) == '.' || at(i) == 'e' || at(i) == 'E')) {
          ++i;
        }
        kind = JKind::number;
      } else if (c == '\'' || c == '"') {
        i = string_end(i);
        kind = JKind::string;
      } else if (c == '(' || c == '[' || c == '{') {
        brackets.push_back(static_cast<char>(c));
        ++i;
      } else if (c == ')' || c == ']' || c == '}') {
        const char want = c == ')' ? '(' : (c == ']' ? '[' : '{');
        if (brackets.empty() || brackets.back() != want) {
          add_issue(issues_, i, 1,
                    fmt::format("unbalanced '{}' in a Jinja {}", static_cast<char>(c),
                                expr ? "expression" : "statement"),
                    "check the brackets of the Jinja block");
          kind = JKind::invalid;
        } else {
          brackets.pop_back();
        }
        ++i;
      } else if (c >= 0x80 || is_control(c)) {
        while (i < t_.size() && (at(i) >= 0x80 || is_control(at(i)))) ++i;
        kind = JKind::invalid;
        add_issue(issues_, start, i - start, "unexpected bytes in a Jinja block",
                  "Jinja names and operators are ASCII; put text in quotes");
      } else {
        // Jinja's two-character operators; everything else is one character.
        static constexpr std::string_view two[] = {"**", "//", "==", "!=", "<=", ">="};
        i += std::any_of(std::begin(two), std::end(two),
                         [&](std::string_view op) { return starts(i, op); })
                 ? std::size_t{2}
                 : std::size_t{1};
      }
      b.tokens.push_back({kind, start, i});
    }
    b.terminated = false;
    b.end = t_.size();
    add_issue(issues_, begin, b.tokens.front().end - begin,
              fmt::format("unbalanced Jinja: '{}' is never closed by '{}}}'",
                          slice(t_, begin, begin + 2), closer),
              fmt::format("close the block with '{}}}'", closer));
    return b;
  }

  // A Jinja string literal: backslash escapes, may span lines. Unterminated: runs to the end.
  std::size_t string_end(std::size_t i) {
    const unsigned char q = at(i);
    std::size_t j = i + 1;
    while (j < t_.size()) {
      if (at(j) == '\\') {
        j += 2;
      } else if (at(j) == q) {
        return j + 1;
      } else {
        ++j;
      }
    }
    add_issue(issues_, i, 1, "unterminated string in a Jinja block",
              fmt::format("close the string with {}", static_cast<char>(q)));
    return t_.size();
  }

  // After {% raw %}: plain text up to {% endraw %} (Jinja ends raw textually, like here).
  std::size_t skip_raw(std::size_t i, const JinjaBlock& raw) {
    for (std::size_t p = t_.find("{%", i); p != std::string_view::npos; p = t_.find("{%", p + 1)) {
      std::size_t q = p + 2;
      if (at(q) == '-' || at(q) == '+') ++q;
      while (q < t_.size() && is_space(at(q))) ++q;
      if (starts(q, "endraw")) return p;
    }
    add_issue(issues_, raw.begin, raw.end - raw.begin,
              "unbalanced Jinja: '{% raw %}' is never closed by '{% endraw %}'",
              "add '{% endraw %}'");
    return t_.size();
  }

  std::string_view t_;
  std::vector<ParseIssue>& issues_;
};

// ---------------------------------------------------------------- SQL layer

class SqlLexer {
 public:
  SqlLexer(std::string_view text, const Syntax& syn, Lexed& out) : t_(text), syn_(syn), out_(out) {}

  void run() {
    std::size_t i = 0;
    while (i < t_.size()) {
      const std::size_t start = i;
      if (next_block_ < out_.blocks.size() && out_.blocks[next_block_].begin == i) {
        const auto& b = out_.blocks[next_block_];
        const Kind k = b.type == BlockType::expr   ? Kind::jinja_expr
                       : b.type == BlockType::stmt ? Kind::jinja_stmt
                                                   : Kind::jinja_comment;
        out_.tokens.push_back({k, b.begin, b.end, next_block_});
        i = b.end;
        ++next_block_;
        continue;
      }
      const Kind k = lex_one(i);
      out_.tokens.push_back({k, start, i, npos});
    }
  }

 private:
  [[nodiscard]] unsigned char at(std::size_t i) const noexcept {
    return i < t_.size() ? static_cast<unsigned char>(t_[i]) : 0;
  }
  [[nodiscard]] std::size_t block_begin() const noexcept {
    return next_block_ < out_.blocks.size() ? out_.blocks[next_block_].begin : npos;
  }
  // Inside a multi-byte SQL token: if a Jinja block starts at i, step over it and return true.
  bool skip_block(std::size_t& i, Context ctx) {
    if (i != block_begin()) return false;
    auto& b = out_.blocks[next_block_++];
    b.context = ctx;
    i = b.end;
    return true;
  }
  // A backslash escapes the next byte, unless a Jinja block starts there (Jinja comes first).
  [[nodiscard]] std::size_t escape_width(std::size_t i) const noexcept {
    return i + 1 == block_begin() ? 1 : 2;
  }
  // Simple tokens (words, numbers, whitespace) stop where a Jinja block begins.
  [[nodiscard]] bool free_at(std::size_t i) const noexcept {
    return i < t_.size() && i != block_begin();
  }

  Kind lex_one(std::size_t& i) {
    const unsigned char c = at(i);
    const unsigned char n = at(i + 1);
    if (is_space(c)) {
      while (free_at(i) && is_space(at(i))) ++i;
      return Kind::whitespace;
    }
    if ((c == '-' && n == '-') || (syn_.slash_comments && c == '/' && n == '/') ||
        (syn_.hash_comments && c == '#')) {
      while (i < t_.size() && at(i) != '\n' && at(i) != '\r') {
        if (!skip_block(i, Context::comment)) ++i;
      }
      return Kind::comment;
    }
    if (c == '/' && n == '*') return block_comment(i);
    if (c == '\'') return quoted(i, '\'', syn_.backslash_escapes, Kind::string);
    if (c == '"') {
      return syn_.double_quote_strings ? quoted(i, '"', syn_.backslash_escapes, Kind::string)
                                       : quoted(i, '"', false, Kind::quoted_name);
    }
    if (c == '`' && syn_.backtick_names) return quoted(i, '`', false, Kind::quoted_name);
    if (c == '$') return dollar(i);
    if ((c == 'e' || c == 'E') && n == '\'' && syn_.e_strings && free_at(i + 1)) {
      ++i;
      return quoted(i, '\'', true, Kind::string);
    }
    if (const std::size_t p = string_prefix(i); p > 0) {
      // X'0F', B'101', N'text', r'raw', b'bytes', rb'...': the prefix belongs to the literal.
      i += p;
      return at(i) == '"' ? quoted(i, '"', syn_.backslash_escapes, Kind::string)
                          : quoted(i, '\'', syn_.backslash_escapes, Kind::string);
    }
    if (is_word_start(c)) {
      while (free_at(i) && is_word_char(at(i))) ++i;
      return Kind::word;
    }
    if (is_digit(c) || (c == '.' && is_digit(n))) return number(i);
    if (c == '?') {
      ++i;
      return Kind::parameter;
    }
    if ((c == ':' || c == '@') && n != ':' && (is_word_start(n) || (c == '@' && n == '@')) &&
        !follows_operand()) {
      ++i;
      if (at(i) == '@') ++i;
      while (free_at(i) && is_word_char(at(i))) ++i;
      return Kind::parameter;
    }
    if (is_control(c)) {
      const std::size_t start = i;
      while (free_at(i) && is_control(at(i))) ++i;
      add_issue(out_.issues, start, i - start,
                fmt::format("unexpected control character U+{:04X} in SQL", c),
                "remove it; is this file binary or in another encoding?");
      return Kind::invalid;
    }
    static constexpr std::string_view ops[] = {
        "->>", "::", "||", "<=", ">=", "<>", "!=", "=>", "->", "**", "//", "<<", ">>", ":="};
    for (const auto op : ops) {
      // An operator never swallows the start of a comment: "//*" is "/" then "/*".
      const bool comment_next = op == "//" && (syn_.slash_comments || at(i + 2) == '*');
      if (t_.substr(i).starts_with(op) && !comment_next) {
        i += op.size();
        return Kind::symbol;
      }
    }
    ++i;
    return Kind::symbol;
  }

  // Length of a string-literal prefix at i (0 if none): one of x b n r, or rb / br.
  [[nodiscard]] std::size_t string_prefix(std::size_t i) const noexcept {
    const auto letter = [&](std::size_t k) {
      const auto ch = static_cast<unsigned char>(std::tolower(at(k)));
      return ch == 'x' || ch == 'b' || ch == 'n' || ch == 'r';
    };
    const auto quote = [&](std::size_t k) {
      return at(k) == '\'' || (syn_.double_quote_strings && at(k) == '"');
    };
    if (!letter(i)) return 0;
    if (quote(i + 1)) return 1;
    const auto a = std::tolower(at(i));
    const auto b = std::tolower(at(i + 1));
    if (((a == 'r' && b == 'b') || (a == 'b' && b == 'r')) && quote(i + 2)) return 2;
    return 0;
  }

  // ":name" after a name or ")" is a path (Snowflake's col:field), not a parameter.
  [[nodiscard]] bool follows_operand() const noexcept {
    if (out_.tokens.empty()) return false;
    const auto& p = out_.tokens.back();
    if (p.kind == Kind::word || p.kind == Kind::quoted_name || p.kind == Kind::jinja_expr ||
        p.kind == Kind::number) {
      return true;
    }
    return p.kind == Kind::symbol && (at(p.begin) == ')' || at(p.begin) == ']');
  }

  Kind number(std::size_t& i) {
    if (at(i) == '0' && (at(i + 1) == 'x' || at(i + 1) == 'X')) {
      i += 2;
      while (free_at(i) && (std::isxdigit(at(i)) != 0 || at(i) == '_')) ++i;
      return Kind::number;
    }
    while (free_at(i) && (is_digit(at(i)) || at(i) == '_')) ++i;
    if (free_at(i) && at(i) == '.' && at(i + 1) != '.') {
      ++i;
      while (free_at(i) && (is_digit(at(i)) || at(i) == '_')) ++i;
    }
    if (free_at(i) && (at(i) == 'e' || at(i) == 'E') &&
        (is_digit(at(i + 1)) || ((at(i + 1) == '+' || at(i + 1) == '-') && is_digit(at(i + 2))))) {
      i += 2;
      while (free_at(i) && is_digit(at(i))) ++i;
    }
    return Kind::number;
  }

  Kind block_comment(std::size_t& i) {
    const std::size_t start = i;
    std::size_t depth = 0;
    while (i < t_.size()) {
      if (skip_block(i, Context::comment)) continue;
      if (at(i) == '/' && at(i + 1) == '*' && (depth == 0 || syn_.nested_comments)) {
        ++depth;
        i += 2;
      } else if (at(i) == '*' && at(i + 1) == '/') {
        i += 2;
        if (--depth == 0) return Kind::comment;
      } else {
        ++i;
      }
    }
    add_issue(out_.issues, start, 2,
              depth > 1 ? fmt::format("unterminated block comment: {} nested '/*' are not closed "
                                      "by '*/'",
                                      depth)
                        : std::string("unterminated block comment: '/*' is never closed by '*/'"),
              "close the comment with '*/'");
    return Kind::comment;
  }

  // '...', "...", `...`: the quote doubled is an escape; with backslash escapes \x is too.
  Kind quoted(std::size_t& i, unsigned char q, bool backslash, Kind kind) {
    const std::size_t start = i;
    const Context ctx = kind == Kind::string ? Context::string : Context::quoted_name;
    if (syn_.triple_quotes && kind == Kind::string && at(i + 1) == q && at(i + 2) == q) {
      i += 3;
      while (i < t_.size()) {
        if (skip_block(i, ctx)) continue;
        if (at(i) == '\\') {
          i += escape_width(i);
        } else if (at(i) == q && at(i + 1) == q && at(i + 2) == q) {
          i += 3;
          return kind;
        } else {
          ++i;
        }
      }
      unterminated(start, 3, kind, q);
      i = t_.size();
      return kind;
    }
    ++i;
    while (i < t_.size()) {
      if (skip_block(i, ctx)) continue;
      if (backslash && at(i) == '\\') {
        i += escape_width(i);
      } else if (at(i) == q) {
        if (at(i + 1) != q) {
          ++i;
          return kind;
        }
        i += 2;
      } else {
        ++i;
      }
    }
    unterminated(start, 1, kind, q);
    i = t_.size();
    return kind;
  }

  void unterminated(std::size_t start, std::size_t len, Kind kind, unsigned char q) {
    const std::string quote(len, static_cast<char>(q));
    add_issue(out_.issues, start, len,
              fmt::format("unterminated {}: {} is never closed",
                          kind == Kind::string ? "string" : "quoted name", quote),
              fmt::format("close it with {} (a quote inside is written {}{})", quote,
                          static_cast<char>(q), static_cast<char>(q)));
  }

  // $1 parameters, $$...$$ and $tag$...$tag$ strings, $name and ${name} parameters.
  Kind dollar(std::size_t& i) {
    const std::size_t start = i;
    if (is_digit(at(i + 1))) {
      ++i;
      while (free_at(i) && is_digit(at(i))) ++i;
      return Kind::parameter;
    }
    if (at(i + 1) == '{') {
      const std::size_t close = t_.find('}', i + 2);
      if (close != std::string_view::npos && close - i < 256 && (block_begin() > close)) {
        i = close + 1;
        return Kind::parameter;
      }
    }
    if (syn_.dollar_quotes) {
      std::size_t j = i + 1;
      if (syn_.dollar_tags && is_word_start(at(j))) {
        while (j < t_.size() && j != block_begin() && is_word_char(at(j)) && at(j) != '$') ++j;
      }
      if (at(j) == '$' && j != block_begin()) {
        const std::string_view tag = slice(t_, start, j + 1);
        i = j + 1;
        while (i < t_.size()) {
          if (skip_block(i, Context::string)) continue;
          if (t_.substr(i).starts_with(tag)) {
            i += tag.size();
            return Kind::string;
          }
          ++i;
        }
        add_issue(out_.issues, start, tag.size(),
                  fmt::format("unterminated dollar-quoted string: {} is never closed", tag),
                  fmt::format("close it with {}", tag));
        return Kind::string;
      }
    }
    ++i;
    // "$E'x'", "$X'0F'": a quote right after the letters makes them a literal's prefix, as
    // DuckDB lexes it, not the name of a $name parameter.
    if (((at(i) == 'e' || at(i) == 'E') && at(i + 1) == '\'' && syn_.e_strings) ||
        string_prefix(i) > 0) {
      return Kind::symbol;
    }
    if (is_word_start(at(i))) {
      while (free_at(i) && is_word_char(at(i)) && at(i) != '$') ++i;
      return Kind::parameter;
    }
    return Kind::symbol;
  }

  std::string_view t_;
  const Syntax& syn_;
  Lexed& out_;
  std::size_t next_block_ = 0;
};

}  // namespace

Lexed lex(std::string_view text, const Syntax& syntax) {
  Lexed out;
  out.blocks = JinjaScanner(text, out.issues).scan();
  SqlLexer(text, syntax, out).run();
  std::stable_sort(out.issues.begin(), out.issues.end(),
                   [](const ParseIssue& a, const ParseIssue& b) { return a.offset < b.offset; });
  return out;
}

}  // namespace backfill::detail::sql
