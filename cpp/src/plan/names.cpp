#include "plan/names.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace backfill::detail {

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Matches one bracket class at pattern[p] (after '['); returns the index after ']' or npos.
std::size_t match_class(std::string_view pattern, std::size_t p, char c, bool& matched) {
  bool negate = p < pattern.size() && (pattern[p] == '!' || pattern[p] == '^');
  if (negate) ++p;
  bool hit = false;
  bool first = true;
  for (; p < pattern.size() && (first || pattern[p] != ']'); ++p, first = false) {
    if (p + 2 < pattern.size() && pattern[p + 1] == '-' && pattern[p + 2] != ']') {
      hit = hit || (pattern[p] <= c && c <= pattern[p + 2]);
      p += 2;
    } else {
      hit = hit || pattern[p] == c;
    }
  }
  if (p >= pattern.size()) return std::string_view::npos;
  matched = hit != negate;
  return p + 1;
}

}  // namespace

std::string did_you_mean(std::string_view name, const std::vector<NodeSpec>& nodes) {
  std::size_t best = std::max<std::size_t>(2, name.size() / 3) + 1;
  const NodeSpec* hit = nullptr;
  for (const auto& n : nodes) {
    const std::size_t d = edit_distance(name, n.name);
    if (d < best) {
      best = d;
      hit = &n;
    }
  }
  return hit ? fmt::format(" (did you mean '{}'?)", hit->name) : std::string();
}

bool has_glob(std::string_view pattern) noexcept {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

// Iterative matcher with single-star backtracking: O(|pattern| * |text|) worst case.
bool glob_match(std::string_view pattern, std::string_view text) noexcept {
  std::size_t p = 0, t = 0;
  std::size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = p++;
      star_t = t;
      continue;
    }
    if (p < pattern.size()) {
      if (pattern[p] == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pattern[p] == '[') {
        bool matched = false;
        const std::size_t after = match_class(pattern, p + 1, text[t], matched);
        if (after != std::string_view::npos) {
          if (matched) {
            p = after;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {  // an unclosed '[' is a literal
          ++p;
          ++t;
          continue;
        }
      } else if (pattern[p] == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace backfill::detail
