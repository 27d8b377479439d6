#include "calendar/posix_tz.hpp"

#include <algorithm>
#include <string>

#include "calendar/civil.hpp"

namespace backfill::detail {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  [[nodiscard]] bool done() const { return i_ >= s_.size(); }
  [[nodiscard]] char peek() const { return done() ? '\0' : s_[i_]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  bool name() {  // "EST" or "<+0530>"
    if (eat('<')) {
      while (!done() && peek() != '>') ++i_;
      return eat('>');
    }
    const std::size_t from = i_;
    while (!done() && ((peek() >= 'A' && peek() <= 'Z') || (peek() >= 'a' && peek() <= 'z'))) ++i_;
    return i_ - from >= 3;
  }
  std::optional<int> number() {
    if (peek() < '0' || peek() > '9') return std::nullopt;
    int v = 0;
    while (peek() >= '0' && peek() <= '9') v = v * 10 + (s_[i_++] - '0');
    return v;
  }
  // [+-]hh[:mm[:ss]] -> seconds (sign as written)
  std::optional<std::int64_t> hms() {
    int sign = 1;
    if (eat('-'))
      sign = -1;
    else
      eat('+');
    const auto h = number();
    if (!h) return std::nullopt;
    std::int64_t v = std::int64_t{*h} * 3600;
    if (eat(':')) {
      const auto m = number();
      if (!m) return std::nullopt;
      v += std::int64_t{*m} * 60;
      if (eat(':')) {
        const auto sec = number();
        if (!sec) return std::nullopt;
        v += *sec;
      }
    }
    return sign * v;
  }
  std::optional<PosixTransitionDate> date() {
    PosixTransitionDate d{};
    if (eat('M')) {
      const auto m = number();
      if (!m || !eat('.')) return std::nullopt;
      const auto w = number();
      if (!w || !eat('.')) return std::nullopt;
      const auto wd = number();
      if (!wd || *m < 1 || *m > 12 || *w < 1 || *w > 5 || *wd > 6) return std::nullopt;
      d = {PosixTransitionDate::Kind::month_week_day, *m, *w, *wd};
    } else if (eat('J')) {
      const auto n = number();
      if (!n || *n < 1 || *n > 365) return std::nullopt;
      d = {PosixTransitionDate::Kind::julian_no_leap, *n, 0, 0};
    } else {
      const auto n = number();
      if (!n || *n > 365) return std::nullopt;
      d = {PosixTransitionDate::Kind::zero_based, *n, 0, 0};
    }
    if (eat('/')) {
      const auto t = hms();
      if (!t) return std::nullopt;
      d.time = *t;
    }
    return d;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Local day number (days since 1970-01-01) of a rule date in year y.
std::int64_t rule_day(const PosixTransitionDate& d, int y) {
  const std::int64_t jan1 = days_from_civil_unchecked(y, 1, 1);
  switch (d.kind) {
    case PosixTransitionDate::Kind::julian_no_leap:  // Feb 29 is never counted
      return jan1 + d.a - 1 + (is_leap(y) && d.a >= 60 ? 1 : 0);
    case PosixTransitionDate::Kind::zero_based: return jan1 + d.a;
    case PosixTransitionDate::Kind::month_week_day: {
      const auto m = static_cast<unsigned>(d.a);
      const std::int64_t first = days_from_civil_unchecked(y, m, 1);
      const std::int64_t first_wd = floor_mod(first + 4, 7);  // 1970-01-01 was a Thursday (4)
      std::int64_t day = first + floor_mod(d.c - first_wd, 7) + 7 * std::int64_t{d.b - 1};
      const std::int64_t next_month =
          m == 12 ? days_from_civil_unchecked(y + 1, 1, 1) : days_from_civil_unchecked(y, m + 1, 1);
      while (day >= next_month) day -= 7;  // week 5 means the last such weekday
      return day;
    }
  }
  return jan1;
}

}  // namespace

std::optional<PosixRule> parse_posix_rule(std::string_view text) {
  Reader r(text);
  PosixRule rule;
  if (!r.name()) return std::nullopt;
  const auto std_off = r.hms();
  if (!std_off) return std::nullopt;
  rule.std_offset = static_cast<std::int32_t>(-*std_off);  // POSIX offsets count west of UTC
  if (r.done()) return rule;
  if (!r.name()) return std::nullopt;
  rule.dst_offset = rule.std_offset + 3600;
  if (r.peek() != ',' && !r.done()) {
    const auto dst_off = r.hms();
    if (!dst_off) return std::nullopt;
    rule.dst_offset = static_cast<std::int32_t>(-*dst_off);
  }
  if (!r.eat(',')) return std::nullopt;  // a DST name without rules: unspecified, don't guess
  const auto start = r.date();
  if (!start || !r.eat(',')) return std::nullopt;
  const auto end = r.date();
  if (!end || !r.done()) return std::nullopt;
  rule.start = *start;
  rule.end = *end;
  return rule;
}

std::vector<Transition> posix_transitions(const PosixRule& rule, int first_year, int last_year) {
  std::vector<Transition> out;
  if (!rule.dst_offset) return out;
  for (int y = first_year; y <= last_year; ++y) {
    const std::int64_t into = rule_day(rule.start, y) * kSecondsPerDay + rule.start.time;
    const std::int64_t outof = rule_day(rule.end, y) * kSecondsPerDay + rule.end.time;
    out.push_back({into - rule.std_offset, *rule.dst_offset});
    out.push_back({outof - *rule.dst_offset, rule.std_offset});
  }
  std::sort(out.begin(), out.end(),
            [](const Transition& a, const Transition& b) { return a.at < b.at; });
  return out;
}

}  // namespace backfill::detail
