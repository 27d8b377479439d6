// The diff engine: three passes over the Arrow buffers.
//   1. scan (per side; morsels of rows; diff_scan.cpp): key hashes are counted per bucket (top
//      bits of the key hash), then each row's (key hash, row hash of every compared column, row
//      number) is scattered once into its bucket of one pre-faulted array per side; partition
//      starts, row counts and measure sums per partition in the same pass;
//   2. match (parallel over buckets, split again in cache only when large): a hash table on
//      old's keys probed by new's rows (duplicates counted on both sides); a matched pair whose
//      row hashes differ is kept as a candidate, every other one is unchanged. Keys whose hash
//      does not identify them (composite, strings...) are matched on the hash and the claims
//      checked column at a time afterwards (diff_keys.hpp);
//   3. columns: the candidates sorted by old row, every compared column compared over them
//      column at a time, tolerances applied (diff_columns.hpp); a candidate with a differing
//      column is changed; samples and per-partition changed counts from those.
// When both sides are strictly ascending by their integer (or date32) key, one column or
// several (checked first, stopping at the first step down), the scan neither hashes nor scatters,
// and the match is a lockstep walk of the keys that compares matched runs' columns buffer against
// buffer (diff_merge.hpp); pass 3 and every statistic are the same. Expected O(rows) time; ~20
// bytes per row per side of extra memory (+4 per new row for non-exact keys), 8 per candidate pair.
// Assumptions: fewer than 2^32 rows per side (row numbers are stored as uint32 in buckets).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "arrow/values.hpp"
#include "backfill/error.hpp"
#include "common/parallel.hpp"
#include "diff/diff_columns.hpp"
#include "diff/diff_engine.hpp"
#include "diff/diff_keys.hpp"
#include "diff/diff_merge.hpp"
#include "diff/diff_scan.hpp"

namespace backfill::detail {

using arrow::ImportedTable;
using arrow::RowRef;

RowLocator::RowLocator(const ImportedTable& t) {
  std::int64_t s = 0;
  for (const auto& b : t.batches()) {
    starts_.push_back(s);
    s += b.num_rows();
  }
  starts_.push_back(s);
}

RowRef RowLocator::locate(std::int64_t row) const noexcept {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), row);
  const auto b = static_cast<std::size_t>(it - starts_.begin()) - 1;
  return RowRef{static_cast<std::int32_t>(b), row - starts_[b]};
}

namespace {

constexpr std::uint64_t kFineRows = 1 << 16;
constexpr std::size_t kProbeAhead = 16;

// ---- pass 2: match and compare per bucket ----

// Open addressing over positions in a bucket's row list; count[p] > 0 marks first occurrences.
struct KeyTable {
  std::vector<std::int32_t> slots;
  std::uint64_t mask = 0;
  std::vector<std::uint32_t> count;
};

struct Delta {
  std::int64_t added = 0, removed = 0, changed = 0;
};

struct DupInfo {
  bool old_side = true;
  std::int64_t row = -1;
  std::uint32_t count = 0;
};

struct MatchLocal {
  diff::Summary summary;
  std::vector<ColumnStats> columns;
  std::unordered_map<Seconds, Delta> parts;
  std::vector<std::int64_t> added, removed;
  std::vector<RowPair> hash_changed;            // matched pairs whose row hash differs
  std::vector<RowPair> claims_old, claims_new;  // same-side key equalities taken on the hash
  std::optional<DupInfo> dup;
};

// Keeps the k smallest entries of a vector that grows by push_back (amortized O(1)).
template <class T>
void trim(std::vector<T>& v, std::size_t k) {
  if (v.size() < 4 * k + 64) return;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end(),
                   [](const T& a, const T& b) {
                     if constexpr (std::is_same_v<T, std::int64_t>) {
                       return a < b;
                     } else {
                       return a.second < b.second;
                     }
                   });
  v.resize(k);
}

