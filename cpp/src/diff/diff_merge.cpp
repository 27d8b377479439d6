#include "diff/diff_merge.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>

#include "arrow/hashing.hpp"
#include "arrow/morsels.hpp"
#include "common/parallel.hpp"
#include "diff/prefaulted.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::ImportedTable;
using arrow::TypeId;

namespace {

bool mergeable_type(TypeId id) noexcept {
  switch (id) {
    case TypeId::int8:
    case TypeId::int16:
    case TypeId::int32:
    case TypeId::int64:
    case TypeId::uint8:
    case TypeId::uint16:
    case TypeId::uint32: return true;
    default: return false;
  }
}

// Whether column c of t is mergeable and compares by its integer value against column oc of
// other: integers of any width against each other (the hash path matches them by value), a
// date32 only against a date32.
bool mergeable(const ImportedTable& t, std::size_t c, const ImportedTable& other, std::size_t oc) {
  const auto& ft = t.fields()[c].type;
  const auto& fo = other.fields()[oc].type;
  if (ft.is_dictionary() || fo.is_dictionary()) return false;
  const bool date = ft.id == TypeId::date32 && fo.id == TypeId::date32;
  if (!date && !(mergeable_type(ft.id) && mergeable_type(fo.id))) return false;
  return std::ranges::all_of(t.batches(), [&](const auto& b) {
    const auto& a = b.column(c);
    return a.dictionary == nullptr && a.null_count == 0;
  });
}

// Whether a column is non-decreasing (strictly ascending when strict) across all batches.
bool ascending_column(const ImportedTable& t, std::size_t column, bool strict) {
  bool has_prev = false;
  std::int64_t prev = 0;
  auto ascending = [&](const auto* v, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      // int8 values are numbers, not characters: the sign extension is the point.
      // NOLINTNEXTLINE(bugprone-signed-char-misuse)
      const auto k = static_cast<std::int64_t>(v[i]);
      if (has_prev && (k < prev || (strict && k == prev))) return false;
      prev = k;
      has_prev = true;
    }
    return true;
  };
  auto check = [&](const arrow::ArrayView& a) {
    switch (a.type->id) {
      case TypeId::int8: return ascending(a.values<std::int8_t>(), a.length);
      case TypeId::int16: return ascending(a.values<std::int16_t>(), a.length);
      case TypeId::int32:
      case TypeId::date32: return ascending(a.values<std::int32_t>(), a.length);
      case TypeId::int64: return ascending(a.values<std::int64_t>(), a.length);
      case TypeId::uint8: return ascending(a.values<std::uint8_t>(), a.length);
      case TypeId::uint16: return ascending(a.values<std::uint16_t>(), a.length);
      case TypeId::uint32: return ascending(a.values<std::uint32_t>(), a.length);
      default: return false;
    }
  };
  return std::ranges::all_of(t.batches(), [&](const auto& b) { return check(b.column(column)); });
}

}  // namespace

std::optional<SortedKeys> sorted_keys(const ImportedTable& t,
                                      const std::vector<std::size_t>& columns,
                                      const ImportedTable& other,
                                      const std::vector<std::size_t>& other_columns) {
  for (std::size_t k = 0; k < columns.size(); ++k) {
    if (!mergeable(t, columns[k], other, other_columns[k])) return std::nullopt;
  }
  // The first column is checked before anything is copied: shuffled rows stop at once.
  if (!ascending_column(t, columns[0], columns.size() == 1)) return std::nullopt;
  const auto n = static_cast<std::size_t>(t.num_rows());
  std::vector<std::vector<std::int64_t>> owned;
  std::vector<std::span<const std::int64_t>> spans;
  for (const std::size_t c : columns) {
    std::size_t nonempty = 0;
    const arrow::ArrayView* only = nullptr;
    for (const auto& b : t.batches()) {
      if (b.num_rows() > 0) {
        ++nonempty;
        only = &b.column(c);
      }
    }
    if (nonempty == 1 && only->type->id == TypeId::int64) {
      spans.emplace_back(only->values<std::int64_t>(), n);
      continue;
    }
    auto& keys = owned.emplace_back();
    keys.reserve(n);
    for (const auto& b : t.batches()) {
      const auto& a = b.column(c);
      for (std::int64_t i = 0; i < a.length; ++i) keys.push_back(a.int_at(i));
    }
    spans.emplace_back(keys);
  }
  if (columns.size() > 1) {
    // Lexicographic strict ascent: a tie on the first columns is settled by the next.
    for (std::size_t i = 1; i < n; ++i) {
      int cmp = 0;
      for (const auto& s : spans) {
        if (s[i] != s[i - 1]) {
          cmp = s[i] < s[i - 1] ? -1 : 1;
          break;
        }
      }
      if (cmp <= 0) return std::nullopt;
    }
  }
  return SortedKeys(std::move(owned), std::move(spans));
}

