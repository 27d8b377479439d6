#include "diff/diff_keys.hpp"

#include <atomic>
#include <cmath>

#include "arrow/morsels.hpp"
#include "arrow/values.hpp"
#include "common/parallel.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::ImportedTable;
using arrow::RowRef;

namespace {

constexpr std::int64_t kRowsPerTask = 1 << 15;

template <class T>
bool same(T x, T y) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    return x == y || (std::isnan(x) && std::isnan(y));
  } else {
    return x == y;
  }
}

// Whether cell i of a equals cell j of b (both non-null), read as `layout`.
bool cells_same(Layout layout, const ArrayView& a, std::int64_t i, const ArrayView& b,
                std::int64_t j) noexcept {
  switch (layout) {
    case Layout::f64: return same(a.values<double>()[i], b.values<double>()[j]);
    case Layout::i64: return same(a.values<std::int64_t>()[i], b.values<std::int64_t>()[j]);
    case Layout::i32: return same(a.values<std::int32_t>()[i], b.values<std::int32_t>()[j]);
    case Layout::utf8: return a.bytes_at(i) == b.bytes_at(j);
    case Layout::generic: return values_equal(value_at(a, i), value_at(b, j));
  }
  return false;
}

Layout common_layout(const ImportedTable& a, std::size_t ca, const ImportedTable& b,
                     std::size_t cb) noexcept {
  const Layout la = layout_of(a.fields()[ca].type);
  return la == layout_of(b.fields()[cb].type) ? la : Layout::generic;
}

// Whether every pair of rows of one side has equal key cells.
bool same_side(const ImportedTable& t, const std::vector<std::size_t>& keys,
               std::span<const RowPair> claims) {
  const RowLocator loc(t);
  for (const auto& c : claims) {
    const RowRef ra = loc.locate(c.old_row);
    const RowRef rb = loc.locate(c.new_row);
    for (const auto k : keys) {
      const Layout l = common_layout(t, k, t, k);
      const auto& ba = t.batches()[static_cast<std::size_t>(ra.chunk)];
      const auto& bb = t.batches()[static_cast<std::size_t>(rb.chunk)];
      if (!cells_same(l, ba.column(k), ra.row, bb.column(k), rb.row)) return false;
    }
  }
  return true;
}

}  // namespace

bool verify_key_claims(const ImportedTable& old_table, const ImportedTable& new_table,
                       const DiffPlan& plan, std::span<const std::uint32_t> match_of,
                       std::span<const RowPair> claims_old, std::span<const RowPair> claims_new,
                       std::span<const std::uint32_t> position) {
  if (!same_side(old_table, plan.key_old, claims_old)) return false;
  if (!same_side(new_table, plan.key_new, claims_new)) return false;
  const auto tasks = morsels_of(new_table, kRowsPerTask);
  const RowLocator lo(old_table);
  const bool one_old_batch = old_table.batches().size() == 1;
  std::atomic<bool> ok{true};
  // Column at a time within a task: the new column is read in order, the old one in the
  // matched rows' order (in order too when the tables are similarly ordered).
  parallel_for(tasks.size(), plan.threads, [&](std::size_t t, unsigned) {
    if (!ok.load(std::memory_order_relaxed)) return;
    const Morsel& task = tasks[t];
    for (std::size_t k = 0; k < plan.key.size(); ++k) {
      const Layout layout = common_layout(old_table, plan.key_old[k], new_table, plan.key_new[k]);
      const ArrayView& b = new_table.batches()[task.batch].column(plan.key_new[k]);
      for (auto j = task.begin; j < task.end; ++j) {
        const auto gn = static_cast<std::size_t>(task.first + (j - task.begin));
        std::uint32_t go = kNoMatch;
        if (position.empty()) {
          go = match_of[gn];
        } else if (position[gn] != kNoMatch) {
          go = match_of[position[gn]];
        }
        if (go == kNoMatch) continue;
        const RowRef ra = one_old_batch ? RowRef{0, go} : lo.locate(go);
        const ArrayView& a =
            old_table.batches()[static_cast<std::size_t>(ra.chunk)].column(plan.key_old[k]);
        if (!cells_same(layout, a, ra.row, b, j)) {
          ok = false;
          return;
        }
      }
    }
  });
  return ok;
}

}  // namespace backfill::detail