class Matcher {
 public:
  // With match_of, key equality is taken on the key hash and every such claim recorded, to be
  // checked column at a time after the match (verify_key_claims): match_of[p] = old row for the
  // new entry at position p of sn.entries (written in bucket order: sequential, where indexing
  // by new row scattered one cache miss per row across the whole array).
  Matcher(const ImportedTable& o, const ImportedTable& n, const DiffPlan& plan, const SideScan& so,
          const SideScan& sn, std::uint32_t* match_of)
      : old_(o),
        new_(n),
        plan_(plan),
        so_(so),
        sn_(sn),
        lo_(o),
        ln_(n),
        match_of_(match_of),
        has_hashed_(!plan.compared.empty()) {}

  // Per-worker buffers reused across buckets: fresh large vectors per bucket would cost a page
  // fault and a page clear per 4 KiB (glibc serves them with mmap).
  struct Scratch {
    KeyTable to, tn;
    std::vector<std::int32_t> qpos;     // per new row: position of its old key, or -1
    std::vector<std::uint8_t> differs;  // per new row: its row hash differs from its old row's
    std::vector<std::uint32_t> ncount;  // per old key: new rows with that key
    std::vector<Entry> unmatched;       // new rows whose key is not in old
    std::vector<Entry> old_split, new_split;   // ... split into fine buckets
    std::vector<std::uint32_t> new_split_pos;  // position in sn.entries of new_split's rows
    std::vector<std::size_t> old_start, new_start;
  };

  // One table on old's keys; new rows probe it once and count their matches per old key, so
  // keys duplicated in new are found without a second table. Only new rows whose key is not in
  // old (few) go into a small table of their own.
  // New entry p is at position npos[p] of sn.entries, or pos_base + p when npos is null.
  void bucket(const Entry* orows, std::size_t no, const Entry* nrows, std::size_t nn,
              MatchLocal& acc, Scratch& scratch, const std::uint32_t* npos,
              std::size_t pos_base) const {
    KeyTable& to = scratch.to;
    build(orows, no, true, to, acc.claims_old);
    auto& qpos = scratch.qpos;
    auto& ncount = scratch.ncount;
    auto& unmatched = scratch.unmatched;
    auto& differs = scratch.differs;
    qpos.resize(nn);
    differs.resize(nn);
    ncount.assign(no, 0);
    unmatched.clear();
    for (std::size_t p = 0; p < nn; ++p) {
      if (p + kProbeAhead < nn) {
        // Random reads of an L2-sized table: prefetch the slot of a later row, and the entry
        // its slot points at (the slot was prefetched earlier), to overlap the misses.
        __builtin_prefetch(&to.slots[nrows[p + kProbeAhead].key_hash & to.mask]);
        const std::int32_t ahead = to.slots[nrows[p + kProbeAhead / 2].key_hash & to.mask];
        if (ahead >= 0) __builtin_prefetch(&orows[static_cast<std::size_t>(ahead)]);
      }
      const std::int32_t q =
          find_old(orows, to, nrows[p], npos != nullptr ? npos[p] : pos_base + p);
      qpos[p] = q;
      if (q >= 0) {
        ++ncount[static_cast<std::size_t>(q)];
        // Compared now, while the old entry is in cache from the probe: the pass below then
        // reads old entries (a bucket's are larger than L2) only for the few changed pairs.
        differs[p] = orows[static_cast<std::size_t>(q)].row_hash != nrows[p].row_hash;
      } else {
        unmatched.push_back(nrows[p]);
      }
    }
    KeyTable& tn = scratch.tn;
    build(unmatched.data(), unmatched.size(), false, tn, acc.claims_new);
    for (std::size_t u = 0; u < unmatched.size(); ++u) {
      const std::uint32_t cn = tn.count[u];
      if (cn == 0) continue;  // a later copy of a duplicated key
      const std::int64_t gn = unmatched[u].row;
      if (cn > 1) {
        duplicate(acc, false, gn, cn, 0, cn);
        continue;
      }
      ++acc.summary.added;
      acc.added.push_back(gn);
      trim(acc.added, static_cast<std::size_t>(plan_.sample));
      if (!sn_.part.empty()) ++acc.parts[sn_.part[static_cast<std::size_t>(gn)]].added;
    }
    for (std::size_t p = 0; p < nn; ++p) {
      if (qpos[p] < 0) continue;
      const auto qi = static_cast<std::size_t>(qpos[p]);
      const std::uint32_t co = to.count[qi];
      const std::uint32_t cn = ncount[qi];
      constexpr std::uint32_t kReported = UINT32_MAX;
      if (cn == kReported) continue;  // a later new copy of a duplicate already reported
      if (co > 1 || cn > 1) {
        const std::int64_t gn = nrows[p].row;
        const std::int64_t go = orows[qi].row;
        if (co > 1) {
          duplicate(acc, true, go, co, co, cn);
        } else {
          duplicate(acc, false, gn, cn, co, cn);
        }
        ncount[qi] = kReported;  // also keeps it out of "removed" below
        continue;
      }
      ++acc.summary.matched;
      // Changed or not is settled after the match, by compare_candidates.
      if (has_hashed_ && differs[p] != 0) {
        acc.hash_changed.push_back({orows[qi].row, nrows[p].row});
      }
    }
    for (std::size_t q = 0; q < no; ++q) {
      if (to.count[q] == 0 || ncount[q] != 0) continue;
      const std::int64_t go = orows[q].row;
      if (to.count[q] > 1) {
        duplicate(acc, true, go, to.count[q], to.count[q], 0);
        continue;
      }
      ++acc.summary.removed;
      acc.removed.push_back(go);
      trim(acc.removed, static_cast<std::size_t>(plan_.sample));
      if (!so_.part.empty()) ++acc.parts[so_.part[static_cast<std::size_t>(go)]].removed;
    }
  }