namespace {

// How one compared column's matched runs are compared.
enum class RunKind : std::uint8_t { f64, fixed8, fixed4, utf8, hashed };

struct RunColumn {
  RunKind kind;
  std::size_t old_index, new_index;
};

std::vector<RunColumn> run_columns(const DiffPlan& plan, const ImportedTable& o,
                                   const ImportedTable& n) {
  std::vector<RunColumn> out;
  for (const auto& c : plan.compared) {
    const Layout a = layout_of(o.fields()[c.old_index].type);
    const Layout b = layout_of(n.fields()[c.new_index].type);
    RunKind kind = RunKind::hashed;
    // By value: the types differ (units...), the raw bits do not say equal; hashed like the
    // hash path does, and settled by compare_candidates.
    if (a == b && c.mode != CompareMode::value) {
      switch (a) {
        case Layout::f64: kind = RunKind::f64; break;
        case Layout::i64: kind = RunKind::fixed8; break;
        case Layout::i32: kind = RunKind::fixed4; break;
        case Layout::utf8: kind = RunKind::utf8; break;
        case Layout::generic: break;
      }
    }
    out.push_back({kind, c.old_index, c.new_index});
  }
  return out;
}

bool has_nulls(const ArrayView& a) noexcept { return a.null_count != 0 && a.buffers[0] != nullptr; }

// Whether row e of the run is settled by validity alone (a null on either side): both null
// are equal, one null differs (flags[e] set); false when both cells hold values.
bool null_settles(const ArrayView& a, std::int64_t i, const ArrayView& b, std::int64_t j,
                  std::size_t e, std::uint8_t* flags) noexcept {
  const auto ei = static_cast<std::int64_t>(e);
  const bool va = a.is_valid(i + ei);
  const bool vb = b.is_valid(j + ei);
  if (va && vb) return false;
  flags[e] |= static_cast<std::uint8_t>(va != vb);
  return true;
}

// Rows per block compared at once: one memcmp of a few hundred bytes; a differing block is
// then walked cell by cell (1% of changed rows leave most blocks equal).
constexpr std::size_t kBlock = 64;

// Fixed-width cells of rows a[i..i+len) and b[j..j+len): flags[k] |= 1 where they would hash
// differently. T is the cell's bit pattern; kFloat: as doubles (-0.0 == 0.0, NaN == NaN).
template <class T, bool kFloat>
void run_fixed(const ArrayView& a, std::int64_t i, const ArrayView& b, std::int64_t j,
               std::size_t len, std::uint8_t* flags) {
  const T* x = a.values<T>() + i;
  const T* y = b.values<T>() + j;
  const bool nulls = has_nulls(a) || has_nulls(b);
  for (std::size_t k = 0; k < len; k += kBlock) {
    const std::size_t m = std::min(kBlock, len - k);
    if (!nulls && std::memcmp(x + k, y + k, m * sizeof(T)) == 0) continue;
    for (std::size_t e = k; e < k + m; ++e) {
      if (nulls && null_settles(a, i, b, j, e, flags)) continue;
      if (x[e] == y[e]) continue;
      if constexpr (kFloat) {
        const auto dx = std::bit_cast<double>(x[e]);
        const auto dy = std::bit_cast<double>(y[e]);
        if (dx == dy || (std::isnan(dx) && std::isnan(dy))) continue;
      }
      flags[e] = 1;
    }
  }
}

// utf8/binary (32-bit offsets): a block is equal when its lengths are (the offsets step alike)
// and its bytes are (one memcmp); otherwise cell by cell.
void run_strings(const ArrayView& a, std::int64_t i, const ArrayView& b, std::int64_t j,
                 std::size_t len, std::uint8_t* flags) {
  const std::int32_t* oa = a.values<std::int32_t>() + i;
  const std::int32_t* ob = b.values<std::int32_t>() + j;
  const auto* da = static_cast<const char*>(a.buffers[2]);
  const auto* db = static_cast<const char*>(b.buffers[2]);
  const bool nulls = has_nulls(a) || has_nulls(b);
  for (std::size_t k = 0; k < len; k += kBlock) {
    const std::size_t m = std::min(kBlock, len - k);
    if (!nulls) {
      const std::int64_t shift = std::int64_t{ob[k]} - oa[k];
      bool same = true;
      for (std::size_t e = k + 1; e <= k + m; ++e) same &= std::int64_t{ob[e]} - oa[e] == shift;
      const auto bytes = static_cast<std::size_t>(oa[k + m] - oa[k]);
      // (no memcmp of 0 bytes: an all-empty block's data buffer may be null)
      if (same && (bytes == 0 || std::memcmp(da + oa[k], db + ob[k], bytes) == 0)) continue;
    }
    for (std::size_t e = k; e < k + m; ++e) {
      if (nulls && null_settles(a, i, b, j, e, flags)) continue;
      const std::string_view sa(da + oa[e], static_cast<std::size_t>(oa[e + 1] - oa[e]));
      const std::string_view sb(db + ob[e], static_cast<std::size_t>(ob[e + 1] - ob[e]));
      if (sa != sb) flags[e] = 1;
    }
  }
}

constexpr std::uint64_t kRowSeed = 0x726f77686173680aULL;
constexpr std::int64_t kHashMorsel = 1 << 14;

// Per row, the fold of the hashes of the `hashed` columns (those not compared run-wise), in
// parallel over morsels of rows; null when there are none.
Prefaulted<std::uint64_t> row_hashes(const ImportedTable& t, const std::vector<RunColumn>& cols,
                                     const std::vector<std::uint64_t>& seeds, bool old_side,
                                     unsigned threads) {
  std::vector<std::size_t> hashed;
  std::vector<std::uint64_t> hashed_seeds;
  for (std::size_t c = 0; c < cols.size(); ++c) {
    if (cols[c].kind != RunKind::hashed) continue;
    hashed.push_back(old_side ? cols[c].old_index : cols[c].new_index);
    hashed_seeds.push_back(seeds[c]);
  }
  if (hashed.empty()) return {};
  const auto n = static_cast<std::size_t>(t.num_rows());
  Prefaulted<std::uint64_t> out(std::max<std::size_t>(n, 1), threads);
  const auto morsels = morsels_of(t, kHashMorsel);
  parallel_for(morsels.size(), threads, [&](std::size_t m, unsigned) {
    const Morsel& mo = morsels[m];
    std::uint64_t* rh = out.get() + mo.first;
    std::fill_n(rh, mo.end - mo.begin, kRowSeed);
    for (std::size_t c = 0; c < hashed.size(); ++c) {
      hash_rows(t.batches()[mo.batch].column(hashed[c]), mo.begin, mo.end, hashed_seeds[c], rh,
                true);
    }
  });
  return out;
}

struct RunContext {
  const ImportedTable& old_table;
  const ImportedTable& new_table;
  const RowLocator& lo;
  const RowLocator& ln;
  const std::vector<RunColumn>& cols;
  const std::uint64_t* hash_old;  // per row, over the hashed columns; null when none
  const std::uint64_t* hash_new;
};

// A run of matched keys: old rows i0.., new rows j0.. (global), len of them.
struct Run {
  std::size_t i0, j0, len;
};

// Compares the run's compared columns, batch segment by batch segment, and adds the pairs that
// differ to r.hash_changed.
void compare_run(const RunContext& ctx, const Run& run, std::vector<std::uint8_t>& flags,
                 MergeRange& r) {
  flags.assign(run.len, 0);
  if (ctx.hash_old != nullptr) {
    for (std::size_t k = 0; k < run.len; ++k) {
      flags[k] = static_cast<std::uint8_t>(ctx.hash_old[run.i0 + k] != ctx.hash_new[run.j0 + k]);
    }
  }
  std::size_t done = 0;
  while (done < run.len) {
    const auto gi = static_cast<std::int64_t>(run.i0 + done);
    const auto gj = static_cast<std::int64_t>(run.j0 + done);
    const arrow::RowRef ro = ctx.lo.locate(gi);
    const arrow::RowRef rn = ctx.ln.locate(gj);
    const auto bo = static_cast<std::size_t>(ro.chunk);
    const auto bn = static_cast<std::size_t>(rn.chunk);
    const std::int64_t left_o = ctx.lo.batch_start(bo + 1) - gi;
    const std::int64_t left_n = ctx.ln.batch_start(bn + 1) - gj;
    const std::size_t seg = std::min(
        {run.len - done, static_cast<std::size_t>(left_o), static_cast<std::size_t>(left_n)});
    const auto& batch_o = ctx.old_table.batches()[bo];
    const auto& batch_n = ctx.new_table.batches()[bn];
    std::uint8_t* f = flags.data() + done;
    for (const auto& c : ctx.cols) {
      const ArrayView& a = batch_o.column(c.old_index);
      const ArrayView& b = batch_n.column(c.new_index);
      switch (c.kind) {
        case RunKind::f64: run_fixed<std::uint64_t, true>(a, ro.row, b, rn.row, seg, f); break;
        case RunKind::fixed8: run_fixed<std::uint64_t, false>(a, ro.row, b, rn.row, seg, f); break;
        case RunKind::fixed4: run_fixed<std::uint32_t, false>(a, ro.row, b, rn.row, seg, f); break;
        case RunKind::utf8: run_strings(a, ro.row, b, rn.row, seg, f); break;
        case RunKind::hashed: break;  // in hash_old / hash_new
      }
    }
    done += seg;
  }
  for (std::size_t k = 0; k < run.len; ++k) {
    if (flags[k] != 0) {
      r.hash_changed.push_back(
          {static_cast<std::uint32_t>(run.i0 + k), static_cast<std::uint32_t>(run.j0 + k)});
    }
  }
}

// Matched runs are compared every kRunRows matched rows (and at the end): runs' columns
// read while the keys just walked are still in cache, and few runs held at a time.
constexpr std::size_t kRunRows = 1 << 12;

void merge_range(const MergeSide& o, const MergeSide& n, const RunContext* ctx, std::size_t o_lo,
                 std::size_t o_hi, std::size_t n_lo, std::size_t n_hi, std::size_t sample,
                 MergeRange& r) {
  const auto ocols = o.keys.columns();
  const auto ncols = n.keys.columns();
  const std::int64_t* ok = ocols[0].data();
  const std::int64_t* nk = ncols[0].data();
  // Composite keys: the first column decides unless tied; the rest settle ties.
  auto cmp_rest = [&](std::size_t i, std::size_t j) {
    for (std::size_t c = 1; c < ocols.size(); ++c) {
      if (ocols[c][i] != ncols[c][j]) return ocols[c][i] < ncols[c][j] ? -1 : 1;
    }
    return 0;
  };
  const bool composite = ocols.size() > 1;
  auto cmp = [&](std::size_t i, std::size_t j) {
    if (ok[i] != nk[j]) return ok[i] < nk[j] ? -1 : 1;
    return composite ? cmp_rest(i, j) : 0;
  };
  auto removed = [&](std::size_t i) {
    ++r.removed;
    if (r.removed_rows.size() < sample) r.removed_rows.push_back(static_cast<std::int64_t>(i));
    if (!o.part.empty()) ++r.removed_in[o.part[i]];
  };
  auto added = [&](std::size_t j) {
    ++r.added;
    if (r.added_rows.size() < sample) r.added_rows.push_back(static_cast<std::int64_t>(j));
    if (!n.part.empty()) ++r.added_in[n.part[j]];
  };
  std::vector<Run> runs;
  std::size_t pending = 0;
  std::vector<std::uint8_t> flags;
  auto flush = [&] {
    if (ctx != nullptr) {
      for (const Run& run : runs) compare_run(*ctx, run, flags, r);
    }
    runs.clear();
    pending = 0;
  };
  std::size_t i = o_lo, j = n_lo;
  while (i < o_hi && j < n_hi) {
    const int c = cmp(i, j);
    if (c == 0) {
      // A run of equal keys: both sides step together until the keys part.
      const std::size_t i0 = i, j0 = j;
      do {
        ++i;
        ++j;
      } while (i < o_hi && j < n_hi && cmp(i, j) == 0);
      const std::size_t len = i - i0;
      r.matched += static_cast<std::int64_t>(len);
      runs.push_back({i0, j0, len});
      pending += len;
      if (pending >= kRunRows) flush();
    } else if (c < 0) {
      removed(i++);
    } else {
      added(j++);
    }
  }
  flush();
  for (; i < o_hi; ++i) removed(i);
  for (; j < n_hi; ++j) added(j);
}

}  // namespace

