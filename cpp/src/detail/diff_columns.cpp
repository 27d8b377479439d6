#include "detail/diff_columns.hpp"

#include <algorithm>
#include <cmath>

#include "detail/parallel.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::ImportedTable;
using arrow::RowRef;
using arrow::TypeId;

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

// Physical layouts read directly (same on both sides, no dictionary); others go through Value.
enum class Layout : std::uint8_t { generic, f64, i64, i32, utf8 };

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

template <class T>
void fixed(const Column& col, ColumnStats& st) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    prefetch_fixed<T>(col, p + kAhead);
    const ArrayView& a = col.old_view(p);
    const ArrayView& b = col.new_view(p);
    const std::int64_t i = col.old_refs[p].row;
    const std::int64_t j = col.new_refs[p].row;
    const bool va = a.is_valid(i);
    const bool vb = b.is_valid(j);
    if (!va || !vb) {
      if (va != vb) note_change(va, vb, st);
      continue;
    }
    const T x = a.values<T>()[i];
    const T y = b.values<T>()[j];
    if (col.c.numeric) note_numbers(static_cast<double>(x), static_cast<double>(y), st);
    if constexpr (std::is_floating_point_v<T>) {
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    } else {
      if (x == y) continue;
    }
    note_change(true, true, st);
  }
}

void strings(const Column& col, ColumnStats& st) {
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
  }
}

void generic(const Column& col, ColumnStats& st) {
  for (std::size_t p = 0; p < col.old_refs.size(); ++p) {
    (void)compare_cells(col.c, value_at(col.old_view(p), col.old_refs[p].row),
                        value_at(col.new_view(p), col.new_refs[p].row), st);
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

void compare_hashed_columns(const ImportedTable& old_table, const ImportedTable& new_table,
                            const DiffPlan& plan, std::vector<RowPair>& pairs,
                            std::vector<ColumnStats>& stats) {
  std::vector<std::size_t> hashed;
  for (std::size_t k = 0; k < plan.compared.size(); ++k) {
    if (plan.compared[k].mode == CompareMode::hash) hashed.push_back(k);
  }
  if (pairs.empty() || hashed.empty()) return;
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
  // Tasks of (column, range of pairs), so that both threads stay busy to the end.
  constexpr std::size_t kPairsPerTask = 1 << 15;
  const std::size_t ranges = (pairs.size() + kPairsPerTask - 1) / kPairsPerTask;
  std::vector<ColumnStats> task_stats(hashed.size() * ranges);
  parallel_for(task_stats.size(), plan.threads, [&](std::size_t t, unsigned) {
    const ComparedColumn& c = plan.compared[hashed[t / ranges]];
    const std::size_t b = (t % ranges) * kPairsPerTask;
    const std::size_t n = std::min(kPairsPerTask, pairs.size() - b);
    const Column col{old_table, new_table, c, std::span(old_refs).subspan(b, n),
                     std::span(new_refs).subspan(b, n)};
    ColumnStats& st = task_stats[t];
    const Layout lo_kind = layout_of(old_table.fields()[c.old_index].type);
    const Layout ln_kind = layout_of(new_table.fields()[c.new_index].type);
    switch (lo_kind == ln_kind ? lo_kind : Layout::generic) {
      case Layout::f64: return fixed<double>(col, st);
      case Layout::i64: return fixed<std::int64_t>(col, st);
      case Layout::i32: return fixed<std::int32_t>(col, st);
      case Layout::utf8: return strings(col, st);
      case Layout::generic: return generic(col, st);
    }
  });
  for (std::size_t t = 0; t < task_stats.size(); ++t) {
    ColumnStats& into = stats[hashed[t / ranges]];
    const ColumnStats& from = task_stats[t];
    into.changed += from.changed;
    into.null_to_value += from.null_to_value;
    into.value_to_null += from.value_to_null;
    into.max_abs_diff = std::max(into.max_abs_diff, from.max_abs_diff);
    into.has_diff |= from.has_diff;
  }
}

}  // namespace backfill::detail
