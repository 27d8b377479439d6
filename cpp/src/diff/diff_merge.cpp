#include "diff/diff_merge.hpp"

#include <algorithm>

#include "common/parallel.hpp"

namespace backfill::detail {

using arrow::TypeId;

namespace {

bool mergeable_type(TypeId id) noexcept {
  switch (id) {
    case TypeId::int8: case TypeId::int16: case TypeId::int32: case TypeId::int64:
    case TypeId::uint8: case TypeId::uint16: case TypeId::uint32:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<SortedKeys> sorted_keys(const arrow::ImportedTable& t, std::size_t column) {
  const auto& batches = t.batches();
  for (const auto& b : batches) {
    const auto& a = b.column(column);
    if (a.dictionary != nullptr || !mergeable_type(a.type->id) || a.null_count != 0) {
      return std::nullopt;
    }
  }
  // Checks strict ascent batch by batch, carrying the previous batch's last key.
  bool has_prev = false;
  std::int64_t prev = 0;
  auto ascending = [&](const auto* v, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::int64_t>(v[i]);
      if (has_prev && k <= prev) return false;
      prev = k;
      has_prev = true;
    }
    return true;
  };
  auto check = [&](const arrow::ArrayView& a) {
    switch (a.type->id) {
      case TypeId::int8: return ascending(a.values<std::int8_t>(), a.length);
      case TypeId::int16: return ascending(a.values<std::int16_t>(), a.length);
      case TypeId::int32: return ascending(a.values<std::int32_t>(), a.length);
      case TypeId::int64: return ascending(a.values<std::int64_t>(), a.length);
      case TypeId::uint8: return ascending(a.values<std::uint8_t>(), a.length);
      case TypeId::uint16: return ascending(a.values<std::uint16_t>(), a.length);
      case TypeId::uint32: return ascending(a.values<std::uint32_t>(), a.length);
      default: return false;
    }
  };
  for (const auto& b : batches) {
    if (!check(b.column(column))) return std::nullopt;
  }
  const auto n = static_cast<std::size_t>(t.num_rows());
  std::size_t nonempty = 0;
  const arrow::ArrayView* only = nullptr;
  for (const auto& b : batches) {
    if (b.num_rows() > 0) {
      ++nonempty;
      only = &b.column(column);
    }
  }
  if (nonempty == 1 && only->type->id == TypeId::int64) {
    return SortedKeys(std::span<const std::int64_t>(only->values<std::int64_t>(), n));
  }
  std::vector<std::int64_t> keys;
  keys.reserve(n);
  for (const auto& b : batches) {
    const auto& a = b.column(column);
    for (std::int64_t i = 0; i < a.length; ++i) keys.push_back(a.int_at(i));
  }
  return SortedKeys(std::move(keys));
}

namespace {

void merge_range(const MergeSide& o, const MergeSide& n, std::size_t o_lo, std::size_t o_hi,
                 std::size_t n_lo, std::size_t n_hi, std::size_t sample, MergeRange& r) {
  const std::int64_t* ok = o.keys.data();
  const std::int64_t* nk = n.keys.data();
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
  std::size_t i = o_lo, j = n_lo;
  while (i < o_hi && j < n_hi) {
    if (ok[i] == nk[j]) {
      ++r.matched;
      if (o.row_hash != nullptr && o.row_hash[i] != n.row_hash[j]) {
        r.hash_changed.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
      }
      ++i;
      ++j;
    } else if (ok[i] < nk[j]) {
      removed(i++);
    } else {
      added(j++);
    }
  }
  for (; i < o_hi; ++i) removed(i);
  for (; j < n_hi; ++j) added(j);
}

}  // namespace

std::vector<MergeRange> merge_sorted(const MergeSide& old_side, const MergeSide& new_side,
                                     std::size_t sample, unsigned threads) {
  const auto& ok = old_side.keys;
  const auto& nk = new_side.keys;
  const auto& larger = ok.size() >= nk.size() ? ok : nk;
  // Few rows are not worth a thread.
  const std::size_t ranges =
      std::clamp<std::size_t>(std::min<std::size_t>(threads, larger.size() / 4096), 1, 64);
  std::vector<std::size_t> o_cut{0}, n_cut{0};
  for (std::size_t t = 1; t < ranges; ++t) {
    const std::int64_t k = larger[larger.size() * t / ranges];
    o_cut.push_back(static_cast<std::size_t>(std::lower_bound(ok.begin(), ok.end(), k) - ok.begin()));
    n_cut.push_back(static_cast<std::size_t>(std::lower_bound(nk.begin(), nk.end(), k) - nk.begin()));
  }
  o_cut.push_back(ok.size());
  n_cut.push_back(nk.size());
  std::vector<MergeRange> out(ranges);
  parallel_for(ranges, threads, [&](std::size_t t, unsigned) {
    merge_range(old_side, new_side, o_cut[t], o_cut[t + 1], n_cut[t], n_cut[t + 1], sample, out[t]);
  });
  return out;
}

}  // namespace backfill::detail
