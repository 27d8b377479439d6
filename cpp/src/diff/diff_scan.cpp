// Pass 1 of the diff engine: the scan of one side (see diff_scan.hpp).
#include "diff/diff_scan.hpp"

#include <algorithm>
#include <unordered_map>

#include "arrow/hashing.hpp"
#include "arrow/morsels.hpp"
#include "arrow/values.hpp"
#include "common/parallel.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::ImportedTable;
using arrow::TypeId;

namespace {

constexpr std::int64_t kMorsel = 1 << 14;
constexpr std::uint64_t kRowSeed = 0x726f77686173680aULL;

// Calls f(row, value) for every valid number in rows [b, e) of a numeric array.
template <class F>
void each_number(const ArrayView& a, std::int64_t b, std::int64_t e, F&& f) {
  auto loop = [&](auto get) {
    if (a.buffers[0] == nullptr) {
      for (auto i = b; i < e; ++i) f(i, static_cast<double>(get(i)));
    } else {
      for (auto i = b; i < e; ++i) {
        if (a.is_valid(i)) f(i, static_cast<double>(get(i)));
      }
    }
  };
  if (a.dictionary == nullptr) {
    switch (a.type->id) {
      case TypeId::float64: return loop([&](auto i) { return a.values<double>()[i]; });
      case TypeId::float32: return loop([&](auto i) { return a.values<float>()[i]; });
      case TypeId::int64: return loop([&](auto i) { return a.values<std::int64_t>()[i]; });
      case TypeId::int32: return loop([&](auto i) { return a.values<std::int32_t>()[i]; });
      case TypeId::uint64: return loop([&](auto i) { return a.values<std::uint64_t>()[i]; });
      default: break;
    }
  }
  for (auto i = b; i < e; ++i) {
    if (auto d = to_double(value_at(a, i))) f(i, *d);
  }
}

// Sum of the valid numbers in rows [b, e). Null-free plain columns add into 8 running sums
// (independent chains: one add per cycle instead of one per add latency), as the diff's float
// sums are order-dependent in the last bits anyway (per worker, per morsel).
double sum_numbers(const ArrayView& a, std::int64_t b, std::int64_t e) {
  auto lanes = [&](const auto* v) {
    const auto n = static_cast<std::size_t>(e - b);
    v += b;
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8) {
      for (std::size_t j = 0; j < 8; ++j) s[j] += static_cast<double>(v[k + j]);
    }
    for (; k < n; ++k) s[0] += static_cast<double>(v[k]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  };
  if (a.dictionary == nullptr && a.buffers[0] == nullptr) {
    switch (a.type->id) {
      case TypeId::float64: return lanes(a.values<double>());
      case TypeId::float32: return lanes(a.values<float>());
      case TypeId::int64: return lanes(a.values<std::int64_t>());
      case TypeId::int32: return lanes(a.values<std::int32_t>());
      default: break;
    }
  }
  double acc = 0;
  each_number(a, b, e, [&](std::int64_t, double v) { acc += v; });
  return acc;
}

// Calls f(row, v) for every valid value of rows [b, e) of an integer or decimal array, v being
// the (unscaled) value times mult, exactly; a product out of the 128-bit range sets *overflow.
template <class F>
void each_exact(const ArrayView& a, std::int64_t b, std::int64_t e, __int128 mult, bool* overflow,
                F&& f) {
  if (a.dictionary == nullptr && mult == 1 &&
      (a.type->id == TypeId::int64 || a.type->id == TypeId::int32)) {
    auto loop = [&](const auto* v) {
      for (auto i = b; i < e; ++i) {
        if (a.buffers[0] == nullptr || a.is_valid(i)) f(i, static_cast<__int128>(v[i]));
      }
    };
    if (a.type->id == TypeId::int64) return loop(a.values<std::int64_t>());
    return loop(a.values<std::int32_t>());
  }
  for (auto i = b; i < e; ++i) {
    const Value v = value_at(a, i);
    if (!v.valid) continue;
    __int128 x = 0;
    *overflow |= __builtin_mul_overflow(v.i, mult, &x);
    f(i, x);
  }
}

// The sum of the valid values of rows [b, e) of a measure summed as `kind` (see SumKind).
MeasureSum sum_measure(const ArrayView& a, std::int64_t b, std::int64_t e, SumKind kind,
                       __int128 mult) {
  MeasureSum s;
  if (kind == SumKind::floating) {
    s.approx = sum_numbers(a, b, e);
  } else if (a.dictionary == nullptr && mult == 1 &&
             (a.type->id == TypeId::int64 || a.type->id == TypeId::int32)) {
    // Plain integers into one 128-bit accumulator with no overflow check per value: fewer than
    // 2^32 values below 2^63 in magnitude stay below 2^95 (the checked add runs once).
    __int128 acc = 0;
    each_exact(a, b, e, 1, &s.overflow, [&](std::int64_t, __int128 v) { acc += v; });
    s.add(acc);
  } else {
    each_exact(a, b, e, mult, &s.overflow, [&](std::int64_t, __int128 v) { s.add(v); });
  }
  return s;
}

}  // namespace

