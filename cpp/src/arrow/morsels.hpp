// Morsels: an imported table's rows cut into runs of at most `size` rows that never cross a
// record batch, the unit of work the parallel loops hand out (diff scan, merge row hashes, key
// checks, fingerprints). One place, so every loop cuts and numbers them alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backfill/arrow.hpp"

namespace backfill::detail {

struct Morsel {
  std::size_t batch;        // the record batch
  std::int64_t begin, end;  // rows [begin, end) of that batch
  std::int64_t first;       // the table-wide row number of `begin`
};

[[nodiscard]] inline std::vector<Morsel> morsels_of(const arrow::ImportedTable& t,
                                                    std::int64_t size) {
  std::vector<Morsel> out;
  std::int64_t first = 0;
  for (std::size_t b = 0; b < t.batches().size(); ++b) {
    const auto n = t.batches()[b].num_rows();
    for (std::int64_t s = 0; s < n; s += size) {
      out.push_back({b, s, std::min(n, s + size), first + s});
    }
    first += n;
  }
  return out;
}

}  // namespace backfill::detail
