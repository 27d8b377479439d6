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
    case TypeId::int64: case TypeId::timestamp: case TypeId::duration: case TypeId::time64:
    case TypeId::date64:
      return Layout::i64;
    case TypeId::int32: case TypeId::date32: case TypeId::time32: return Layout::i32;
    case TypeId::utf8: case TypeId::binary: return Layout::utf8;
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

struct Column {
  const ImportedTable& old_table;
  const ImportedTable& new_table;
  const ComparedColumn& c;
  std::span<const RowRef> old_refs, new_refs;

  const ArrayView& old_view(std::size_t p) const {
    return old_table.batches()[static_cast<std::size_t>(old_refs[p].chunk)].column(c.old_index);
  }
  const ArrayView& new_view(std::size_t p) const {
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
    const bool va = a.is_valid(i);
    const bool vb = b.is_valid(j);
    if (!va || !vb) {
      if (va != vb) {
        note_change(va, vb, st);
        changed[p] = 1;
      }
      continue;
    }
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

void generic(const Column& col, ColumnStats& st, std::uint8_t* changed) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    if (compare_cells(col.c, value_at(col.old_view(p), col.old_refs[p].row),
                      value_at(col.new_view(p), col.new_refs[p].row), st)) {
      changed[p] = 1;
    }
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
  std::sort(pairs.begin(), pairs.end(),
            [](const RowPair& a, const RowPair& b) { return a.old_row < b.old_row; });
  const RowLocator lo(old_table);
  const RowLocator ln(new_table);
  std::vector<RowRef> old_refs(pairs.size());
  std::vector<RowRef> new_refs(pairs.size());
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    old_refs[p] = lo.locate(pairs[p].old_row);
    new_refs[p] = ln.locate(pairs[p].new_row);
  }
  // A task is a range of pairs, every column over it in turn (column at a time, and only this
  // task writes the range's flags); ranges keep both threads busy to the end.
  constexpr std::size_t kPairsPerTask = 1 << 13;
  const std::size_t ranges = (pairs.size() + kPairsPerTask - 1) / kPairsPerTask;
  const std::size_t nc = plan.compared.size();
  std::vector<ColumnStats> task_stats(nc * ranges);
  std::vector<Layout> layouts(nc);
  for (std::size_t k = 0; k < nc; ++k) {
    const ComparedColumn& c = plan.compared[k];
    const Layout a = layout_of(old_table.fields()[c.old_index].type);
    const Layout b = layout_of(new_table.fields()[c.new_index].type);
    // Columns compared by value have different types on the two sides (timestamp units...):
    // read through Value even when the physical layouts agree.
    layouts[k] = a == b && c.mode != CompareMode::value ? a : Layout::generic;
  }
  parallel_for(ranges, plan.threads, [&](std::size_t r, unsigned) {
    const std::size_t b = r * kPairsPerTask;
    const std::size_t n = std::min(kPairsPerTask, pairs.size() - b);
    std::uint8_t* flags = changed.data() + b;
    for (std::size_t k = 0; k < nc; ++k) {
      const Column col{old_table, new_table, plan.compared[k], std::span(old_refs).subspan(b, n),
                       std::span(new_refs).subspan(b, n)};
      ColumnStats& st = task_stats[k * ranges + r];
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
