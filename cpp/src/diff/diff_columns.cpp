#include "diff/diff_columns.hpp"

#include <algorithm>
#include <cmath>

#include "common/parallel.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::ImportedTable;
using arrow::RowRef;
using arrow::TypeId;

Layout layout_of(const arrow::DataType& t) noexcept {
  if (t.is_dictionary()) return Layout::generic;
  switch (t.id) {
    case TypeId::float64: return Layout::f64;
    case TypeId::int64:
    case TypeId::timestamp:
    case TypeId::duration:
    case TypeId::time64:
    case TypeId::date64: return Layout::i64;
    case TypeId::int32:
    case TypeId::date32:
    case TypeId::time32: return Layout::i32;
    case TypeId::utf8:
    case TypeId::binary: return Layout::utf8;
    default: return Layout::generic;
  }
}

namespace {

// max_abs_diff over pairs of two non-NaN numbers.
void note_numbers(double x, double y, ColumnStats& st) {
  if (std::isnan(x) || std::isnan(y)) return;
  const double d = std::fabs(y - x);
  if (std::isnan(d)) return;  // inf - inf
  st.max_abs_diff = std::max(st.max_abs_diff, d);
  st.has_diff = true;
}

void note_change(bool old_valid, bool new_valid, ColumnStats& st) {
  ++st.changed;
  if (!old_valid) ++st.null_to_value;
  if (!new_valid) ++st.value_to_null;
}

// Whether a pair is settled by validity alone (a null on either side): both null are equal,
// one null is a change (noted, and flagged); false when both cells hold values.
bool settled_by_nulls(bool va, bool vb, ColumnStats& st, std::uint8_t& flag) {
  if (va && vb) return false;
  if (va != vb) {
    note_change(va, vb, st);
    flag = 1;
  }
  return true;
}

struct Column {
  const ImportedTable& old_table;
  const ImportedTable& new_table;
  const ComparedColumn& c;
  std::span<const RowRef> old_refs, new_refs;

  [[nodiscard]] const ArrayView& old_view(std::size_t p) const {
    return old_table.batches()[static_cast<std::size_t>(old_refs[p].chunk)].column(c.old_index);
  }
  [[nodiscard]] const ArrayView& new_view(std::size_t p) const {
    return new_table.batches()[static_cast<std::size_t>(new_refs[p].chunk)].column(c.new_index);
  }
};

// Pairs ahead to prefetch: the cells are scattered (a cache and TLB miss each), so the loops
// keep several misses in flight instead of waiting on each.
constexpr std::size_t kAhead = 16;

template <class T>
void prefetch_fixed(const Column& col, std::size_t p) {
  if (p >= col.old_refs.size()) return;
  __builtin_prefetch(col.old_view(p).values<T>() + col.old_refs[p].row);
  __builtin_prefetch(col.new_view(p).values<T>() + col.new_refs[p].row);
}

// utf8/binary: the offsets 2 * kAhead ahead, the bytes (whose offsets are then in cache) kAhead.
void prefetch_string(const Column& col, std::size_t p) {
  auto at = [](const ArrayView& a, std::int64_t i, bool bytes) {
    const auto* offs = a.values<std::int32_t>() + i;
    if (bytes) {
      __builtin_prefetch(static_cast<const char*>(a.buffers[2]) + *offs);
    } else {
      __builtin_prefetch(offs);
    }
  };
  for (const auto& [q, bytes] : {std::pair{p + 2 * kAhead, false}, std::pair{p + kAhead, true}}) {
    if (q >= col.old_refs.size()) continue;
    at(col.old_view(q), col.old_refs[q].row, bytes);
    at(col.new_view(q), col.new_refs[q].row, bytes);
  }
}

// Whether two non-null numbers count as equal under c's tolerance (cells_equal's rule).
template <class T>
bool numbers_equal(const ComparedColumn& c, T x, T y) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    if (x == y || (std::isnan(x) && std::isnan(y))) return true;
  } else {
    if (x == y) return true;
  }
  if (c.mode != CompareMode::tolerance) return false;
  const auto a = static_cast<double>(x);
  const auto b = static_cast<double>(y);
  return std::isfinite(a) && std::isfinite(b) &&
         std::fabs(b - a) <= c.tolerance.abs + c.tolerance.rel * std::fabs(a);
}

