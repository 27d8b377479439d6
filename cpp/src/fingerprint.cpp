#include "backfill/fingerprint.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "arrow/hashing.hpp"
#include "arrow/morsels.hpp"
#include "arrow/values.hpp"
#include "backfill/error.hpp"
#include "common/parallel.hpp"

namespace backfill::fingerprint {

using arrow::ArrayView;
using arrow::ImportedTable;

namespace {

constexpr std::int64_t kMorsel = 1 << 14;
constexpr std::uint64_t kRowStart = 0x6670726f77000000ULL;

std::string hex128(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Acc {
  std::int64_t rows = 0;
  std::uint64_t sum = 0;
  std::vector<std::uint64_t> column_sums;
  std::optional<Partition> partition;
};

}  // namespace

std::string Fingerprint::digest() const {
  std::string bytes(kKind);
  for (const auto& c : columns) {
    put(bytes, c.size());
    bytes += c;
  }
  put(bytes, rows);
  put(bytes, sum);
  return hex128(bytes);
}

std::string Fingerprint::column_digest(std::size_t i) const {
  std::string bytes(kKind);
  put(bytes, columns.at(i).size());
  bytes += columns[i];
  put(bytes, rows);
  put(bytes, column_sums.at(i));
  return hex128(bytes);
}

Result fingerprint(const ImportedTable& table, const Options& options) {
  // Columns, in name order (the fold order), with their seeds.
  std::vector<std::size_t> cols;
  if (options.columns) {
    for (const auto& name : *options.columns) {
      const auto i = table.column_index(name, "fingerprint");
      if (std::find(cols.begin(), cols.end(), i) != cols.end()) {
        throw InvalidInput(fmt::format("column '{}' is listed twice", name));
      }
      cols.push_back(i);
    }
  } else {
    cols.resize(table.fields().size());
    std::iota(cols.begin(), cols.end(), std::size_t{0});
  }
  const auto& fields = table.fields();
  std::sort(cols.begin(), cols.end(),
            [&](std::size_t a, std::size_t b) { return fields[a].name < fields[b].name; });
  std::vector<std::uint64_t> seeds;
  seeds.reserve(cols.size());
  for (auto c : cols) seeds.push_back(detail::seed_of(fields[c].name));
  std::optional<std::size_t> part;
  if (options.partition_by) {
    part = table.column_index(*options.partition_by, "partition_by");
    const auto d = detail::domain_of(fields[*part].type);
    if (d != detail::Domain::date && d != detail::Domain::timestamp) {
      throw InvalidInput(
          fmt::format("partition_by column '{}' has type {}; expected a date or "
                      "timestamp column",
                      *options.partition_by, arrow::to_string(fields[*part].type)));
    }
  }
  const auto nc = cols.size();

  const auto morsels = detail::morsels_of(table, kMorsel);
  const unsigned threads = detail::thread_count(options.threads);
  struct Local {
    Acc total;
    std::unordered_map<Seconds, Acc> parts;
    detail::PartitionCache pcache;
  };
  std::vector<Local> locals;
  locals.reserve(threads);
  for (unsigned w = 0; w < threads; ++w) {
    locals.push_back(Local{{}, {}, detail::PartitionCache(options.grain, options.tz)});
  }
  for (auto& l : locals) l.total.column_sums.assign(nc, 0);

  detail::parallel_for(morsels.size(), threads, [&](std::size_t m, unsigned w) {
    const detail::Morsel& mo = morsels[m];
    const auto& batch = table.batches()[mo.batch];
    const auto len = static_cast<std::size_t>(mo.end - mo.begin);
    Local& local = locals[w];
    std::vector<std::uint64_t> row(len, kRowStart);
    std::vector<std::uint64_t> cell(len);
    std::vector<std::uint64_t> csum(nc, 0);
    // Partition of each row (runs of equal partitions cost one look-up).
    std::vector<Acc*> row_acc;
    if (part) {
      row_acc.resize(len);
      const ArrayView& pc = batch.column(*part);
      Acc* acc = nullptr;
      Seconds acc_key = 0;
      for (std::size_t i = 0; i < len; ++i) {
        const Partition* p = local.pcache.of(pc, mo.begin + static_cast<std::int64_t>(i));
        const Seconds key = p != nullptr ? p->start() : detail::kNullSeconds;
        if (acc == nullptr || key != acc_key) {
          auto [it, fresh] = local.parts.try_emplace(key);
          if (fresh) {
            it->second.column_sums.assign(nc, 0);
            if (p != nullptr) it->second.partition = *p;
          }
          acc = &it->second;
          acc_key = key;
        }
        row_acc[i] = acc;
      }
    }
    for (std::size_t c = 0; c < nc; ++c) {
      detail::hash_rows(batch.column(cols[c]), mo.begin, mo.end, seeds[c], cell.data(), false);
      std::uint64_t s = 0;
      for (std::size_t i = 0; i < len; ++i) {
        s += cell[i];
        row[i] = detail::combine(row[i], cell[i]);
      }
      csum[c] += s;
      if (part) {
        for (std::size_t i = 0; i < len; ++i) row_acc[i]->column_sums[c] += cell[i];
      }
    }
    // A row's hash is a rotate-xor fold of cell hashes: mix it before it enters the sum so
    // sums of rows never reduce to sums of cells.
    for (std::size_t i = 0; i < len; ++i) row[i] = detail::mix64(row[i]);
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < len; ++i) s += row[i];
    local.total.sum += s;
    local.total.rows += static_cast<std::int64_t>(len);
    for (std::size_t c = 0; c < nc; ++c) local.total.column_sums[c] += csum[c];
    if (part) {
      for (std::size_t i = 0; i < len; ++i) {
        row_acc[i]->sum += row[i];
        row_acc[i]->rows += 1;
      }
    }
  });

