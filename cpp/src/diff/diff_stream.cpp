// diff::Stream (backfill/diff.hpp): a diff over (old part, new part) pairs, one pair at a time,
// merged into the result of the one-shot diff of the concatenated parts.
//   add: the engine's diff of the pair (run_diff) with every unmatched row listed. Its matched
//     rows are final (summary, column statistics, changed per partition); rows and measure sums
//     per partition are per row, so every pair's add up (pair order: float sums deterministic).
//     Its unmatched rows are taken (owned, every column) and carried with their global row
//     numbers; so are the whole old and new rows of its first `sample` changed rows.
//   finish: each side's key hashes, sorted per pair, are merged k-way to find a key recurring
//     in another pair (a duplicate, or a hash collision for keys the hash does not identify:
//     the caller then diffs the whole inputs). The carried rows are diffed against each other:
//     a key that moved between pairs matches there (added, removed and their partitions come
//     only from this diff). Samples: the smallest global row numbers among the candidates.
// Memory: one pair + carried unmatched rows + each side's keys, coded: a few bytes per run of
// consecutive integer ids, ~8 bytes per hashed key.
#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <queue>
#include <thread>

#include <fmt/format.h>

#include "arrow/hashing.hpp"
#include "backfill/diff.hpp"
#include "backfill/error.hpp"
#include "diff/diff_engine.hpp"
#include "diff/diff_front.hpp"