SideScan scan_side(const ImportedTable& t, const RowLocator& loc, const DiffPlan& plan,
                   bool old_side, int bits, bool scatter, bool positions) {
  const auto n = static_cast<std::size_t>(t.num_rows());
  const auto& keys = old_side ? plan.key_old : plan.key_new;
  const auto part_col = old_side ? plan.part_old : plan.part_new;
  const auto& measures = old_side ? plan.measure_old : plan.measure_new;
  const auto& mults = old_side ? plan.measure_mult_old : plan.measure_mult_new;
  std::vector<std::size_t> hashed;
  std::vector<std::uint64_t> seeds;
  // Every compared column goes into the row hash: equal cells hash equal, so a pair with equal
  // row hashes is unchanged, and only the others are compared cell by cell (with tolerances).
  // (The merge path compares matched runs' columns directly instead: diff_merge.hpp.)
  for (const auto& c : plan.compared) {
    if (!scatter) break;
    hashed.push_back(old_side ? c.old_index : c.new_index);
    seeds.push_back(seed_of(c.name));
  }
  SideScan s;
  const std::size_t n_buckets = std::size_t{1} << bits;
  const int shift = 64 - bits;
  if (part_col) s.part.resize(n);
  const auto ms = measures.size();

  struct Local {
    std::int64_t null_keys = 0;
    std::vector<MeasureSum> sums;
    std::unordered_map<Seconds, PartitionStats> parts;
  };
  std::vector<Local> locals(plan.threads);
  for (auto& l : locals) l.sums.assign(ms, MeasureSum{});
  // Measures that are also hash-compared columns are summed in the hashing loop.
  std::vector<int> measure_of_hashed(hashed.size(), -1);
  std::vector<bool> summed_with_hash(ms, false);
  for (std::size_t c = 0; c < hashed.size(); ++c) {
    for (std::size_t k = 0; k < ms; ++k) {
      if (measures[k] == hashed[c] && !summed_with_hash[k]) {
        measure_of_hashed[c] = static_cast<int>(k);
        summed_with_hash[k] = true;
        break;
      }
    }
  }
  const auto morsels = morsels_of(t, kMorsel);
  std::vector<std::uint64_t> key_seeds;
  for (const auto& k : plan.key) key_seeds.push_back(seed_of(k));

  // Key hashes of a morsel into kh; null_key[i] marks rows with a null key (returns whether
  // there are any). Computed twice per row (to count, then to scatter): cheaper than storing
  // them for the common integer keys.
  auto key_hashes = [&](const arrow::ImportedBatch& batch, const Morsel& mo, std::uint64_t* kh,
                        std::uint8_t* null_key) {
    bool any_null = false;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const ArrayView& col = batch.column(keys[k]);
      hash_rows(col, mo.begin, mo.end, key_seeds[k], kh, k > 0);
      if (col.null_count > 0) {
        if (!any_null) std::fill_n(null_key, mo.end - mo.begin, 0);
        any_null = true;
        for (auto i = mo.begin; i < mo.end; ++i) {
          if (!col.is_valid(i)) null_key[i - mo.begin] = 1;
        }
      }
    }
    return any_null;
  };
  // Exact bucket sizes per morsel first, so that every row has its place in one array (each
  // bucket in row order) whichever worker scans its morsel: the morsels can then be handed
  // out dynamically, which keeps both workers busy to the end on a loaded machine.
  const std::size_t n_morsels = morsels.size();
  std::vector<std::uint32_t> at(scatter ? n_morsels * n_buckets : 0,
                                0);  // count, then first position
  struct Scratch {
    std::vector<std::uint64_t> kh = std::vector<std::uint64_t>(kMorsel);
    std::vector<std::uint64_t> rh = std::vector<std::uint64_t>(kMorsel);
    std::vector<std::uint8_t> null_key = std::vector<std::uint8_t>(kMorsel);
  };
  std::vector<Scratch> scratch(plan.threads);
  if (scatter)
    parallel_for(n_morsels, plan.threads, [&](std::size_t m, unsigned w) {
      auto& sc = scratch[w];
      const Morsel& mo = morsels[m];
      const auto len = static_cast<std::size_t>(mo.end - mo.begin);
      const bool any_null = key_hashes(t.batches()[mo.batch], mo, sc.kh.data(), sc.null_key.data());
      std::uint32_t* count = at.data() + m * n_buckets;
      for (std::size_t i = 0; i < len; ++i) {
        if (!(any_null && sc.null_key[i])) ++count[sc.kh[i] >> shift];
      }
    });
  s.start.assign(n_buckets + 1, 0);
  for (std::size_t b = 0; scatter && b < n_buckets; ++b) {
    std::size_t pos = s.start[b];
    for (std::size_t m = 0; m < n_morsels; ++m) {
      const std::size_t c = at[m * n_buckets + b];
      at[m * n_buckets + b] = static_cast<std::uint32_t>(pos);
      pos += c;
    }
    s.start[b + 1] = pos;
  }
  // (Transparent huge pages would save page faults here, but on VMs that hand free memory back
  // to the host, a fresh huge page is often slow to touch: measured 2.5x slower on some runs.)
  if (scatter) {
    s.entries = Prefaulted<Entry>(s.start[n_buckets], plan.threads);
    if (positions) s.position = Prefaulted<std::uint32_t>(n, plan.threads);
  }

  // Measure sums per morsel, added up in morsel order: the same bits whatever the scheduling.
  std::vector<MeasureSum> morsel_sums(n_morsels * ms);
  std::vector<PartitionCache> pcaches(plan.threads, PartitionCache(plan.grain, plan.tz));
  auto scan_morsel = [&](std::size_t m, unsigned w) {
    auto& sc = scratch[w];
    auto& kh = sc.kh;
    auto& rh = sc.rh;
    auto& null_key = sc.null_key;
    auto& pcache = pcaches[w];
    std::uint32_t* pos = scatter ? at.data() + m * n_buckets : nullptr;
    MeasureSum* msums = morsel_sums.data() + m * ms;
    Entry* entries = s.entries.get();
    const Morsel& mo = morsels[m];
    const auto& batch = t.batches()[mo.batch];
    const auto base = static_cast<std::size_t>(loc.batch_start(mo.batch) + mo.begin);
    const auto len = static_cast<std::size_t>(mo.end - mo.begin);
    Local& local = locals[w];
    const bool any_null = scatter && key_hashes(batch, mo, kh.data(), null_key.data());
    // row hash of the hash-compared columns
    std::uint64_t* row_hash = rh.data();
    if (!hashed.empty()) {
      std::fill_n(row_hash, len, kRowSeed);
      for (std::size_t c = 0; c < hashed.size(); ++c) {
        const ArrayView& col = batch.column(hashed[c]);
        hash_rows(col, mo.begin, mo.end, seeds[c], row_hash, true);
        // Unpartitioned measure sums while the column is still in cache.
        if (!part_col && measure_of_hashed[c] >= 0) {
          const auto k = static_cast<std::size_t>(measure_of_hashed[c]);
          msums[k] = sum_measure(col, mo.begin, mo.end, plan.measure_kind[k], mults[k]);
        }
      }
    }
    std::uint32_t* position = s.position.get() == nullptr ? nullptr : s.position.get() + base;
    for (std::size_t i = 0; scatter && i < len; ++i) {
      if (any_null && null_key[i]) {
        ++local.null_keys;
        if (position != nullptr) position[i] = kNoPosition;
        continue;
      }
      const std::uint32_t at_pos = pos[kh[i] >> shift]++;
      entries[at_pos] = Entry{kh[i], rh[i], static_cast<std::uint32_t>(base + i)};
      if (position != nullptr) position[i] = at_pos;
    }
    // partitions, row counts and measure sums
    if (part_col) {
      const ArrayView& pc = batch.column(*part_col);
      PartitionStats* stats = nullptr;
      Seconds stats_key = 0;
      std::vector<PartitionStats*> row_stats(len);
      for (std::size_t i = 0; i < len; ++i) {
        const Partition* p = pcache.of(pc, mo.begin + static_cast<std::int64_t>(i));
        const Seconds key = p != nullptr ? p->start() : kNullPartition;
        if (stats == nullptr || stats_key != key) {
          stats_key = key;
          auto [it, fresh] = local.parts.try_emplace(key);
          if (fresh) {
            if (p != nullptr) it->second.partition = *p;
            it->second.sum_old.assign(ms, MeasureSum{});
            it->second.sum_new.assign(ms, MeasureSum{});
          }
          stats = &it->second;
        }
        s.part[base + i] = key;
        row_stats[i] = stats;
        (old_side ? stats->rows_old : stats->rows_new) += 1;
      }
      for (std::size_t k = 0; k < ms; ++k) {
        const ArrayView& col = batch.column(measures[k]);
        auto stat = [&](std::int64_t i) -> MeasureSum& {
          auto* st = row_stats[static_cast<std::size_t>(i - mo.begin)];
          return (old_side ? st->sum_old : st->sum_new)[k];
        };
        if (plan.measure_kind[k] == SumKind::floating) {
          each_number(col, mo.begin, mo.end, [&](std::int64_t i, double v) {
            local.sums[k].approx += v;
            stat(i).approx += v;
          });
        } else {
          bool overflow = false;
          each_exact(col, mo.begin, mo.end, mults[k], &overflow, [&](std::int64_t i, __int128 v) {
            local.sums[k].add(v);
            stat(i).add(v);
          });
          local.sums[k].overflow |= overflow;
        }
      }
    } else {
      for (std::size_t k = 0; k < ms; ++k) {
        if (!summed_with_hash[k]) {
          msums[k] = sum_measure(batch.column(measures[k]), mo.begin, mo.end, plan.measure_kind[k],
                                 mults[k]);
        }
      }
    }
  };
  if (part_col) {
    // Per-partition sums are kept per worker: static contiguous ranges of morsels keep their
    // order fixed.
    parallel_for(plan.threads, plan.threads, [&](std::size_t w, unsigned) {
      const std::size_t end = n_morsels * (w + 1) / plan.threads;
      for (std::size_t m = n_morsels * w / plan.threads; m < end; ++m) {
        scan_morsel(m, static_cast<unsigned>(w));
      }
    });
  } else {
    parallel_for(n_morsels, plan.threads, scan_morsel);
  }

  s.sums.assign(ms, MeasureSum{});
  for (std::size_t m = 0; m < n_morsels; ++m) {
    for (std::size_t k = 0; k < ms; ++k) s.sums[k].add(morsel_sums[m * ms + k]);
  }
  for (auto& l : locals) {
    s.null_keys += l.null_keys;
    for (std::size_t k = 0; k < ms; ++k) s.sums[k].add(l.sums[k]);
    for (auto& [key, st] : l.parts) {
      auto [it, fresh] = s.partitions.try_emplace(key, std::move(st));
      if (fresh) continue;
      auto& into = it->second;
      into.rows_old += st.rows_old;
      into.rows_new += st.rows_new;
      for (std::size_t k = 0; k < ms; ++k) {
        into.sum_old[k].add(st.sum_old[k]);
        into.sum_new[k].add(st.sum_new[k]);
      }
    }
  }
  return s;
}

}  // namespace backfill::detail
