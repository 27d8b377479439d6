// The Jinja side of the lint: clock and random reads in {{ }} / {% %}, ref()/source() inputs,
// references to the run's period, config() arguments and {% if %}/{% endif %} balance.
// One pass over the blocks in order, so a {% set %} alias is known to the blocks after it.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "lint/lint_rules.hpp"

namespace backfill::detail::lint {

namespace {

using sql::BlockType;
using sql::Context;
using sql::JinjaBlock;
using sql::JKind;

constexpr std::string_view kClockHint =
    "use the run's period instead: {{ start }} / {{ end }} (the period a backfill run processes)";

// Block tags that open a region closed by end<tag> ("set" only in its block form).
constexpr std::string_view kOpeners[] = {
    "if",   "for",      "macro", "call", "filter", "block", "with", "autoescape", "materialization",
    "test", "snapshot", "docs",  "raw",  "set"};

struct Tok {
  JKind kind;
  std::string_view text;
  std::size_t begin;
  std::size_t end;
};

std::string unquote(std::string_view s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i]);
  }
  return out;
}

class Analyzer {
 public:
  Analyzer(std::string_view text, const sql::Lexed& lexed, const std::vector<std::string>& periods)
      : t_(text), lexed_(lexed), periods_(periods.begin(), periods.end()) {}

  JinjaFacts run() {
    for (const auto& block : lexed_.blocks) {
      toks_.clear();
      std::string norm;
      for (const auto& jt : block.tokens) {
        if (jt.kind == JKind::open || jt.kind == JKind::close || jt.kind == JKind::whitespace ||
            jt.kind == JKind::text) {
          continue;
        }
        toks_.push_back({jt.kind, sql::slice(t_, jt.begin, jt.end), jt.begin, jt.end});
        norm += sql::slice(t_, jt.begin, jt.end);
      }
      out_.normalized.push_back(std::move(norm));
      if (block.type == BlockType::comment) continue;
      if (block.type == BlockType::stmt) balance(block);
      scan(block);
    }
    for (const auto& [tag, begin, end] : open_) {
      out_.findings.push_back(
          {Rule::lint_parse, Severity::error, begin, end - begin,
           fmt::format("unbalanced Jinja: '{{% {} %}}' is never closed by '{{% end{} %}}'", tag,
                       tag),
           fmt::format("add '{{% end{} %}}'", tag)});
    }
    return std::move(out_);
  }

 private:
  [[nodiscard]] bool name(std::size_t k, std::string_view s = {}) const noexcept {
    return k < toks_.size() && toks_[k].kind == JKind::name && (s.empty() || toks_[k].text == s);
  }
  [[nodiscard]] bool sym(std::size_t k, std::string_view s) const noexcept {
    return k < toks_.size() && toks_[k].kind == JKind::symbol && toks_[k].text == s;
  }
  // Index of the token closing the bracket opened at k (or the last token).
  [[nodiscard]] std::size_t close_of(std::size_t k) const noexcept {
    int depth = 0;
    for (std::size_t j = k; j < toks_.size(); ++j) {
      if (sym(j, "(") || sym(j, "[") || sym(j, "{")) ++depth;
      if (sym(j, ")") || sym(j, "]") || sym(j, "}")) {
        if (--depth == 0) return j;
      }
    }
    return toks_.empty() ? 0 : toks_.size() - 1;
  }
  // Positional string arguments of the call whose "(" is at k, and literal keyword arguments.
  void call_args(std::size_t k, std::size_t close, std::vector<std::string>& positional,
                 std::vector<std::pair<std::string, std::string>>* kwargs) const {
    for (std::size_t j = k + 1; j < close; ++j) {
      if (sym(j, "(") || sym(j, "[") || sym(j, "{")) {
        j = close_of(j);
        continue;
      }
      const bool arg_start = sym(j - 1, "(") || sym(j - 1, ",");
      if (!arg_start) continue;
      const bool arg_end = sym(j + 1, ",") || j + 1 == close;
      if (toks_[j].kind == JKind::string && arg_end) positional.push_back(unquote(toks_[j].text));
      if (kwargs && name(j) && sym(j + 1, "=") && j + 2 < close) {
        const auto& v = toks_[j + 2];
        const bool literal = v.kind == JKind::string || v.kind == JKind::number ||
                             (v.kind == JKind::name && (v.text == "true" || v.text == "false" ||
                                                        v.text == "True" || v.text == "False"));
        if (literal && (sym(j + 3, ",") || j + 3 == close)) {
          kwargs->emplace_back(std::string(toks_[j].text),
                               v.kind == JKind::string ? unquote(v.text) : std::string(v.text));
        }
      }
    }
  }

