// SqlView: significant SQL tokens with matched parentheses, statement ranges and query blocks.
#include <algorithm>
#include <cctype>

#include "lint/lint_rules.hpp"

namespace backfill::detail::lint {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool name_ends_with(std::string_view name, std::string_view suffix) noexcept {
  if (suffix.empty() || suffix.size() > name.size()) return false;
  if (!name.ends_with(suffix)) return false;
  return suffix.size() == name.size() || name[name.size() - suffix.size() - 1] == '.';
}

SqlView::SqlView(std::string_view text, const sql::Lexed& lexed) : text_(text) {
  std::vector<std::size_t> open;  // indices of unmatched "("
  std::size_t stmt_begin = 0;
  std::size_t ifs = 0;  // open {% if %} blocks
  for (const auto& t : lexed.tokens) {
    using sql::Kind;
    if (t.kind == Kind::jinja_stmt && t.block < lexed.blocks.size()) {
      for (const auto& jt : lexed.blocks[t.block].tokens) {
        if (jt.kind != sql::JKind::name) continue;
        const auto tag = sql::slice(text, jt.begin, jt.end);
        if (tag == "if") ++ifs;
        if (tag == "endif" && ifs > 0) --ifs;
        break;
      }
    }
    if (t.kind == Kind::whitespace || t.kind == Kind::comment || t.kind == Kind::jinja_comment ||
        t.kind == Kind::jinja_stmt || t.kind == Kind::invalid) {
      continue;
    }
    Sig s{t.kind,
          t.begin,
          t.end,
          t.block,
          sql::npos,
          open.size(),
          open.empty() ? sql::npos : open.back(),
          statements_.size(),
          ifs > 0};
    const std::size_t idx = sig_.size();
    if (t.kind == Kind::symbol && text[t.begin] == '(' && t.end == t.begin + 1) {
      open.push_back(idx);
    } else if (t.kind == Kind::symbol && text[t.begin] == ')' && t.end == t.begin + 1 &&
               !open.empty()) {
      s.match = open.back();
      sig_[open.back()].match = idx;
      open.pop_back();
      s.depth = open.size();
      s.parent = open.empty() ? sql::npos : open.back();
    } else if (t.kind == Kind::symbol && text[t.begin] == ';') {
      // A ";" ends the statement whatever the parentheses say: unbalanced input stays local.
      sig_.push_back(s);
      statements_.emplace_back(stmt_begin, idx);
      stmt_begin = idx + 1;
      open.clear();
      continue;
    }
    sig_.push_back(s);
  }
  if (stmt_begin < sig_.size()) statements_.emplace_back(stmt_begin, sig_.size());
  paren_ordered_.assign(sig_.size(), false);
  statement_ordered_.assign(statements_.size() + 1, false);
  for (std::size_t j = 0; j + 1 < sig_.size(); ++j) {
    if (word(j, "order") && word(j + 1, "by")) {
      if (sig_[j].parent != sql::npos) {
        paren_ordered_[sig_[j].parent] = true;
      } else {
        statement_ordered_[sig_[j].statement] = true;
      }
    }
  }
}

bool SqlView::block_ordered(std::size_t i) const noexcept {
  const std::size_t p = sig_[i].parent;
  return p != sql::npos ? paren_ordered_[p] : statement_ordered_[sig_[i].statement];
}

std::string_view SqlView::text(std::size_t i) const noexcept {
  return i < sig_.size() ? sql::slice(text_, sig_[i].begin, sig_[i].end) : std::string_view{};
}

bool SqlView::word(std::size_t i, std::string_view lower) const noexcept {
  return i < sig_.size() && sig_[i].kind == sql::Kind::word && iequals(text(i), lower);
}

bool SqlView::sym(std::size_t i, std::string_view s) const noexcept {
  return i < sig_.size() && sig_[i].kind == sql::Kind::symbol && text(i) == s;
}

std::string SqlView::lower(std::size_t i) const { return to_lower(text(i)); }

std::pair<std::size_t, std::size_t> SqlView::block_of(std::size_t i) const noexcept {
  const auto& st = statements_[std::min(sig_[i].statement, statements_.size() - 1)];
  const std::size_t p = sig_[i].parent;
  if (p == sql::npos) return st;
  return {p + 1, sig_[p].match == sql::npos ? st.second : sig_[p].match};
}

bool SqlView::has_order_by(std::size_t b, std::size_t e, std::size_t d) const noexcept {
  for (std::size_t j = b; j + 1 < e && j + 1 < sig_.size(); ++j) {
    if (sig_[j].depth == d && word(j, "order") && word(j + 1, "by")) return true;
  }
  return false;
}

}  // namespace backfill::detail::lint
