// Table fingerprints: an order-independent digest of a multiset of rows, cheap enough to tell
// whether two versions of a partition are the same before diffing them.
//
//   auto fp = fingerprint::fingerprint(import_stream(&s), {});
//   if (fp.total == other.total) ...   // same rows, in any order and chunking
//
// Definition (kind "backfill.xxh3-sum64.v1"):
// - each cell hashes its logical value (arrow/hashing.hpp: chunking, dictionary encoding, string
//   layout and integer width do not matter; null differs from every value), seeded by its
//   column's name;
// - a row hashes the cells of the fingerprinted columns folded in column-name order;
// - the fingerprint is (row count, sum mod 2^64 of row hashes), and per column (row count, sum of
//   that column's cell hashes). A sum, unlike XOR, keeps duplicate rows from cancelling.
// The digest is a 128-bit XXH3 of (kind, column names, rows, sum). Fingerprints are compared only
// with fingerprints of the same kind: an in-engine (SQL) fingerprint is a different kind and never
// has to agree with this one bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backfill/arrow.hpp"
#include "backfill/calendar.hpp"

namespace backfill::fingerprint {

inline constexpr std::string_view kKind = "backfill.xxh3-sum64.v1";

struct Fingerprint {
  std::int64_t rows = 0;
  std::uint64_t sum = 0;
  std::vector<std::string> columns;        // sorted by name
  std::vector<std::uint64_t> column_sums;  // parallel to columns

  [[nodiscard]] std::string digest() const;                      // 32 hex digits
  [[nodiscard]] std::string column_digest(std::size_t i) const;  // 32 hex digits
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

struct Options {
  std::optional<std::vector<std::string>> columns;  // default: every column
  std::optional<std::string> partition_by;          // a date or timestamp column
  Grain grain = Grain::day;
  TimeZone tz;
  unsigned threads = 0;  // 0: one per hardware thread
};

struct PartitionFingerprint {
  std::optional<Partition> partition;  // nullopt: rows whose partition_by value is null
  Fingerprint fingerprint;
};

struct Result {
  Fingerprint total;
  std::vector<PartitionFingerprint> partitions;  // by start; the null partition last
};

// O(rows * columns), both cores. Throws NotFound / InvalidInput naming a bad column.
[[nodiscard]] Result fingerprint(const arrow::ImportedTable& table, const Options& options);

// partition, start, end, rows, digest.
[[nodiscard]] std::shared_ptr<arrow::Table> partitions_table(const Result& result);

}  // namespace backfill::fingerprint