 private:
  [[nodiscard]] bool keys_equal(const ImportedTable& ta, const RowLocator& la,
                                const std::vector<std::size_t>& ka, std::int64_t ga,
                                const ImportedTable& tb, const RowLocator& lb,
                                const std::vector<std::size_t>& kb, std::int64_t gb) const {
    if (plan_.exact_key_hash) return true;  // caller already compared the hashes
    const RowRef ra = la.locate(ga);
    const RowRef rb = lb.locate(gb);
    for (std::size_t k = 0; k < ka.size(); ++k) {
      const auto& ca = ta.batches()[static_cast<std::size_t>(ra.chunk)].column(ka[k]);
      const auto& cb = tb.batches()[static_cast<std::size_t>(rb.chunk)].column(kb[k]);
      if (!values_equal(value_at(ca, ra.row), value_at(cb, rb.row))) return false;
    }
    return true;
  }

  void build(const Entry* rows, std::size_t n, bool old_side, KeyTable& t,
             std::vector<RowPair>& claims) const {
    const std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, 2 * n));
    t.slots.assign(cap, -1);
    t.mask = cap - 1;
    t.count.assign(n, 0);
    const auto& tab = old_side ? old_ : new_;
    const auto& loc = old_side ? lo_ : ln_;
    const auto& keys = old_side ? plan_.key_old : plan_.key_new;
    for (std::size_t p = 0; p < n; ++p) {
      if (p + kProbeAhead < n) {
        __builtin_prefetch(&t.slots[rows[p + kProbeAhead].key_hash & t.mask], 1);
      }
      const std::uint64_t h = rows[p].key_hash;
      for (std::uint64_t slot = h & t.mask;; slot = (slot + 1) & t.mask) {
        const std::int32_t q = t.slots[slot];
        if (q < 0) {
          t.slots[slot] = static_cast<std::int32_t>(p);
          t.count[p] = 1;
          break;
        }
        const auto qi = static_cast<std::size_t>(q);
        if (rows[qi].key_hash == h &&
            (match_of_ != nullptr
                 ? claim(claims, rows[qi].row, rows[p].row)
                 : keys_equal(tab, loc, keys, rows[qi].row, tab, loc, keys, rows[p].row))) {
          ++t.count[qi];
          break;
        }
      }
    }
  }

  std::int32_t find_old(const Entry* orows, const KeyTable& to, const Entry& ne,
                        std::size_t at) const {
    const std::uint64_t h = ne.key_hash;
    const std::int64_t gn = ne.row;
    for (std::uint64_t slot = h & to.mask;; slot = (slot + 1) & to.mask) {
      const std::int32_t q = to.slots[slot];
      if (q < 0) return -1;
      const auto& oe = orows[static_cast<std::size_t>(q)];
      const std::int64_t go = oe.row;
      if (oe.key_hash != h) continue;
      if (match_of_ != nullptr) {
        match_of_[at] = static_cast<std::uint32_t>(go);
        return q;
      }
      if (keys_equal(old_, lo_, plan_.key_old, go, new_, ln_, plan_.key_new, gn)) return q;
    }
  }

  static void duplicate(MatchLocal& acc, bool old_side, std::int64_t row, std::uint32_t count,
                        std::uint32_t rows_old, std::uint32_t rows_new) {
    ++acc.summary.duplicate_keys;
    acc.summary.duplicate_rows_old += rows_old;
    acc.summary.duplicate_rows_new += rows_new;
    DupInfo d{old_side, row, count};
    if (!acc.dup || (d.old_side && !acc.dup->old_side) ||
        (d.old_side == acc.dup->old_side && d.row < acc.dup->row)) {
      acc.dup = d;
    }
  }

  static bool claim(std::vector<RowPair>& claims, std::uint32_t a, std::uint32_t b) {
    claims.push_back({a, b});
    return true;
  }

  const ImportedTable& old_;
  const ImportedTable& new_;
  const DiffPlan& plan_;
  const SideScan& so_;
  const SideScan& sn_;
  RowLocator lo_;
  RowLocator ln_;
  std::uint32_t* match_of_;
  bool has_hashed_;
};