  std::vector<std::string> names;
  names.reserve(cols.size());
  for (auto c : cols) names.push_back(fields[c].name);
  Result r;
  r.total.columns = names;
  r.total.column_sums.assign(nc, 0);
  std::map<Seconds, Acc> merged;
  for (auto& l : locals) {
    r.total.rows += l.total.rows;
    r.total.sum += l.total.sum;
    for (std::size_t c = 0; c < nc; ++c) r.total.column_sums[c] += l.total.column_sums[c];
    for (auto& [key, acc] : l.parts) {
      auto [it, fresh] = merged.try_emplace(key, acc);
      if (fresh) continue;
      it->second.rows += acc.rows;
      it->second.sum += acc.sum;
      for (std::size_t c = 0; c < nc; ++c) it->second.column_sums[c] += acc.column_sums[c];
    }
  }
  for (auto& [key, acc] : merged) {
    r.partitions.push_back(PartitionFingerprint{
        acc.partition, Fingerprint{acc.rows, acc.sum, names, acc.column_sums}});
  }
  return r;
}

std::shared_ptr<arrow::Table> partitions_table(const Result& result) {
  std::vector<std::string> label, digest;
  std::vector<std::int64_t> start, end, rows;
  arrow::Validity ok;
  for (const auto& p : result.partitions) {
    ok.push_back(p.partition.has_value());
    label.push_back(p.partition ? p.partition->label() : "");
    start.push_back(p.partition ? p.partition->start() : 0);
    end.push_back(p.partition ? p.partition->end() : 0);
    rows.push_back(p.fingerprint.rows);
    digest.push_back(p.fingerprint.digest());
  }
  auto t = std::make_shared<arrow::Table>();
  t->add("partition", arrow::utf8_column(label, ok));
  t->add("start", arrow::timestamp_column(start, arrow::TimeUnit::second, "UTC", ok));
  t->add("end", arrow::timestamp_column(end, arrow::TimeUnit::second, "UTC", ok));
  t->add("rows", arrow::int64_column(rows));
  t->add("digest", arrow::utf8_column(digest));
  return t;
}

}  // namespace backfill::fingerprint
