// The audit diff: old vs new version of a table, matched by key, in one pass over the Arrow
// buffers, with per-column change counts, aggregate deltas of measures and a per-partition
// breakdown.
//
//   diff::Options o;  o.key = {"order_id"};  o.partition_by = "ordered_at";
//   diff::Result r = diff::diff(import_stream(&old_stream), import_stream(&new_stream), o);
//
// Semantics (documented once, here):
// - Rows match on the key columns compared column-wise (composite keys never collide). Rows with
//   a null in any key column are counted (null_keys_*) and take no further part. Key types must
//   be the same domain on both sides (any integer widths, any string layouts; otherwise the same
//   type) or the diff throws naming the column and both types.
// - A key present more than once on either side is a duplicate: OnDuplicate::error throws naming
//   the key value and its count; OnDuplicate::report counts it (duplicate_keys, duplicate_rows_*)
//   and excludes its rows on both sides from matching.
// - Values compare null-safe (null == null), NaN == NaN, -0.0 == 0.0. Columns whose logical type
//   is the same on both sides compare through a per-row hash first (xxHash; a column is examined
//   only for rows whose hash differs); retyped columns whose values are comparable (integers of
//   any width, numbers, timestamps of any unit or zone as instants) and columns with a tolerance
//   compare value by value. Nested columns (list, struct) compare by a 64-bit hash of their
//   logical value. Incomparable retypes (string vs integer...) are reported, not compared.
// - A tolerance passes when |new - old| <= abs + rel * |old|.
// - Measures: sums over every row of each side (nulls skipped), overall and per partition.
// - Partitions: each row belongs to the partition of its own partition_by value; a matched row
//   whose partition changed counts as changed in both partitions.
// Complexity: O(rows) expected time (hash join on radix-partitioned key hashes, both cores),
// O(rows) extra memory of ~25 bytes per row per side besides the inputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"

namespace backfill::diff {

struct Tolerance {
  double abs = 0;
  double rel = 0;
  [[nodiscard]] bool exact() const noexcept { return abs == 0 && rel == 0; }
};

enum class OnDuplicate : std::uint8_t { error, report };
[[nodiscard]] OnDuplicate parse_on_duplicate(std::string_view s);

struct Options {
  std::vector<std::string> key;
  std::optional<std::vector<std::string>> columns;  // default: every common non-key column
  std::vector<std::string> exclude;
  std::optional<std::string> partition_by;  // a date or timestamp column
  Grain grain = Grain::day;
  TimeZone tz;
  std::map<std::string, Tolerance> tolerance;        // per column
  std::optional<Tolerance> default_tolerance;        // every other numeric compared column
  std::optional<std::vector<std::string>> measures;  // default: numeric compared columns
  std::int64_t sample = 10;
  OnDuplicate on_duplicate = OnDuplicate::error;
  unsigned threads = 0;  // 0: one per hardware thread
  // Inputs strictly ascending by a single integer key are matched by merging them in order;
  // false forces the hash path (the results are the same; for tests and benchmarks).
  bool merge_sorted = true;
};

struct Summary {
  std::int64_t rows_old = 0;
  std::int64_t rows_new = 0;
  std::int64_t matched = 0;
  std::int64_t unchanged = 0;
  std::int64_t changed = 0;
  std::int64_t added = 0;
  std::int64_t removed = 0;
  std::int64_t duplicate_keys = 0;      // distinct keys duplicated on either side
  std::int64_t duplicate_rows_old = 0;  // rows excluded from matching as duplicates
  std::int64_t duplicate_rows_new = 0;
  std::int64_t null_keys_old = 0;
  std::int64_t null_keys_new = 0;
  bool schema_changed = false;
  // Same schema and every row of each side matched to an unchanged row of the other.
  [[nodiscard]] bool identical() const noexcept {
    return !schema_changed && changed == 0 && rows_old == unchanged && rows_new == unchanged;
  }
};

struct Result {
  Summary summary;
  std::vector<std::string> key;
  std::vector<std::string> measures;
  std::optional<std::string> partition_by;
  // column, change (added/removed/retyped), old_type, new_type, compared
  std::shared_ptr<arrow::Table> schema;
  // column, old_type, new_type, compare (hash/value/tolerance), changed, null_to_value,
  // value_to_null, max_abs_diff, and for measures sum_old, sum_new, delta, pct_delta
  std::shared_ptr<arrow::Table> columns;
  // partition, start, end, rows_old, rows_new, added, removed, changed, then per measure m:
  // m_old, m_new, m_delta, m_pct_delta. Sorted by start; rows with a null partition value last.
  std::shared_ptr<arrow::Table> partitions;
  // key columns..., column, old, new (values as text); the first `sample` changed rows in new's
  // row order, one line per changed column.
  std::shared_ptr<arrow::Table> changed_sample;
  std::shared_ptr<arrow::Table> added_sample;           // whole rows of new, in new's row order
  std::shared_ptr<arrow::Table> removed_sample;         // whole rows of old, in old's row order
  std::vector<std::pair<std::string, double>> timings;  // engine phases, wall seconds
};

[[nodiscard]] Result diff(const arrow::ImportedTable& old_table,
                          const arrow::ImportedTable& new_table, const Options& options);

// The same diff over a sequence of (old part, new part) pairs, one pair in memory at a time:
// the result equals diff(concatenation of the old parts, concatenation of the new parts)
// (row numbers, hence samples, count across the parts in order), except that float sums are
// added pair by pair in pair order (deterministic; they may differ from the one-shot's in the
// last bits, as morsels are summed in another grouping).
//
//   diff::Stream s(options);
//   for (auto& [o, n] : pairs) { s.add(o, n); if (s.whole_needed()) break; }
//   std::optional<Result> r = s.whole_needed() ? std::nullopt : s.finish();
//   if (!r) r = diff(whole old, whole new, options);
//
// Each pair is diffed as it comes; its matched rows are final. Its unmatched rows (removed from
// old, added in new) are carried as owned rows and matched against each other at finish, so a
// key that moves between pairs comes out as the one-shot diff reports it. Memory: the largest
// pair plus every unmatched row carried plus each pair's keys per side, sorted and delta-coded
// (~1 byte per key for dense integer ids, ~7 for hashed keys), to see a key recur in another
// pair (checked at finish by one k-way merge).
// Duplicates exclude a key's rows of every pair, which a pair at a time cannot undo: when the
// pairs hold a duplicated key (within one pair: whole_needed() turns true at once; across pairs
// on one side: finish() returns nothing) -- or, for a key that its 64-bit hash does not
// identify (composite, string), two keys of one side share a hash across pairs -- the caller
// diffs the whole inputs at once, which raises or reports them exactly as usual. Every pair
// must have the first pair's schema (InvalidInput otherwise).
class Stream {
 public:
  explicit Stream(Options options);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void add(const arrow::ImportedTable& old_part, const arrow::ImportedTable& new_part);
  [[nodiscard]] bool whole_needed() const noexcept;
  [[nodiscard]] std::int64_t pairs() const noexcept;
  // Rows carried unmatched so far (old, new): the memory the stream holds besides one pair.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> carried() const noexcept;
  // The merged result, or nullopt when the whole inputs must be diffed at once (see above).
  // Throws InvalidInput without pairs. The stream is spent afterwards.
  [[nodiscard]] std::optional<Result> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace backfill::diff