std::string key_text(const ImportedTable& t, const std::vector<std::size_t>& keys,
                     const std::vector<std::string>& names, std::int64_t row) {
  const RowRef r = RowLocator(t).locate(row);
  std::string out;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    out +=
        fmt::format("{}{}={}", k ? ", " : "", names[k],
                    render(t.batches()[static_cast<std::size_t>(r.chunk)].column(keys[k]), r.row));
  }
  return "(" + out + ")";
}

}  // namespace

bool cells_equal(const ComparedColumn& c, const Value& a, const Value& b) noexcept {
  if (c.mode != CompareMode::tolerance || !a.valid || !b.valid) return values_equal(a, b);
  const auto x = to_double(a);
  const auto y = to_double(b);
  if (!x || !y) return values_equal(a, b);
  if (*x == *y || (std::isnan(*x) && std::isnan(*y))) return true;
  return std::isfinite(*x) && std::isfinite(*y) &&
         std::fabs(*y - *x) <= c.tolerance.abs + c.tolerance.rel * std::fabs(*x);
}

EngineResult run_diff(const ImportedTable& old_table, const ImportedTable& new_table,
                      const DiffPlan& plan) {
  constexpr auto kMaxRows = static_cast<std::int64_t>(UINT32_MAX);
  for (const auto* t : {&old_table, &new_table}) {
    if (t->num_rows() >= kMaxRows) {
      throw InvalidInput(fmt::format("a table of {} rows is too large for the diff (at most {})",
                                     t->num_rows(), kMaxRows - 1));
    }
  }
  const RowLocator lo(old_table);
  const RowLocator ln(new_table);
  // Two-level radix partitioning: the scan scatters into at most 256 coarse buckets (more write
  // streams thrash the TLB); the match splits a coarse bucket again, in cache, only when more
  // than kFineRows rows of the larger side would share one hash table (<= 512 KiB of slots, in
  // L2; a split pass costs more than the slightly larger table below that).
  const auto larger =
      static_cast<std::uint64_t>(std::max(old_table.num_rows(), new_table.num_rows()));
  const int bits = std::clamp(static_cast<int>(std::bit_width(larger / kFineRows)), 4, 16);
  const int coarse = std::min(bits, 8);
  const std::size_t n_buckets = std::size_t{1} << coarse;
  std::vector<std::pair<std::string, double>> timings;
  auto clock = std::chrono::steady_clock::now();
  auto lap = [&](const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    timings.emplace_back(phase, std::chrono::duration<double>(now - clock).count());
    clock = now;
  };
  // Both sides strictly ascending by an integer/date key (no nulls, no duplicates): the merge path.
  std::optional<SortedKeys> keys_old, keys_new;
  if (plan.merge_sorted) {
    keys_old = sorted_keys(old_table, plan.key_old, new_table, plan.key_new);
    if (keys_old) keys_new = sorted_keys(new_table, plan.key_new, old_table, plan.key_old);
    lap("sorted?");
  }
  const bool merge = keys_old && keys_new;
  SideScan so = scan_side(old_table, lo, plan, true, coarse, !merge);
  lap("scan old");
  SideScan sn =
      scan_side(new_table, ln, plan, false, coarse, !merge, !merge && !plan.exact_key_hash);
  lap("scan new");

  std::vector<MatchLocal> locals;
  if (merge) {
    const MergeSide mo{*keys_old, old_table, so.part};
    const MergeSide mn{*keys_new, new_table, sn.part};
    for (auto& range :
         merge_sorted(mo, mn, plan, static_cast<std::size_t>(plan.sample), plan.threads)) {
      MatchLocal& l = locals.emplace_back();
      l.columns.resize(plan.compared.size());
      l.summary.matched = range.matched;
      l.summary.added = range.added;
      l.summary.removed = range.removed;
      l.added = std::move(range.added_rows);
      l.removed = std::move(range.removed_rows);
      l.hash_changed = std::move(range.hash_changed);
      for (const auto& [key, c] : range.added_in) l.parts[key].added += c;
      for (const auto& [key, c] : range.removed_in) l.parts[key].removed += c;
    }
    lap("merge");
  } else {
    std::vector<Matcher::Scratch> scratch(plan.threads);
    const std::size_t n_fine = std::size_t{1} << (bits - coarse);
    const int fine_shift = 64 - bits;
    // Stable counting sort of a coarse bucket by the next bits: row order is kept within each
    // fine bucket.
    auto split = [&](const SideScan& side, std::size_t k, std::vector<Entry>& out,
                     std::vector<std::size_t>& start, std::vector<std::uint32_t>* out_pos) {
      const Entry* rows = side.entries.get() + side.start[k];
      const std::size_t total = side.start[k + 1] - side.start[k];
      start.assign(n_fine + 1, 0);
      const std::uint64_t mask = n_fine - 1;
      for (std::size_t p = 0; p < total; ++p)
        ++start[((rows[p].key_hash >> fine_shift) & mask) + 1];
      for (std::size_t f = 0; f < n_fine; ++f) start[f + 1] += start[f];
      out.resize(total);
      std::vector<std::size_t> at(start.begin(), start.end() - 1);
      if (out_pos != nullptr) out_pos->resize(total);
      for (std::size_t p = 0; p < total; ++p) {
        const std::size_t to = at[(rows[p].key_hash >> fine_shift) & mask]++;
        out[to] = rows[p];
        if (out_pos != nullptr) (*out_pos)[to] = static_cast<std::uint32_t>(side.start[k] + p);
      }
    };
    // Keys that their hash does not identify (composite, string...) are taken as equal on the
    // hash during the match, then checked column at a time in new-row order: reading key cells
    // at random per probe costs several times the whole match. A failed check (a 64-bit hash
    // collision) runs the match again comparing the key cells themselves. The claims are kept
    // per new entry (bucket order), and found in row order through sn.position.
    std::vector<std::uint32_t> match_of;
    if (!plan.exact_key_hash) match_of.assign(sn.start[n_buckets], kNoMatch);
    auto match = [&](std::uint32_t* claims_into) {
      const Matcher matcher(old_table, new_table, plan, so, sn, claims_into);
      locals.assign(plan.threads, MatchLocal{});
      for (auto& l : locals) l.columns.resize(plan.compared.size());
      parallel_for(n_buckets, plan.threads, [&](std::size_t k, unsigned w) {
        auto& sc = scratch[w];
        if (n_fine == 1) {
          matcher.bucket(so.entries.get() + so.start[k], so.start[k + 1] - so.start[k],
                         sn.entries.get() + sn.start[k], sn.start[k + 1] - sn.start[k], locals[w],
                         sc, nullptr, sn.start[k]);
          return;
        }
        split(so, k, sc.old_split, sc.old_start, nullptr);
        split(sn, k, sc.new_split, sc.new_start,
              claims_into != nullptr ? &sc.new_split_pos : nullptr);
        for (std::size_t f = 0; f < n_fine; ++f) {
          matcher.bucket(
              sc.old_split.data() + sc.old_start[f], sc.old_start[f + 1] - sc.old_start[f],
              sc.new_split.data() + sc.new_start[f], sc.new_start[f + 1] - sc.new_start[f],
              locals[w], sc,
              claims_into != nullptr ? sc.new_split_pos.data() + sc.new_start[f] : nullptr, 0);
        }
      });
    };
    match(match_of.empty() ? nullptr : match_of.data());
    lap("match");
    if (!match_of.empty()) {
      std::vector<RowPair> claims_old, claims_new;
      for (const auto& l : locals) {
        claims_old.insert(claims_old.end(), l.claims_old.begin(), l.claims_old.end());
        claims_new.insert(claims_new.end(), l.claims_new.begin(), l.claims_new.end());
      }
      const std::span<const std::uint32_t> position(sn.position.get(),
                                                    static_cast<std::size_t>(new_table.num_rows()));
      if (!verify_key_claims(old_table, new_table, plan, match_of, claims_old, claims_new,
                             position)) {
        match(nullptr);
      }
      match_of = {};
      sn.position.reset();
      lap("keys");
    }
  }

  so.entries.reset();  // before the column pass allocates its own
  sn.entries.reset();
  EngineResult r;
  r.columns.resize(plan.compared.size());
  auto& sum = r.summary;
  sum.rows_old = old_table.num_rows();
  sum.rows_new = new_table.num_rows();
  sum.null_keys_old = so.null_keys;
  sum.null_keys_new = sn.null_keys;
  std::optional<DupInfo> dup;
  std::unordered_map<Seconds, Delta> deltas;
  for (auto& l : locals) {
    sum.matched += l.summary.matched;
    sum.added += l.summary.added;
    sum.removed += l.summary.removed;
    sum.duplicate_keys += l.summary.duplicate_keys;
    sum.duplicate_rows_old += l.summary.duplicate_rows_old;
    sum.duplicate_rows_new += l.summary.duplicate_rows_new;
    for (std::size_t k = 0; k < r.columns.size(); ++k) {
      auto& into = r.columns[k];
      const auto& from = l.columns[k];
      into.changed += from.changed;
      into.null_to_value += from.null_to_value;
      into.value_to_null += from.value_to_null;
      into.max_abs_diff = std::max(into.max_abs_diff, from.max_abs_diff);
      into.has_diff |= from.has_diff;
    }
    for (const auto& [key, d] : l.parts) {
      auto& into = deltas[key];
      into.added += d.added;
      into.removed += d.removed;
      into.changed += d.changed;
    }
    r.added_rows.insert(r.added_rows.end(), l.added.begin(), l.added.end());
    r.removed_rows.insert(r.removed_rows.end(), l.removed.begin(), l.removed.end());
    if (l.dup && (!dup || (l.dup->old_side && !dup->old_side) ||
                  (l.dup->old_side == dup->old_side && l.dup->row < dup->row))) {
      dup = l.dup;
    }
  }
  if (dup && plan.on_duplicate == diff::OnDuplicate::error) {
    const auto& t = dup->old_side ? old_table : new_table;
    throw InvalidInput(fmt::format(
        "duplicate key in {}: {} appears {} times ({} duplicated keys in all); pass "
        "on_duplicate='report' to count duplicates and leave them out of the comparison",
        dup->old_side ? "old" : "new",
        key_text(t, dup->old_side ? plan.key_old : plan.key_new, plan.key, dup->row), dup->count,
        sum.duplicate_keys));
  }
  std::vector<RowPair> candidates;
  for (auto& l : locals) {
    candidates.insert(candidates.end(), l.hash_changed.begin(), l.hash_changed.end());
    l.hash_changed = {};
  }
  const auto changed = compare_candidates(old_table, new_table, plan, candidates, r.columns);
  // Changed rows come in old-row order, runs of one partition: the last one's counts are kept
  // at hand (unordered_map nodes do not move) instead of a hash lookup per row.
  Seconds last_part = 0;
  Delta* last_delta = nullptr;
  auto delta_of = [&](Seconds part) -> Delta& {
    if (last_delta == nullptr || part != last_part) {
      last_part = part;
      last_delta = &deltas[part];
    }
    return *last_delta;
  };
  for (std::size_t p = 0; p < candidates.size(); ++p) {
    if (!changed[p]) continue;
    const std::int64_t go = candidates[p].old_row;
    const std::int64_t gn = candidates[p].new_row;
    ++sum.changed;
    r.changed_rows.emplace_back(go, gn);
    trim(r.changed_rows, static_cast<std::size_t>(plan.sample));
    if (!so.part.empty()) {
      const Seconds po = so.part[static_cast<std::size_t>(go)];
      const Seconds pn = sn.part[static_cast<std::size_t>(gn)];
      ++delta_of(po).changed;
      if (pn != po) ++delta_of(pn).changed;
    }
  }
  sum.unchanged = sum.matched - sum.changed;
  lap("columns");
  r.timings = std::move(timings);
  const auto k = static_cast<std::size_t>(plan.sample);
  std::sort(r.changed_rows.begin(), r.changed_rows.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  if (r.changed_rows.size() > k) r.changed_rows.resize(k);
  std::sort(r.added_rows.begin(), r.added_rows.end());
  if (r.added_rows.size() > k) r.added_rows.resize(k);
  std::sort(r.removed_rows.begin(), r.removed_rows.end());
  if (r.removed_rows.size() > k) r.removed_rows.resize(k);

  r.sum_old = so.sums;
  r.sum_new = sn.sums;
  const auto ms = plan.measures.size();
  auto entry = [&](Seconds key, const std::optional<Partition>& p) -> PartitionStats& {
    auto [it, fresh] = r.partitions.try_emplace(key);
    if (fresh) {
      it->second.partition = p;
      it->second.sum_old.assign(ms, MeasureSum{});
      it->second.sum_new.assign(ms, MeasureSum{});
    }
    return it->second;
  };
  for (const auto* side : {&so, &sn}) {
    for (const auto& [key, st] : side->partitions) {
      auto& e = entry(key, st.partition);
      e.rows_old += st.rows_old;
      e.rows_new += st.rows_new;
      for (std::size_t m = 0; m < ms; ++m) {
        e.sum_old[m].add(st.sum_old[m]);
        e.sum_new[m].add(st.sum_new[m]);
      }
    }
  }
  for (const auto& [key, d] : deltas) {
    auto& e = r.partitions.at(key);  // every row's partition was seen in the scan
    e.added += d.added;
    e.removed += d.removed;
    e.changed += d.changed;
  }
  return r;
}

}  // namespace backfill::detail
