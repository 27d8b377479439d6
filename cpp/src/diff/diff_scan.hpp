// Pass 1 of the diff engine (diff_engine.cpp), per side: key hashes counted per bucket (top
// bits of the key hash), then each row's (key hash, row hash of every compared column, row
// number) scattered once into its bucket of one pre-faulted array; partition starts, row counts
// and measure sums per partition in the same pass. On the merge path (both sides sorted by one
// integer key) nothing is hashed or scattered: the merge compares matched runs' columns itself.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"
#include "diff/diff_engine.hpp"
#include "diff/prefaulted.hpp"

namespace backfill::detail {

// A row in its bucket, with the hashes it is matched and compared by: per-bucket work then
// reads memory sequentially instead of gathering from row-indexed arrays (a cache miss each).
// Packed to 20 bytes (x86 and ARMv8 load unaligned words at full speed): a sixth less memory
// to fault in and stream than the padded 24.
#pragma pack(push, 4)
struct Entry {
  std::uint64_t key_hash;
  std::uint64_t row_hash;
  std::uint32_t row;
};
#pragma pack(pop)
static_assert(sizeof(Entry) == 20);

struct SideScan {
  // Rows radix-partitioned by the top bits of their key hash, null keys left out: bucket b is
  // entries[start[b] .. start[b + 1]), in row order.
  Prefaulted<Entry> entries;  // uninitialized until scattered into
  // Per row: its position in entries (kNoPosition for a null key); kept only when asked for
  // (keys the hash does not identify: their claims are checked in row order, diff_keys.hpp).
  Prefaulted<std::uint32_t> position;
  std::vector<std::size_t> start;
  std::vector<Seconds> part;  // partition start per row (kNullPartition for null)
  std::int64_t null_keys = 0;
  std::vector<MeasureSum> sums;  // per measure
  std::unordered_map<Seconds, PartitionStats> partitions;
};

// Scans one side of the diff into 2^bits buckets by the top bits of the key hash.
// scatter false (merge path): nothing is hashed or scattered (partitions and sums only).
// O(rows x (keys + compared columns)), parallel over morsels of rows.
// positions: keep each row's position in entries (SideScan::position).
[[nodiscard]] SideScan scan_side(const arrow::ImportedTable& t, const RowLocator& loc,
                                 const DiffPlan& plan, bool old_side, int bits, bool scatter,
                                 bool positions = false);

inline constexpr std::uint32_t kNoPosition = UINT32_MAX;

}  // namespace backfill::detail
