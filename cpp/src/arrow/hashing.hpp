// Hashes of logical Arrow values, shared by the diff engine and the fingerprint.
//
// Equal logical values hash equal whatever the physical layout: chunking, offsets, dictionary
// encoding, utf8 / large_utf8 / string_view, integer width (a value hashes as its int64 value).
// Floats hash with one NaN and with -0.0 as 0.0 (both compare equal in the diff). A null hashes
// to a per-seed constant distinct from every value's hash (up to 2^-64 collisions).
// Strings use XXH3 (libxxhash); fixed-width values a bijective 64-bit mixer, so a single
// integer key's hash identifies it exactly.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backfill/arrow.hpp"

namespace backfill::detail {

// murmur3's fmix64: a bijection on 64-bit words with full avalanche.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Order-sensitive fold of one cell's hash into a row's running hash. The cell hashes are already
// full-avalanche (and seeded per column), so a rotate-xor keeps a change in any one cell (or
// several) visible with probability 1 - 2^-64, at a fraction of a mixer's cost.
[[nodiscard]] constexpr std::uint64_t combine(std::uint64_t acc, std::uint64_t h) noexcept {
  return ((acc << 23) | (acc >> 41)) ^ h;
}

[[nodiscard]] constexpr std::uint64_t null_hash(std::uint64_t seed) noexcept {
  return mix64(seed ^ 0x6e756c6c2d2d2d2dULL) ^ 0x5bd1e9955bd1e995ULL;
}

// A fixed-width cell's hash: integers of every width as their int64 value; floats as doubles
// with one NaN and -0.0 as 0.0 (both compare equal in the diff).
[[nodiscard]] inline std::uint64_t hash_int(std::int64_t v, std::uint64_t seed) noexcept {
  return mix64(static_cast<std::uint64_t>(v) ^ seed);
}
inline constexpr std::uint64_t kFloatTag = 0x466c6f6174000000ULL;
inline constexpr std::uint64_t kCanonicalNan = 0x7ff8000000000000ULL;
[[nodiscard]] inline std::uint64_t hash_double(double d, std::uint64_t seed) noexcept {
  d += 0.0;  // -0.0 + 0.0 == +0.0: signed zeros hash alike
  const std::uint64_t bits = std::isnan(d) ? kCanonicalNan : std::bit_cast<std::uint64_t>(d);
  return mix64(bits ^ seed ^ kFloatTag);
}

[[nodiscard]] std::uint64_t hash_bytes(std::string_view s, std::uint64_t seed) noexcept;
[[nodiscard]] std::uint64_t seed_of(std::string_view name) noexcept;  // a column's seed

// Hashes rows [begin, end) of `a` with `seed` into out[0 .. end-begin): overwritten when
// `fold` is false, folded in with combine() when true.
void hash_rows(const arrow::ArrayView& a, std::int64_t begin, std::int64_t end, std::uint64_t seed,
               std::uint64_t* out, bool fold);

}  // namespace backfill::detail
