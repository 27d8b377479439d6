// Logical values of Arrow cells for the diff: comparison across physical types (integer widths,
// timestamp units, string layouts, dictionaries), numeric conversion and text rendering.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"

namespace backfill::detail {

// The domain a column's values live in; two columns compare by value when their domains are
// compatible (same domain, or numbers of any kind, or the null type against anything).
enum class Domain : std::uint8_t {
  null,
  integer,
  floating,
  decimal,
  boolean,
  bytes,
  date,
  time,
  timestamp,
  duration,
  nested
};
[[nodiscard]] Domain domain_of(const arrow::DataType& type) noexcept;  // of the logical type
[[nodiscard]] bool comparable(Domain a, Domain b) noexcept;
[[nodiscard]] bool is_numeric(Domain d) noexcept;  // integer, floating, decimal

struct Value {
  Domain domain = Domain::null;
  bool valid = false;
  __int128 i = 0;  // integer; decimal unscaled; temporal in nanoseconds (dates: of midnight)
  double f = 0;    // floating
  std::int32_t scale = 0;  // decimal
  std::string_view s;      // bytes
  std::uint64_t h = 0;     // nested: hash of the logical value
};

// Value of row i (dictionary-decoded).
[[nodiscard]] Value value_at(const arrow::ArrayView& a, std::int64_t i);
// Null-safe equality: null == null, NaN == NaN, -0.0 == 0.0, numbers compared by value.
[[nodiscard]] bool values_equal(const Value& a, const Value& b) noexcept;
// A number as double (integer, floating, decimal); nullopt for null or non-numbers.
[[nodiscard]] std::optional<double> to_double(const Value& v) noexcept;
// Text for reports: "null", "42", "0.1", "2026-08-01", "2026-08-01T05:00:00Z", "0x00ff", ...
[[nodiscard]] std::string render(const arrow::ArrayView& a, std::int64_t i);

// Partition key of rows whose partition_by value is null (sorts after every partition start).
inline constexpr Seconds kNullSeconds = std::numeric_limits<Seconds>::max();

// The instant of a date/timestamp cell (nullopt for null): dates and naive timestamps are local
// to tz (a date is the first instant of that local day).
[[nodiscard]] std::optional<Seconds> instant_of(const arrow::ArrayView& a, std::int64_t i,
                                                TimeZone tz);

// The partition of each row's date/timestamp value, memoized (dates by day; timestamps by the
// last partition and by UTC hour, verified) so that a partitioned pass costs a look-up per row,
// not a time-zone computation. Not thread-safe: one per worker.
class PartitionCache {
 public:
  PartitionCache(Grain grain, TimeZone tz) noexcept : grain_(grain), tz_(tz) {}
  // nullptr for a null value; valid until the next call.
  [[nodiscard]] const Partition* of(const arrow::ArrayView& a, std::int64_t i);

 private:
  Grain grain_;
  TimeZone tz_;
  const Partition* last_ = nullptr;
  std::unordered_map<std::int64_t, Partition> by_day_;
  std::unordered_map<std::int64_t, Partition> by_hour_;
};

}  // namespace backfill::detail
