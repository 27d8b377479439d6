// Per-column statistics of matched pairs, compared cell by cell: the rows whose row hash
// differs (column at a time, after the match) and the columns compared by value or tolerance
// (row at a time, during the match).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "detail/diff_engine.hpp"

namespace backfill::detail {

// A matched (old row, new row) pair, as global row numbers (tables have < 2^32 rows).
struct RowPair {
  std::uint32_t old_row;
  std::uint32_t new_row;
};

// Compares one cell pair of column c: true when they differ (c's tolerance applied); updates
// the changed / null_to_value / value_to_null counts and, for numeric columns, max_abs_diff.
bool compare_cells(const ComparedColumn& c, const Value& a, const Value& b, ColumnStats& st);

// Adds, for every hash-compared column (stats parallel to plan.compared), the statistics of
// `pairs`: the matched pairs whose row hash differs. Sorts `pairs` by old row first, so each
// column is read in address order (a page walk per few rows instead of per cell). Runs the
// columns on plan.threads threads.
void compare_hashed_columns(const arrow::ImportedTable& old_table,
                            const arrow::ImportedTable& new_table, const DiffPlan& plan,
                            std::vector<RowPair>& pairs, std::vector<ColumnStats>& stats);

}  // namespace backfill::detail
