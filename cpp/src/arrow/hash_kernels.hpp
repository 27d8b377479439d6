// Column-at-a-time hash loops for the fixed-width types of hash_rows (hashing.hpp): n values in,
// n hashes out (or folded into out with combine()). Each loop gives exactly the scalar hashes
// (h_int / h_double in hashing.cpp); on CPUs with AVX-512 (checked at run time) it does 8 values
// per instruction, with AVX2 4 (a third of the scalar loop's instructions), which turns the
// diff's scan from compute-bound into memory-bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace backfill::detail::kernels {

// Integers hash as their int64 value: mix64(v ^ seed).
void hash_i64(const std::int64_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept;
void hash_i32(const std::int32_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept;
void hash_u32(const std::uint32_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept;
// Floats hash as doubles, with one NaN and -0.0 as 0.0.
void hash_f64(const double* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept;
void hash_f32(const float* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept;

// Whether the vectorized loops run on this CPU (for tests and benchmarks).
[[nodiscard]] bool vectorized() noexcept;

}  // namespace backfill::detail::kernels
