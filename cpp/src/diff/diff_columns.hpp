// Per-column statistics of matched pairs, compared cell by cell, column at a time, after the
// match: only the pairs whose row hash differs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "diff/diff_engine.hpp"

namespace backfill::detail {

// A matched (old row, new row) pair, as global row numbers (tables have < 2^32 rows).
struct RowPair {
  std::uint32_t old_row;
  std::uint32_t new_row;
};

// Physical layouts the typed loops read directly (when the same on both sides, no dictionary);
// others go through Value.
enum class Layout : std::uint8_t { generic, f64, i64, i32, utf8 };
[[nodiscard]] Layout layout_of(const arrow::DataType& t) noexcept;

// Compares one cell pair of column c: true when they differ (c's tolerance applied); updates
// the changed / null_to_value / value_to_null counts and, for numeric columns, max_abs_diff.
bool compare_cells(const ComparedColumn& c, const Value& a, const Value& b, ColumnStats& st);

// Compares every compared column (tolerances applied) over `pairs`, the matched pairs whose row
// hash differs (equal cells hash equal, so every other pair is unchanged): adds each column's
// statistics into stats (parallel to plan.compared) and returns, per pair, whether any column
// differs. Sorts `pairs` by old row first, so each column is read in address order (a page
// walk per few rows instead of per cell); the flags follow that order. Runs on plan.threads.
[[nodiscard]] std::vector<std::uint8_t> compare_candidates(const arrow::ImportedTable& old_table,
                                                           const arrow::ImportedTable& new_table,
                                                           const DiffPlan& plan,
                                                           std::vector<RowPair>& pairs,
                                                           std::vector<ColumnStats>& stats);

}  // namespace backfill::detail
