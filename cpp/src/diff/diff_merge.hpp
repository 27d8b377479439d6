// The diff's merge path: when both sides are already sorted by their single integer key
// (tables stored or exported in key order), matching is a lockstep walk of the two key columns
// instead of a radix scatter and hash tables. diff_engine.cpp decides and feeds the results
// into the same downstream as the hash path, so both give identical DiffResults.
// Matched keys come in runs (rows i.., j.. on the two sides); the compared columns of a run are
// compared buffer against buffer (memcmp-like over fixed-width values and validity, offsets and
// bytes of strings), so no cell is hashed: a pair is a candidate exactly when a column's cells
// would hash differently (equal bits, or -0.0 vs 0.0, or two NaNs, count as equal). Layouts
// not read directly (dictionaries, decimals, a type differing between the sides...) hash the
// run's cells of that column on both sides and compare the hashes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"
#include "diff/diff_columns.hpp"

namespace backfill::detail {

// The key columns' values across all batches, in row order, as int64 (one span per key
// column). Zero-copy for a single plain int64 batch; other layouts are widened into a copy
// (8 bytes a row a column: less than the hash path's 20-byte entries).
class SortedKeys {
 public:
  SortedKeys(std::vector<std::vector<std::int64_t>> owned,
             std::vector<std::span<const std::int64_t>> columns)
      : owned_(std::move(owned)), columns_(std::move(columns)) {}
  // A moved vector keeps its buffers, so the spans stay valid; a copy would not.
  SortedKeys(SortedKeys&&) noexcept = default;
  SortedKeys& operator=(SortedKeys&&) noexcept = default;
  SortedKeys(const SortedKeys&) = delete;
  SortedKeys& operator=(const SortedKeys&) = delete;
  ~SortedKeys() = default;
  [[nodiscard]] std::span<const std::span<const std::int64_t>> columns() const noexcept {
    return columns_;
  }
  [[nodiscard]] std::size_t size() const noexcept { return columns_.front().size(); }

 private:
  std::vector<std::vector<std::int64_t>> owned_;
  std::vector<std::span<const std::int64_t>> columns_;
};

// The key columns of t when each is a plain (not dictionary-encoded) integer column of at most
// 32 unsigned or 64 signed bits, or a date32 column that is date32 in `other` too (its
// other_columns, parallel), without nulls, and the rows strictly ascending by the key
// (lexicographically for several columns) across all batches; nullopt otherwise (stops at the
// first step down). Equal adjacent keys are duplicates: nullopt, so that the hash path counts
// and reports them.
[[nodiscard]] std::optional<SortedKeys> sorted_keys(const arrow::ImportedTable& t,
                                                    const std::vector<std::size_t>& columns,
                                                    const arrow::ImportedTable& other,
                                                    const std::vector<std::size_t>& other_columns);

// One key range's outcome of the merge.
struct MergeRange {
  std::int64_t matched = 0, added = 0, removed = 0;
  std::vector<std::int64_t> added_rows, removed_rows;  // the first `sample` (smallest rows)
  std::vector<RowPair> hash_changed;                   // matched pairs whose row hash differs
  std::unordered_map<Seconds, std::int64_t> added_in, removed_in;  // per partition start
};

struct MergeSide {
  const SortedKeys& keys;             // strictly ascending
  const arrow::ImportedTable& table;  // the compared columns are read from its buffers
  std::span<const Seconds> part;      // per row; empty when not partitioned
};

// Walks both sides in lockstep, split into key ranges (cut at quantiles of the larger side,
// found in the other by binary search) run in parallel on `threads`; ranges in key order.
// hash_changed: the matched pairs where some column of plan.compared differs (as hashes would
// tell it: the cell-by-cell comparison with tolerances follows, diff_columns.hpp).
[[nodiscard]] std::vector<MergeRange> merge_sorted(const MergeSide& old_side,
                                                   const MergeSide& new_side, const DiffPlan& plan,
                                                   std::size_t sample, unsigned threads);

}  // namespace backfill::detail