template <class T>
void fixed(const Column& col, ColumnStats& st, std::uint8_t* changed) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    prefetch_fixed<T>(col, p + kAhead);
    const ArrayView& a = col.old_view(p);
    const ArrayView& b = col.new_view(p);
    const std::int64_t i = col.old_refs[p].row;
    const std::int64_t j = col.new_refs[p].row;
    if (settled_by_nulls(a.is_valid(i), b.is_valid(j), st, changed[p])) continue;
    const T x = a.values<T>()[i];
    const T y = b.values<T>()[j];
    if (col.c.numeric) note_numbers(static_cast<double>(x), static_cast<double>(y), st);
    if (numbers_equal(col.c, x, y)) continue;
    note_change(true, true, st);
    changed[p] = 1;
  }
}

void strings(const Column& col, ColumnStats& st, std::uint8_t* changed) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    prefetch_string(col, p);
    const ArrayView& a = col.old_view(p);
    const ArrayView& b = col.new_view(p);
    const std::int64_t i = col.old_refs[p].row;
    const std::int64_t j = col.new_refs[p].row;
    const bool va = a.is_valid(i);
    const bool vb = b.is_valid(j);
    if (va && vb ? a.bytes_at(i) == b.bytes_at(j) : va == vb) continue;
    note_change(va, vb, st);
    changed[p] = 1;
  }
}

// decimal128 columns of one scale on both sides: the unscaled 128-bit integers compare exactly
// (values_equal's rule for one scale); as doubles for max_abs_diff and tolerances, read as
// to_double reads a Value (`unit` is its 10^scale). Through Value, a cell cost a type dispatch
// and a pow() each: 40% of the column pass of an audit whose rows all differ in one decimal.
void decimals(const Column& col, double unit, ColumnStats& st, std::uint8_t* changed) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    if (const std::size_t q = p + kAhead; q < col.old_refs.size()) {
      __builtin_prefetch(col.old_view(q).decimal_words(col.old_refs[q].row));
      __builtin_prefetch(col.new_view(q).decimal_words(col.new_refs[q].row));
    }
    const ArrayView& a = col.old_view(p);
    const ArrayView& b = col.new_view(p);
    const std::int64_t i = col.old_refs[p].row;
    const std::int64_t j = col.new_refs[p].row;
    if (settled_by_nulls(a.is_valid(i), b.is_valid(j), st, changed[p])) continue;
    const __int128 x = a.decimal_at(i);
    const __int128 y = b.decimal_at(j);
    if (x == y) {
      if (col.c.numeric) note_numbers(0.0, 0.0, st);  // a difference of 0, as a double
      continue;
    }
    const double dx = static_cast<double>(x) / unit;
    const double dy = static_cast<double>(y) / unit;
    if (col.c.numeric) note_numbers(dx, dy, st);
    // Unequal integers can round to one double: equal only under a tolerance (cells_equal).
    if (col.c.mode == CompareMode::tolerance && numbers_equal(col.c, dx, dy)) continue;
    note_change(true, true, st);
    changed[p] = 1;
  }
}

void generic(const Column& col, ColumnStats& st, std::uint8_t* changed) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    if (compare_cells(col.c, value_at(col.old_view(p), col.old_refs[p].row),
                      value_at(col.new_view(p), col.new_refs[p].row), st)) {
      changed[p] = 1;
    }
  }
}

// Sorts pairs by old row. Pairs covering an eighth of the old rows or more (an audit's
// partitions whose every row changed) are placed into a per-old-row array and read back in
// order: 35 ms for 2.5M pairs where std::sort took 0.2 s, 40% of that column pass. (An LSD
// radix sort took 80 ms: its passes write every pair twice.)
void sort_by_old_row(std::vector<RowPair>& pairs, std::size_t old_rows) {
  auto by_sort = [&] {
    std::sort(pairs.begin(), pairs.end(),
              [](const RowPair& a, const RowPair& b) { return a.old_row < b.old_row; });
  };
  if (pairs.size() < 4096 || pairs.size() < old_rows / 8) return by_sort();
  constexpr std::uint32_t kNone = UINT32_MAX;  // no new row (old_rows < UINT32_MAX: run_diff)
  std::vector<std::uint32_t> new_of(old_rows, kNone);
  for (const auto& p : pairs) {
    // An old row in two pairs (never: a duplicated key is reported, not compared) would lose
    // one here: sort instead.
    if (new_of[p.old_row] != kNone) return by_sort();
    new_of[p.old_row] = p.new_row;
  }
  std::size_t k = 0;
  for (std::size_t o = 0; o < old_rows; ++o) {
    if (new_of[o] != kNone) pairs[k++] = RowPair{static_cast<std::uint32_t>(o), new_of[o]};
  }
}

}  // namespace

