// Sets of half-open intervals [lo, hi) as sorted vectors: the one implementation of merging,
// intersecting and subtracting them, shared by the planner (partition indices, plan/axis.hpp's
// Span) and PeriodSet (UTC seconds, backfill::Interval).
//
// A vector is *normalized* when its intervals are non-empty, sorted, disjoint and non-adjacent
// (a.hi < b.lo for consecutive a, b): the canonical form of a set of points, so two normalized
// vectors are equal exactly when they denote the same set. Every function below except
// normalize() takes normalized vectors and returns one.
//
// The algorithms read and build intervals through IntervalTraits<I>: by default the members lo
// and hi and the aggregate I{lo, hi}; a type with other member names (Interval's start/end)
// specializes it next to its own code.
#pragma once

#include <algorithm>
#include <vector>

namespace backfill::detail {

template <class T>
struct HalfOpen {
  T lo{};
  T hi{};  // exclusive
  [[nodiscard]] constexpr bool empty() const noexcept { return hi <= lo; }
  [[nodiscard]] constexpr T size() const noexcept { return hi > lo ? hi - lo : T{}; }
  friend constexpr bool operator==(const HalfOpen&, const HalfOpen&) noexcept = default;
};

template <class I>
struct IntervalTraits {
  using Point = decltype(I{}.lo);
  [[nodiscard]] static constexpr Point lo(const I& i) noexcept { return i.lo; }
  [[nodiscard]] static constexpr Point hi(const I& i) noexcept { return i.hi; }
  [[nodiscard]] static constexpr I make(Point lo, Point hi) noexcept { return I{lo, hi}; }
};

namespace intervals_internal {

// a ∩ b for normalized ranges [a, a_end) and [b, b_end), appended to out. O(n + m).
template <class I, class It>
void intersect_into(It a, It a_end, It b, It b_end, std::vector<I>& out) {
  using Tr = IntervalTraits<I>;
  while (a != a_end && b != b_end) {
    const auto lo = std::max(Tr::lo(*a), Tr::lo(*b));
    const auto hi = std::min(Tr::hi(*a), Tr::hi(*b));
    if (lo < hi) out.push_back(Tr::make(lo, hi));
    (Tr::hi(*a) < Tr::hi(*b)) ? ++a : ++b;
  }
}

// Appends [lo, hi) to the normalized `out` whose last interval starts at or before lo.
template <class I, class P>
void append_merged(std::vector<I>& out, P lo, P hi) {
  using Tr = IntervalTraits<I>;
  if (!out.empty() && lo <= Tr::hi(out.back())) {
    if (Tr::hi(out.back()) < hi) out.back() = Tr::make(Tr::lo(out.back()), hi);
  } else {
    out.push_back(Tr::make(lo, hi));
  }
}

}  // namespace intervals_internal

// Any vector -> normalized: drops empty intervals, sorts, merges overlapping and adjacent ones.
// O(n log n).
template <class I>
[[nodiscard]] std::vector<I> normalize(std::vector<I> v) {
  using Tr = IntervalTraits<I>;
  std::erase_if(v, [](const I& i) { return !(Tr::lo(i) < Tr::hi(i)); });
  std::sort(v.begin(), v.end(), [](const I& a, const I& b) { return Tr::lo(a) < Tr::lo(b); });
  std::vector<I> out;
  out.reserve(v.size());
  for (const I& i : v) intervals_internal::append_merged(out, Tr::lo(i), Tr::hi(i));
  return out;
}

// a ∪ b, both normalized. O(n + m).
template <class I>
[[nodiscard]] std::vector<I> unite(const std::vector<I>& a, const std::vector<I>& b) {
  using Tr = IntervalTraits<I>;
  std::vector<I> out;
  out.reserve(a.size() + b.size());
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() || j != b.end()) {
    const bool take_a = j == b.end() || (i != a.end() && Tr::lo(*i) <= Tr::lo(*j));
    const I& next = take_a ? *i++ : *j++;
    intervals_internal::append_merged(out, Tr::lo(next), Tr::hi(next));
  }
  return out;
}

// a ∩ b, both normalized. O(n + m).
template <class I>
[[nodiscard]] std::vector<I> intersect(const std::vector<I>& a, const std::vector<I>& b) {
  std::vector<I> out;
  intervals_internal::intersect_into(a.begin(), a.end(), b.begin(), b.end(), out);
  return out;
}

// a ∩ window, a normalized (the window may be empty). O(n).
template <class I>
[[nodiscard]] std::vector<I> intersect(const std::vector<I>& a, const I& window) {
  std::vector<I> out;
  const I* w = &window;
  intervals_internal::intersect_into(a.data(), a.data() + a.size(), w, w + 1, out);
  return out;
}

// a \ b, both normalized. O(n + m).
template <class I>
[[nodiscard]] std::vector<I> subtract(const std::vector<I>& a, const std::vector<I>& b) {
  using Tr = IntervalTraits<I>;
  std::vector<I> out;
  auto j = b.begin();
  for (const I& i : a) {
    auto cur = Tr::lo(i);
    const auto end = Tr::hi(i);
    while (j != b.end() && Tr::hi(*j) <= cur) ++j;
    for (auto k = j; k != b.end() && Tr::lo(*k) < end; ++k) {
      if (cur < Tr::lo(*k)) out.push_back(Tr::make(cur, Tr::lo(*k)));
      cur = std::max(cur, Tr::hi(*k));
    }
    if (cur < end) out.push_back(Tr::make(cur, end));
  }
  return out;
}

// Total length of a normalized vector (the number of points for integers). O(n).
template <class I>
[[nodiscard]] auto total_length(const std::vector<I>& v) {
  using Tr = IntervalTraits<I>;
  typename Tr::Point n{};
  for (const I& i : v) n += Tr::hi(i) - Tr::lo(i);
  return n;
}

}  // namespace backfill::detail
