// The diff engine's plan (validated options resolved to column indices) and its raw results;
// diff.cpp builds the plan and turns the results into Arrow tables.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arrow/values.hpp"
#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"
#include "backfill/diff.hpp"

namespace backfill::detail {

enum class CompareMode : std::uint8_t { hash, value, tolerance };

struct ComparedColumn {
  std::string name;
  std::size_t old_index = 0;
  std::size_t new_index = 0;
  CompareMode mode = CompareMode::hash;
  diff::Tolerance tolerance;
  bool numeric = false;  // both sides numeric: max_abs_diff is reported
};

// How a measure is summed. Integers and decimals exactly, as 128-bit integers at the measure's
// scale (a decimal's unscaled value; old and new rescaled to the larger of their scales), so
// that money adds up to the cent whatever the order; floats (either side) in double.
enum class SumKind : std::uint8_t { integer, decimal, floating };

// A measure's running sum: `exact` for integer and decimal measures, `approx` for floats.
// `overflow` records an exact sum that left the 128-bit range (reported, never wrapped).
struct MeasureSum {
  __int128 exact = 0;
  double approx = 0;
  bool overflow = false;
  void add(__int128 v) noexcept { overflow |= __builtin_add_overflow(exact, v, &exact); }
  void add(const MeasureSum& o) noexcept {
    add(o.exact);
    approx += o.approx;
    overflow |= o.overflow;
  }
};

struct DiffPlan {
  std::vector<std::string> key;
  std::vector<std::size_t> key_old, key_new;
  bool exact_key_hash = false;  // one integer key: equal hashes <=> equal keys
  std::vector<ComparedColumn> compared;
  std::optional<std::size_t> part_old, part_new;
  Grain grain = Grain::day;
  TimeZone tz;
  std::vector<std::string> measures;
  std::vector<std::size_t> measure_old, measure_new;
  std::vector<SumKind> measure_kind;                         // per measure
  std::vector<std::int32_t> measure_scale;                   // decimal: the scale of the sums
  std::vector<__int128> measure_mult_old, measure_mult_new;  // 10^(scale - the side's scale)
  std::int64_t sample = 10;
  diff::OnDuplicate on_duplicate = diff::OnDuplicate::error;
  unsigned threads = 1;
  bool merge_sorted = true;  // inputs sorted by one integer key take the merge path
};

inline constexpr Seconds kNullPartition = std::numeric_limits<Seconds>::max();

struct ColumnStats {
  std::int64_t changed = 0;
  std::int64_t null_to_value = 0;
  std::int64_t value_to_null = 0;
  double max_abs_diff = 0;
  bool has_diff = false;  // some matched pair had two numbers
};

struct PartitionStats {
  std::optional<Partition> partition;  // nullopt for the null partition
  std::int64_t rows_old = 0, rows_new = 0, added = 0, removed = 0, changed = 0;
  std::vector<MeasureSum> sum_old, sum_new;
};

struct EngineResult {
  diff::Summary summary;
  std::vector<ColumnStats> columns;          // parallel to plan.compared
  std::vector<MeasureSum> sum_old, sum_new;  // per measure
  std::map<Seconds, PartitionStats> partitions;
  std::vector<std::pair<std::int64_t, std::int64_t>> changed_rows;  // (old row, new row)
  std::vector<std::int64_t> added_rows, removed_rows;               // global row numbers
  std::vector<std::pair<std::string, double>> timings;              // phase, wall seconds
};

// Whether two cells of a compared column count as equal (tolerance applied).
[[nodiscard]] bool cells_equal(const ComparedColumn& c, const Value& a, const Value& b) noexcept;

// Throws InvalidInput for a duplicate key under OnDuplicate::error.
[[nodiscard]] EngineResult run_diff(const arrow::ImportedTable& old_table,
                                    const arrow::ImportedTable& new_table, const DiffPlan& plan);

// Locates a global row number (rows counted across batches) in a table.
class RowLocator {
 public:
  explicit RowLocator(const arrow::ImportedTable& t);
  [[nodiscard]] arrow::RowRef locate(std::int64_t row) const noexcept;
  [[nodiscard]] std::int64_t batch_start(std::size_t b) const noexcept { return starts_[b]; }

 private:
  std::vector<std::int64_t> starts_;
};

}  // namespace backfill::detail
