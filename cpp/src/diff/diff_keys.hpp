// Checking, after the match, the key equalities the match took on the key hash alone.
#pragma once

#include <cstdint>
#include <span>

#include "diff/diff_columns.hpp"
#include "diff/diff_engine.hpp"

namespace backfill::detail {

inline constexpr std::uint32_t kNoMatch = UINT32_MAX;

// Whether every claimed equality of key values holds: match_of[new row] is the old row whose key
// the new row's equals (or kNoMatch), claims_old / claims_new pairs of rows of one side. With
// position (per new row: an index into match_of, or UINT32_MAX for none), match_of is indexed
// through it: match_of[position[new row]]. Key
// columns are compared column at a time in new-row order (typed loops for the common layouts),
// on plan.threads threads. Rows in claims have no null key cell (null keys are never matched).
[[nodiscard]] bool verify_key_claims(const arrow::ImportedTable& old_table,
                                     const arrow::ImportedTable& new_table, const DiffPlan& plan,
                                     std::span<const std::uint32_t> match_of,
                                     std::span<const RowPair> claims_old,
                                     std::span<const RowPair> claims_new,
                                     std::span<const std::uint32_t> position = {});

}  // namespace backfill::detail