namespace backfill::diff {

namespace {

using arrow::ImportedTable;
using TablePtr = std::shared_ptr<const arrow::Table>;
using Rows = std::vector<std::int64_t>;

// ---- owned tables read back as one imported table (one batch per non-empty table) ----

struct Concat {
  std::vector<TablePtr> tables;
  std::size_t next = 0;
};

int concat_schema(ArrowArrayStream* s, ArrowSchema* out) {
  const auto* c = static_cast<const Concat*>(s->private_data);
  arrow::export_schema(*c->tables.front(), out);
  return 0;
}

int concat_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* c = static_cast<Concat*>(s->private_data);
  while (c->next < c->tables.size()) {
    const TablePtr& t = c->tables[c->next++];
    if (t->num_rows() == 0) continue;
    ArrowArrayStream one{};
    arrow::export_table(t, &one);
    const int rc = one.get_next(&one, out);
    one.release(&one);
    return rc;
  }
  out->release = nullptr;  // end of stream
  return 0;
}

const char* concat_error(ArrowArrayStream* /*s*/) { return nullptr; }

void concat_release(ArrowArrayStream* s) {
  std::unique_ptr<Concat> owned(static_cast<Concat*>(s->private_data));
  s->private_data = nullptr;
  s->release = nullptr;
}

// Tables of one schema (at least one table) as one imported table.
ImportedTable concat(std::vector<TablePtr> tables) {
  auto state = std::make_unique<Concat>();
  state->tables = std::move(tables);
  ArrowArrayStream s{};
  s.get_schema = concat_schema;
  s.get_next = concat_next;
  s.get_last_error = concat_error;
  s.release = concat_release;
  s.private_data = state.release();
  return arrow::import_stream(&s);
}

// ---- keys seen per side ----
// Each pair's keys, sorted, as runs of consecutive values (start, length), delta-coded as
// LEB128 varints: a single integer key as its value (a day of dense ids is a few bytes), any
// other key as its 64-bit hash (~8 bytes a key).

struct KeyRun {
  std::vector<std::uint8_t> bytes;
  std::size_t count = 0;  // intervals
};

void put(std::vector<std::uint8_t>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

KeyRun encode(const std::vector<std::uint64_t>& sorted) {
  KeyRun r;
  std::uint64_t prev = 0;  // the last interval's first value
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    put(r.bytes, sorted[i] - prev);  // intervals ascend by their first value
    put(r.bytes, j - i - 1);         // [first, first + this]
    prev = sorted[i];
    ++r.count;
    i = j;
  }
  r.bytes.shrink_to_fit();
  return r;
}

// Reads a run's intervals in order: [first, last].
struct KeyCursor {
  const KeyRun* run = nullptr;
  std::size_t pos = 0, left = 0;
  std::uint64_t first = 0, last = 0;
  std::uint64_t get() noexcept {
    std::uint64_t v = 0;
    unsigned shift = 0;
    std::uint8_t b = 0;
    do {
      b = run->bytes[pos++];
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while ((b & 0x80) != 0);
    return v;
  }
  bool next() noexcept {
    if (left == 0) return false;
    --left;
    first += get();
    last = first + get();
    return true;
  }
};

// t's keys (rows with a null key cell left out, as the diff leaves them), sorted and coded:
// exact (one integer key) as the value with its sign bit flipped (order kept), else hashed.
KeyRun key_run(const ImportedTable& t, const std::vector<std::size_t>& cols,
               const std::vector<std::string>& names, bool exact) {
  std::vector<std::uint64_t> seeds;
  seeds.reserve(names.size());
  for (const auto& n : names) seeds.push_back(detail::seed_of(n));
  std::vector<std::uint64_t> out;
  out.reserve(static_cast<std::size_t>(t.num_rows()));
  std::vector<std::uint64_t> h;
  constexpr std::uint64_t kSign = std::uint64_t{1} << 63;
  for (const auto& b : t.batches()) {
    const std::int64_t n = b.num_rows();
    if (exact) {
      const auto& c = b.column(cols[0]);
      for (std::int64_t i = 0; i < n; ++i) {
        if (c.is_valid(i)) out.push_back(static_cast<std::uint64_t>(c.int_at(i)) ^ kSign);
      }
      continue;
    }
    h.assign(static_cast<std::size_t>(n), 0);
    for (std::size_t k = 0; k < cols.size(); ++k) {
      detail::hash_rows(b.column(cols[k]), 0, n, seeds[k], h.data(), k > 0);
    }
    for (std::int64_t i = 0; i < n; ++i) {
      bool null = false;
      for (const auto c : cols) null = null || !b.column(c).is_valid(i);
      if (!null) out.push_back(h[static_cast<std::size_t>(i)]);
    }
  }
  if (!std::is_sorted(out.begin(), out.end())) std::sort(out.begin(), out.end());
  return encode(out);
}

// Whether a key is in two runs: one k-way merge of their intervals by first value,
// O(intervals log runs). Intervals of one run may touch only for equal hashes (a collision
// inside one pair, which the pair's diff settled).
bool recurs(const std::vector<KeyRun>& runs) {
  using Head = std::pair<std::uint64_t, std::size_t>;  // first value, run
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heap;
  std::vector<KeyCursor> at(runs.size());
  for (std::size_t r = 0; r < runs.size(); ++r) {
    at[r].run = &runs[r];
    at[r].left = runs[r].count;
    if (at[r].next()) heap.emplace(at[r].first, r);
  }
  bool have = false;
  std::uint64_t reach = 0;  // the largest last value so far, and its run
  std::size_t reach_run = 0;
  while (!heap.empty()) {
    const auto [first, r] = heap.top();
    heap.pop();
    const std::uint64_t last = at[r].last;
    if (have && first <= reach && r != reach_run) return true;
    if (!have || last > reach) {
      reach = last;
      reach_run = r;
    }
    have = true;
    if (at[r].next()) heap.emplace(at[r].first, r);
  }
  return false;
}

void add_columns(std::vector<detail::ColumnStats>& into,
                 const std::vector<detail::ColumnStats>& from) {
  for (std::size_t k = 0; k < into.size(); ++k) {
    into[k].changed += from[k].changed;
    into[k].null_to_value += from[k].null_to_value;
    into[k].value_to_null += from[k].value_to_null;
    into[k].max_abs_diff = std::max(into[k].max_abs_diff, from[k].max_abs_diff);
    into[k].has_diff |= from[k].has_diff;
  }
}

}  // namespace

struct Stream::State {
  Options options;
  std::optional<detail::DiffPlan> plan;  // from the first pair's schemas
  std::vector<arrow::Field> fields_old, fields_new;
  std::vector<front::SchemaChange> schema;
  detail::EngineResult acc;  // everything but added/removed, over the pairs so far
  std::int64_t pairs = 0;
  std::int64_t offset_old = 0, offset_new = 0;     // global row number of the next pair's row 0
  std::vector<TablePtr> left_old, left_new;        // unmatched rows, per pair
  Rows left_old_rows, left_new_rows;               // their global row numbers
  std::vector<TablePtr> changed_old, changed_new;  // changed sample candidates' whole rows
  Rows changed_rows;                               // their global new row numbers
  std::vector<KeyRun> keys_old, keys_new;          // per pair
  bool whole = false;

  void add_timings(const std::vector<std::pair<std::string, double>>& t) {
    // No structured binding here: clang before 16 cannot capture one in the lambda (the
    // sanitizer build uses clang).
    for (const auto& entry : t) {
      const std::string& phase = entry.first;
      auto it = std::find_if(acc.timings.begin(), acc.timings.end(),
                             [&](const auto& e) { return e.first == phase; });
      if (it == acc.timings.end()) {
        acc.timings.emplace_back(phase, entry.second);
      } else {
        it->second += entry.second;
      }
    }
  }