bool compare_cells(const ComparedColumn& c, const Value& a, const Value& b, ColumnStats& st) {
  if (c.numeric) {
    const auto x = to_double(a);
    const auto y = to_double(b);
    if (x && y) note_numbers(*x, *y, st);
  }
  if (cells_equal(c, a, b)) return false;
  note_change(a.valid, b.valid, st);
  return true;
}

std::vector<std::uint8_t> compare_candidates(const ImportedTable& old_table,
                                             const ImportedTable& new_table, const DiffPlan& plan,
                                             std::vector<RowPair>& pairs,
                                             std::vector<ColumnStats>& stats) {
  std::vector<std::uint8_t> changed(pairs.size(), 0);
  if (pairs.empty() || plan.compared.empty()) return changed;
  sort_by_old_row(pairs, static_cast<std::size_t>(old_table.num_rows()));
  const RowLocator lo(old_table);
  const RowLocator ln(new_table);
  std::vector<RowRef> old_refs(pairs.size());
  std::vector<RowRef> new_refs(pairs.size());
  // A task is a range of pairs, every column over it in turn (column at a time, and only this
  // task writes the range's flags); ranges keep both threads busy to the end.
  constexpr std::size_t kPairsPerTask = 1 << 13;
  const std::size_t ranges = (pairs.size() + kPairsPerTask - 1) / kPairsPerTask;
  const std::size_t nc = plan.compared.size();
  std::vector<ColumnStats> task_stats(nc * ranges);
  std::vector<Layout> layouts(nc);
  std::vector<double> decimal_unit(nc, 0.0);  // > 0: decimal128 of one scale on both sides
  for (std::size_t k = 0; k < nc; ++k) {
    const ComparedColumn& c = plan.compared[k];
    const arrow::DataType& ta = old_table.fields()[c.old_index].type;
    const arrow::DataType& tb = new_table.fields()[c.new_index].type;
    const Layout a = layout_of(ta);
    const Layout b = layout_of(tb);
    // Columns compared by value have different types on the two sides (timestamp units...):
    // read through Value even when the physical layouts agree.
    layouts[k] = a == b && c.mode != CompareMode::value ? a : Layout::generic;
    if (ta.id == TypeId::decimal128 && tb.id == TypeId::decimal128 && !ta.is_dictionary() &&
        !tb.is_dictionary() && ta.scale == tb.scale && c.mode != CompareMode::value) {
      decimal_unit[k] = std::pow(10.0, ta.scale);
    }
  }
  parallel_for(ranges, plan.threads, [&](std::size_t r, unsigned) {
    const std::size_t b = r * kPairsPerTask;
    const std::size_t n = std::min(kPairsPerTask, pairs.size() - b);
    std::uint8_t* flags = changed.data() + b;
    for (std::size_t p = b; p < b + n; ++p) {  // here: on both threads (90 ms for 2.5M pairs)
      old_refs[p] = lo.locate(pairs[p].old_row);
      new_refs[p] = ln.locate(pairs[p].new_row);
    }
    for (std::size_t k = 0; k < nc; ++k) {
      const Column col{old_table, new_table, plan.compared[k], std::span(old_refs).subspan(b, n),
                       std::span(new_refs).subspan(b, n)};
      ColumnStats& st = task_stats[k * ranges + r];
      if (decimal_unit[k] > 0) {
        decimals(col, decimal_unit[k], st, flags);
        continue;
      }
      switch (layouts[k]) {
        case Layout::f64: fixed<double>(col, st, flags); break;
        case Layout::i64: fixed<std::int64_t>(col, st, flags); break;
        case Layout::i32: fixed<std::int32_t>(col, st, flags); break;
        case Layout::utf8: strings(col, st, flags); break;
        case Layout::generic: generic(col, st, flags); break;
      }
    }
  });
  for (std::size_t t = 0; t < task_stats.size(); ++t) {
    ColumnStats& into = stats[t / ranges];
    const ColumnStats& from = task_stats[t];
    into.changed += from.changed;
    into.null_to_value += from.null_to_value;
    into.value_to_null += from.value_to_null;
    into.max_abs_diff = std::max(into.max_abs_diff, from.max_abs_diff);
    into.has_diff |= from.has_diff;
  }
  return changed;
}

}  // namespace backfill::detail
