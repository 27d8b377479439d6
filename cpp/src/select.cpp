// Selector parsing and evaluation (see select.hpp for the grammar).
#include "backfill/select.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "backfill/error.hpp"
#include "plan/names.hpp"

namespace backfill {

namespace {

struct Atom {
  bool at = false;
  int up = 0;    // 0 none, -1 unbounded, else depth
  int down = 0;  // 0 none, -1 unbounded, else depth
  std::string_view method;
  std::string_view pattern;
  std::string_view text;
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t j = std::min(s.find(sep, i), s.size());
    if (j > i) parts.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::vector<std::string_view> split_space(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) parts.push_back(s.substr(i, j - i));
    i = j;
  }
  return parts;
}

int parse_depth(std::string_view digits, std::string_view atom) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || value <= 0) {
    throw InvalidInput(
        fmt::format("selector '{}': depth '{}' is not a positive integer", atom, digits));
  }
  return value;
}

Atom parse_atom(std::string_view text) {
  Atom a;
  a.text = text;
  std::string_view s = text;
  if (!s.empty() && s.front() == '@') {
    a.at = true;
    s.remove_prefix(1);
  } else {
    std::size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    if (digits < s.size() && s[digits] == '+') {
      a.up = digits == 0 ? -1 : parse_depth(s.substr(0, digits), text);
      s.remove_prefix(digits + 1);
    }
  }
  if (const auto plus = s.rfind('+'); plus != std::string_view::npos) {
    const auto tail = s.substr(plus + 1);
    const bool numeric = std::all_of(tail.begin(), tail.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (numeric) {
      a.down = tail.empty() ? -1 : parse_depth(tail, text);
      s = s.substr(0, plus);
    }
  }
  if (a.at && (a.up != 0 || a.down != 0)) {
    throw InvalidInput(fmt::format("selector '{}': '@' cannot be combined with '+'", text));
  }
  if (const auto colon = s.find(':'); colon != std::string_view::npos) {
    a.method = s.substr(0, colon);
    s.remove_prefix(colon + 1);
    if (a.method.starts_with("config.")) a.method.remove_prefix(7);
  }
  if (s.empty()) {
    throw InvalidInput(
        fmt::format("selector '{}' names no model; expected e.g. 'name', 'name+', "
                    "'+name', '@name', 'tag:daily' or 'fct_*'",
                    text));
  }
  a.pattern = s;
  return a;
}

bool node_matches(const NodeSpec& n, const Atom& a) {
  auto match = [&](std::string_view value) {
    return detail::has_glob(a.pattern) ? detail::glob_match(a.pattern, value) : a.pattern == value;
  };
  if (a.method.empty() || a.method == "fqn" || a.method == "model") {
    return (a.method.empty() || n.kind == NodeKind::model) && match(n.name);
  }
  if (a.method == "tag") {
    return std::any_of(n.tags.begin(), n.tags.end(), match);
  }
  if (a.method == "source") return n.kind == NodeKind::source && match(n.name);
  if (a.method == "strategy" || a.method == "materialized") {
    return n.kind == NodeKind::model && match(to_string(n.strategy));
  }
  if (a.method == "grain") {
    if (n.kind != NodeKind::model) return false;
    return match(n.partitioning ? to_string(n.partitioning->grain) : "none");
  }
  throw InvalidInput(
      fmt::format("selector '{}': unknown method '{}'; expected one of tag, source, "
                  "strategy, grain (or a plain name)",
                  a.text, a.method));
}

void merge_into(std::vector<bool>& into, const std::vector<bool>& from) {
  for (std::size_t i = 0; i < into.size(); ++i) into[i] = into[i] || from[i];
}

std::vector<bool> eval_atom(const Graph& g, const Atom& a) {
  const std::size_t n = g.size();
  std::vector<bool> base(n, false);
  bool any = false;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (node_matches(g.node(ModelId{i}), a)) base[i] = any = true;
  }
  if (!any) {
    const std::string hint = a.method.empty() && !detail::has_glob(a.pattern)
                                 ? detail::did_you_mean(a.pattern, g.nodes())
                                 : std::string();
    throw NotFound(fmt::format("selector '{}' matches no model{}", a.text, hint));
  }
  std::vector<bool> out = base;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!base[i]) continue;
    if (a.up != 0) merge_into(out, g.ancestors(ModelId{i}, a.up));
    if (a.down != 0 || a.at) {
      const auto down = g.descendants(ModelId{i}, a.at ? -1 : a.down);
      merge_into(out, down);
      if (a.at) {
        merge_into(out, g.ancestors(ModelId{i}));
        for (std::uint32_t j = 0; j < n; ++j) {
          if (down[j]) merge_into(out, g.ancestors(ModelId{j}));
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<bool> select_marks(const Graph& graph, std::string_view selector) {
  std::vector<bool> result(graph.size(), false);
  const auto terms = split_space(selector);
  if (terms.empty()) {
    throw InvalidInput("empty selector; expected e.g. 'fct_daily_sales+' or 'tag:daily'");
  }
  for (auto term : terms) {
    std::vector<bool> acc;
    const auto atoms = split(term, ',');
    if (atoms.empty()) throw InvalidInput(fmt::format("selector '{}' names no model", term));
    for (auto text : atoms) {
      auto marks = eval_atom(graph, parse_atom(text));
      if (acc.empty()) {
        acc = std::move(marks);
      } else {
        for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = acc[i] && marks[i];
      }
    }
    merge_into(result, acc);
  }
  return result;
}

std::vector<ModelId> select(const Graph& graph, std::string_view selector,
                            std::string_view exclude) {
  auto marks = select_marks(graph, selector);
  if (!split_space(exclude).empty()) {
    const auto out = select_marks(graph, exclude);
    for (std::size_t i = 0; i < marks.size(); ++i) marks[i] = marks[i] && !out[i];
  }
  std::vector<ModelId> ids;
  for (ModelId id : graph.topological_order()) {
    if (marks[id.value] && graph.node(id).kind == NodeKind::model) ids.push_back(id);
  }
  if (ids.empty()) {
    throw NotFound(
        exclude.empty()
            ? fmt::format("selector '{}' selects no model (only sources)", selector)
            : fmt::format("selector '{}' with exclude '{}' selects no model", selector, exclude));
  }
  return ids;
}

}  // namespace backfill