  // {% if %} ... {% endif %} and friends.
  void balance(const JinjaBlock& block) {
    if (toks_.empty() || toks_[0].kind != JKind::name) return;
    const std::string_view tag = toks_[0].text;
    const auto is_opener =
        std::find(std::begin(kOpeners), std::end(kOpeners), tag) != std::end(kOpeners);
    if (is_opener) {
      const bool inline_set =
          tag == "set" && std::any_of(toks_.begin(), toks_.end(), [](const Tok& t) {
            return t.kind == JKind::symbol && t.text == "=";
          });
      if (!inline_set) open_.push_back({std::string(tag), block.begin, block.end});
      return;
    }
    const auto parse_error = [&](std::string message, std::string hint) {
      out_.findings.push_back({Rule::lint_parse, Severity::error, block.begin,
                               block.end - block.begin, std::move(message), std::move(hint)});
    };
    if (tag == "elif" || tag == "else") {
      const bool fits = !open_.empty() &&
                        (open_.back().tag == "if" || (tag == "else" && open_.back().tag == "for"));
      if (!fits) {
        parse_error(
            fmt::format("unbalanced Jinja: '{{% {} %}}' outside an '{{% if %}}' block", tag),
            "remove it or add the '{% if %}' it belongs to");
      }
      return;
    }
    if (!tag.starts_with("end")) return;
    const std::string_view opened = tag.substr(3);
    if (std::find(std::begin(kOpeners), std::end(kOpeners), opened) == std::end(kOpeners)) return;
    const auto it = std::find_if(open_.rbegin(), open_.rend(),
                                 [&](const OpenTag& o) { return o.tag == opened; });
    if (it == open_.rend()) {
      parse_error(
          fmt::format("unbalanced Jinja: '{{% {} %}}' without an open '{{% {} %}}'", tag, opened),
          fmt::format("remove it or add the '{{% {} %}}' it closes", opened));
      return;
    }
    if (it != open_.rbegin()) {
      parse_error(fmt::format("unbalanced Jinja: '{{% {} %}}' closes '{{% {} %}}' while "
                              "'{{% {} %}}' is still open",
                              tag, opened, open_.back().tag),
                  fmt::format("close '{{% {} %}}' with '{{% end{} %}}' first", open_.back().tag,
                              open_.back().tag));
      // The inner ones are reported as never closed at the end; drop them here.
      for (auto inner = open_.rbegin(); inner != it; ++inner) {
        out_.findings.push_back(
            {Rule::lint_parse, Severity::error, inner->begin, inner->end - inner->begin,
             fmt::format("unbalanced Jinja: '{{% {} %}}' is never closed by '{{% end{} %}}'",
                         inner->tag, inner->tag),
             fmt::format("add '{{% end{} %}}'", inner->tag)});
      }
    }
    open_.erase(std::next(it).base(), open_.end());
  }