  detail::PartitionStats& partition(Seconds key, const std::optional<Partition>& p) {
    auto [it, fresh] = acc.partitions.try_emplace(key);
    if (fresh) {
      it->second.partition = p;
      it->second.sum_old.assign(plan->measures.size(), detail::MeasureSum{});
      it->second.sum_new.assign(plan->measures.size(), detail::MeasureSum{});
    }
    return it->second;
  }

  // The changed rows' first `sample` (by new row) as candidates: whole rows of both sides.
  void carry_changed(const ImportedTable& o, const ImportedTable& n,
                     const std::vector<std::pair<std::int64_t, std::int64_t>>& rows,
                     const Rows& global_new) {
    const auto k = std::min(rows.size(), static_cast<std::size_t>(plan->sample));
    Rows ro, rn;
    for (std::size_t i = 0; i < k; ++i) {
      ro.push_back(rows[i].first);
      rn.push_back(rows[i].second);
      changed_rows.push_back(global_new[i]);
    }
    changed_old.push_back(front::rows_table(o, ro));
    changed_new.push_back(front::rows_table(n, rn));
  }
};

Stream::Stream(Options options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}
Stream::~Stream() = default;
Stream::Stream(Stream&& other) noexcept = default;
Stream& Stream::operator=(Stream&& other) noexcept = default;

bool Stream::whole_needed() const noexcept { return state_->whole; }
std::int64_t Stream::pairs() const noexcept { return state_->pairs; }
std::pair<std::int64_t, std::int64_t> Stream::carried() const noexcept {
  return {static_cast<std::int64_t>(state_->left_old_rows.size()),
          static_cast<std::int64_t>(state_->left_new_rows.size())};
}

void Stream::add(const ImportedTable& old_part, const ImportedTable& new_part) {
  State& s = *state_;
  if (s.whole) return;  // the caller diffs the whole inputs
  if (!s.plan) {
    s.plan = front::make_plan(old_part, new_part, s.options, s.schema);
    s.fields_old = old_part.fields();
    s.fields_new = new_part.fields();
    s.acc.columns.resize(s.plan->compared.size());
    s.acc.sum_old.assign(s.plan->measures.size(), detail::MeasureSum{});
    s.acc.sum_new.assign(s.plan->measures.size(), detail::MeasureSum{});
  } else if (!(old_part.fields() == s.fields_old) || !(new_part.fields() == s.fields_new)) {
    throw InvalidInput(
        fmt::format("pair {} of the streamed diff has other columns or types than "
                    "the first pair; every pair must have the same schema per side",
                    s.pairs + 1));
  }
  const detail::DiffPlan& plan = *s.plan;
  ++s.pairs;
  // Every unmatched row listed (sample = all rows); duplicates counted, not raised: any
  // duplicate sends the caller to the whole diff, which raises or reports it as usual.
  detail::DiffPlan p = plan;
  p.sample = old_part.num_rows() + new_part.num_rows() + 1;
  p.on_duplicate = OnDuplicate::report;
  detail::EngineResult r = detail::run_diff(old_part, new_part, p);
  if (r.summary.duplicate_keys > 0) {
    s.whole = true;
    return;
  }
  const auto clock = std::chrono::steady_clock::now();
  auto& sum = s.acc.summary;
  sum.rows_old += r.summary.rows_old;
  sum.rows_new += r.summary.rows_new;
  sum.null_keys_old += r.summary.null_keys_old;
  sum.null_keys_new += r.summary.null_keys_new;
  sum.matched += r.summary.matched;
  sum.changed += r.summary.changed;
  add_columns(s.acc.columns, r.columns);
  for (std::size_t m = 0; m < plan.measures.size(); ++m) {
    s.acc.sum_old[m].add(r.sum_old[m]);
    s.acc.sum_new[m].add(r.sum_new[m]);
  }
  for (const auto& [key, st] : r.partitions) {
    auto& e = s.partition(key, st.partition);
    e.rows_old += st.rows_old;
    e.rows_new += st.rows_new;
    e.changed += st.changed;
    for (std::size_t m = 0; m < plan.measures.size(); ++m) {
      e.sum_old[m].add(st.sum_old[m]);
      e.sum_new[m].add(st.sum_new[m]);
    }
  }
  s.left_old.push_back(front::rows_table(old_part, r.removed_rows));
  s.left_new.push_back(front::rows_table(new_part, r.added_rows));
  for (const auto row : r.removed_rows) s.left_old_rows.push_back(s.offset_old + row);
  for (const auto row : r.added_rows) s.left_new_rows.push_back(s.offset_new + row);
  Rows global_new;
  for (std::size_t i = 0; i < r.changed_rows.size() && i < static_cast<std::size_t>(plan.sample);
       ++i) {
    global_new.push_back(s.offset_new + r.changed_rows[i].second);
  }
  s.carry_changed(old_part, new_part, r.changed_rows, global_new);
  {
    // Both sides' keys at once: sorting them is most of this step.
    KeyRun ko, kn;
    // The values themselves for one integer key (not dictionary-encoded: the same on every
    // pair, as every pair has the first pair's schema).
    auto raw = [&](const std::vector<arrow::Field>& f, std::size_t k) {
      return plan.exact_key_hash && f[k].type.dictionary == nullptr;
    };
    const bool raw_old = raw(s.fields_old, plan.key_old[0]);
    const bool raw_new = raw(s.fields_new, plan.key_new[0]);
    std::thread other([&] { kn = key_run(new_part, plan.key_new, plan.key, raw_new); });
    try {
      ko = key_run(old_part, plan.key_old, plan.key, raw_old);
    } catch (...) {
      other.join();
      throw;
    }
    other.join();
    s.keys_old.push_back(std::move(ko));
    s.keys_new.push_back(std::move(kn));
  }
  s.offset_old += old_part.num_rows();
  s.offset_new += new_part.num_rows();
  r.timings.emplace_back(
      "carry", std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count());
  s.add_timings(r.timings);
}

std::optional<Result> Stream::finish() {
  State& s = *state_;
  if (s.pairs == 0 && !s.whole) throw InvalidInput("the streamed diff was given no pair of parts");
  auto clock = std::chrono::steady_clock::now();
  if (s.whole || recurs(s.keys_old) || recurs(s.keys_new)) {
    s.whole = true;
    return std::nullopt;
  }
  s.keys_old = {};
  s.keys_new = {};
  const detail::DiffPlan& plan = *s.plan;
  const auto k = static_cast<std::size_t>(plan.sample);
  s.add_timings(
      {{"recur", std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count()}});
  // The carried rows: rows of old and new unmatched in their own pair (keys that moved).
  const ImportedTable lo = concat(std::move(s.left_old));
  const ImportedTable ln = concat(std::move(s.left_new));
  detail::EngineResult r;
  if (lo.num_rows() > 0 || ln.num_rows() > 0) {
    detail::DiffPlan p = plan;  // the carried tables keep every column, in order
    p.on_duplicate = OnDuplicate::report;
    r = detail::run_diff(lo, ln, p);
    s.add_timings(r.timings);
  }
  clock = std::chrono::steady_clock::now();
  auto& sum = s.acc.summary;
  sum.matched += r.summary.matched;
  sum.changed += r.summary.changed;
  sum.added = r.summary.added;
  sum.removed = r.summary.removed;
  sum.unchanged = sum.matched - sum.changed;
  if (!r.columns.empty()) add_columns(s.acc.columns, r.columns);
  for (const auto& [key, st] : r.partitions) {
    auto& e = s.partition(key, st.partition);
    e.added += st.added;
    e.removed += st.removed;
    e.changed += st.changed;
  }
  Rows global_new;
  for (const auto& [go, gn] : r.changed_rows) {
    global_new.push_back(s.left_new_rows[static_cast<std::size_t>(gn)]);
  }
  s.carry_changed(lo, ln, r.changed_rows, global_new);

  // The changed sample: the candidates with the smallest global new rows.
  const ImportedTable co = concat(std::move(s.changed_old));
  const ImportedTable cn = concat(std::move(s.changed_new));
  std::vector<std::size_t> order(s.changed_rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return s.changed_rows[a] < s.changed_rows[b];
  });
  if (order.size() > k) order.resize(k);
  detail::EngineResult picks;
  for (const auto i : order) {
    picks.changed_rows.emplace_back(static_cast<std::int64_t>(i), static_cast<std::int64_t>(i));
  }

  Result out;
  out.summary = sum;
  out.summary.schema_changed = !s.schema.empty();
  out.key = plan.key;
  out.measures = plan.measures;
  out.partition_by = s.options.partition_by;
  out.schema = front::schema_table(s.schema);
  out.columns = front::columns_table(s.fields_old, s.fields_new, plan, s.acc);
  out.partitions = front::partitions_table(plan, s.acc);
  out.changed_sample = front::changed_table(co, cn, plan, picks);
  out.added_sample = front::rows_table(ln, r.added_rows);  // carried rows keep global order
  out.removed_sample = front::rows_table(lo, r.removed_rows);
  out.timings = std::move(s.acc.timings);
  out.timings.emplace_back(
      "results", std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count());
  return out;
}

}  // namespace backfill::diff