std::vector<MergeRange> merge_sorted(const MergeSide& old_side, const MergeSide& new_side,
                                     const DiffPlan& plan, std::size_t sample, unsigned threads) {
  const SortedKeys& ok = old_side.keys;
  const SortedKeys& nk = new_side.keys;
  const SortedKeys& larger = ok.size() >= nk.size() ? ok : nk;
  // The first row of `keys` not below row r of `larger` (lexicographically).
  auto lower_bound = [&](const SortedKeys& keys, std::size_t r) {
    const auto lc = larger.columns();
    const auto kc = keys.columns();
    std::size_t lo = 0, hi = keys.size();
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      int c = 0;
      for (std::size_t k = 0; k < kc.size() && c == 0; ++k) {
        if (kc[k][mid] != lc[k][r]) c = kc[k][mid] < lc[k][r] ? -1 : 1;
      }
      if (c < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  // Several ranges per thread, handed out dynamically: on a shared machine a thread that is
  // descheduled does not hold up the other for half the work. Few rows are not worth a range.
  const std::size_t ranges = std::clamp<std::size_t>(
      std::min<std::size_t>(std::size_t{8} * threads, larger.size() / 65536), 1, 256);
  std::vector<std::size_t> o_cut{0}, n_cut{0};
  for (std::size_t t = 1; t < ranges; ++t) {
    const std::size_t r = larger.size() * t / ranges;
    o_cut.push_back(lower_bound(ok, r));
    n_cut.push_back(lower_bound(nk, r));
  }
  o_cut.push_back(ok.size());
  n_cut.push_back(nk.size());

  const auto cols = run_columns(plan, old_side.table, new_side.table);
  std::vector<std::uint64_t> seeds;
  for (const auto& c : plan.compared) seeds.push_back(seed_of(c.name));
  const auto hash_old = row_hashes(old_side.table, cols, seeds, true, threads);
  const auto hash_new = row_hashes(new_side.table, cols, seeds, false, threads);
  const RowLocator lo(old_side.table);
  const RowLocator ln(new_side.table);
  const RunContext ctx{old_side.table, new_side.table, lo, ln, cols,
                       hash_old.get(), hash_new.get()};
  std::vector<MergeRange> out(ranges);
  parallel_for(ranges, threads, [&](std::size_t t, unsigned) {
    merge_range(old_side, new_side, cols.empty() ? nullptr : &ctx, o_cut[t], o_cut[t + 1], n_cut[t],
                n_cut[t + 1], sample, out[t]);
  });
  return out;
}

}  // namespace backfill::detail