  // Clock/random reads, inputs, period references and config() in one block.
  void scan(const JinjaBlock& block) {
    const bool stmt = block.type == BlockType::stmt;
    // An expression in a SQL comment renders into the comment: its value cannot change data.
    const bool renders_into_data = stmt || block.context != Context::comment;
    const bool is_set = stmt && name(0, "set");
    std::size_t value_from = 0;  // for {% set targets = value %}: index after "="
    std::vector<std::string> targets;
    if (is_set) {
      for (std::size_t k = 1; k < toks_.size(); ++k) {
        if (sym(k, "=")) {
          value_from = k + 1;
          break;
        }
        if (name(k)) targets.emplace_back(toks_[k].text);
      }
    }
    bool period_ref = false;
    std::vector<Read> inputs;
    for (std::size_t k = 0; k < toks_.size(); ++k) {
      if (!name(k) || sym(k - 1, ".") || (k == 0 && stmt)) continue;
      if (is_set && k < value_from) continue;
      if (sym(k - 1, "|")) {  // a filter
        if (toks_[k].text == "random" && renders_into_data) {
          add(Rule::nondeterministic, k, k,
              "the Jinja filter '| random' picks a different item on every run",
              "choose the item deterministically (e.g. by the run's period or a key)");
        }
        continue;
      }
      std::size_t last = k;  // the last name of the chain a.b.c
      while (sym(last + 1, ".") && name(last + 2)) last += 2;
      const bool call = sym(last + 1, "(");
      const std::size_t close = call ? close_of(last + 1) : last;
      const std::string_view first = toks_[k].text;
      const std::string_view tail = toks_[last].text;
      if (sym(k + 1, "=")) continue;  // a keyword argument's name
      if (renders_into_data) {
        if (first == "run_started_at") {
          add(Rule::clock_read, k, last,
              "{{ run_started_at }} is when the dbt run started: a backfill run for a past "
              "period would use today's timestamp",
              std::string(kClockHint));
        } else if (call && std::find(std::begin(kJinjaClockCalls), std::end(kJinjaClockCalls),
                                     tail) != std::end(kJinjaClockCalls)) {
          add(Rule::clock_read, k, close,
              fmt::format("{}() reads the clock when the model renders: a backfill run for a "
                          "past period would use today's time",
                          chain(k, last)),
              std::string(kClockHint));
        } else if (first == "invocation_id") {
          add(Rule::nondeterministic, k, last,
              "{{ invocation_id }} is different on every dbt run, so re-running a period "
              "changes its data",
              "derive the value from the run's period or the row's key");
        }
      }
      if (periods_.contains(std::string(first)) && !(call && k == last)) period_ref = true;
      // dbt microbatch: model.batch.event_time_start / model.config.__dbt_internal_..._start
      if (tail.ends_with("event_time_start") || tail.ends_with("event_time_end")) {
        period_ref = true;
      }
      if (call && k == last && first == "var") {
        std::vector<std::string> pos;
        call_args(last + 1, close, pos, nullptr);
        if (!pos.empty() && periods_.contains(pos.front())) period_ref = true;
      }
      if (call && k == last && (first == "ref" || first == "source")) {
        std::vector<std::string> pos;
        call_args(last + 1, close, pos, nullptr);
        if (!pos.empty()) {
          Read r{first == "ref" ? InputKind::ref : InputKind::source,
                 first == "ref" ? to_lower(pos.back()) : to_lower(pos.front() + "." + pos.back()),
                 block.begin, block.end - block.begin, false};
          r.implicit_filter_opt_out = sym(close + 1, ".") && name(close + 2, "render");
          inputs.push_back(std::move(r));
        }
      }
      if (!call && input_aliases_.contains(std::string(first))) {
        Read r = input_aliases_.at(std::string(first));
        r.offset = block.begin;
        r.length = block.end - block.begin;
        inputs.push_back(std::move(r));
      }
      if (call && k == last && first == "config") {
        std::vector<std::string> ignored;
        call_args(last + 1, close, ignored, &out_.config);
      }
      if (call) k = std::max(k, last);  // arguments are scanned as the loop continues
    }
    if (is_set) {
      for (const auto& tname : targets) {
        if (period_ref) periods_.insert(tname);
        if (!inputs.empty()) input_aliases_[tname] = inputs.back();
      }
      return;
    }
    if (!stmt && block.context != Context::comment) {
      if (period_ref) out_.period_offsets.push_back(block.begin);
      out_.reads.insert(out_.reads.end(), inputs.begin(), inputs.end());
    } else if (stmt && period_ref) {
      out_.period_offsets.push_back(block.begin);
    }
  }

  [[nodiscard]] std::string chain(std::size_t k, std::size_t last) const {
    return std::string(sql::slice(t_, toks_[k].begin, toks_[last].end));
  }

  void add(Rule rule, std::size_t k, std::size_t last, std::string message, std::string hint) {
    out_.findings.push_back({rule, Severity::error, toks_[k].begin,
                             toks_[last].end - toks_[k].begin, std::move(message),
                             std::move(hint)});
  }

  struct OpenTag {
    std::string tag;
    std::size_t begin;
    std::size_t end;
  };

  std::string_view t_;
  const sql::Lexed& lexed_;
  std::set<std::string, std::less<>> periods_;
  std::map<std::string, Read, std::less<>> input_aliases_;
  std::vector<Tok> toks_;
  std::vector<OpenTag> open_;
  JinjaFacts out_;
};

}  // namespace

JinjaFacts analyze_jinja(std::string_view text, const sql::Lexed& lexed,
                         const std::vector<std::string>& period_params) {
  return Analyzer(text, lexed, period_params).run();
}

}  // namespace backfill::detail::lint
