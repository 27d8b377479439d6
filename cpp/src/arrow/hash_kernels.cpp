#include "arrow/hash_kernels.hpp"

// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge source, which
// -Wmaybe-uninitialized flags at every use (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "arrow/hashing.hpp"

namespace backfill::detail::kernels {

namespace {

// Scalar loops: also the tails of the vector loops and the path on CPUs without AVX-512.
template <class T, class H>
void scalar(const T* v, std::size_t n, std::uint64_t* out, bool fold, H&& h) noexcept {
  if (fold) {
    for (std::size_t k = 0; k < n; ++k) out[k] = combine(out[k], h(v[k]));
  } else {
    for (std::size_t k = 0; k < n; ++k) out[k] = h(v[k]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define BACKFILL_AVX512 __attribute__((target("avx512f,avx512dq")))

BACKFILL_AVX512 inline __m512i mix64_v(__m512i x) noexcept {
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<long long>(0xff51afd7ed558ccdULL)));
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<long long>(0xc4ceb9fe1a85ec53ULL)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
}

// out[k..k+8) = h, or combine(out, h): combine() is a 64-bit rotate left by 23 and a xor.
BACKFILL_AVX512 inline void store(std::uint64_t* out, __m512i h, bool fold) noexcept {
  if (fold) h = _mm512_xor_si512(_mm512_rol_epi64(_mm512_loadu_si512(out), 23), h);
  _mm512_storeu_si512(out, h);
}

// The 64-bit words that float cells hash from (before the seed): -0.0 as 0.0, one NaN.
BACKFILL_AVX512 inline __m512i float_bits(__m512d d) noexcept {
  d = _mm512_add_pd(d, _mm512_setzero_pd());
  const __mmask8 nan = _mm512_cmp_pd_mask(d, d, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi64(_mm512_castpd_si512(d), nan,
                               _mm512_set1_epi64(static_cast<long long>(kCanonicalNan)));
}

// Calls load(k) -> 8 words for each full group of 8 and hashes mix64(word ^ key).
template <class Load>
BACKFILL_AVX512 std::size_t vector_loop(std::size_t n, std::uint64_t key, std::uint64_t* out,
                                        bool fold, Load&& load) noexcept {
  const __m512i vkey = _mm512_set1_epi64(static_cast<long long>(key));
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) store(out + k, mix64_v(_mm512_xor_si512(load(k), vkey)), fold);
  return k;
}

BACKFILL_AVX512 std::size_t i64_v(const std::int64_t* v, std::size_t n, std::uint64_t seed,
                                  std::uint64_t* out, bool fold) noexcept {
  return vector_loop(n, seed, out, fold,
                     [v](std::size_t k) BACKFILL_AVX512 { return _mm512_loadu_si512(v + k); });
}
BACKFILL_AVX512 std::size_t i32_v(const std::int32_t* v, std::size_t n, std::uint64_t seed,
                                  std::uint64_t* out, bool fold) noexcept {
  return vector_loop(n, seed, out, fold, [v](std::size_t k) BACKFILL_AVX512 {
    return _mm512_cvtepi32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + k)));
  });
}
BACKFILL_AVX512 std::size_t u32_v(const std::uint32_t* v, std::size_t n, std::uint64_t seed,
                                  std::uint64_t* out, bool fold) noexcept {
  return vector_loop(n, seed, out, fold, [v](std::size_t k) BACKFILL_AVX512 {
    return _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + k)));
  });
}
BACKFILL_AVX512 std::size_t f64_v(const double* v, std::size_t n, std::uint64_t seed,
                                  std::uint64_t* out, bool fold) noexcept {
  return vector_loop(n, seed ^ kFloatTag, out, fold, [v](std::size_t k) BACKFILL_AVX512 {
    return float_bits(_mm512_loadu_pd(v + k));
  });
}
BACKFILL_AVX512 std::size_t f32_v(const float* v, std::size_t n, std::uint64_t seed,
                                  std::uint64_t* out, bool fold) noexcept {
  return vector_loop(n, seed ^ kFloatTag, out, fold, [v](std::size_t k) BACKFILL_AVX512 {
    return float_bits(_mm512_cvtps_pd(_mm256_loadu_ps(v + k)));
  });
}

// AVX2 (4 values per instruction): for the many x86 CPUs without AVX-512 (AMD before Zen 4,
// Intel client cores). AVX2 has no 64-bit multiply; mullo64 builds it from three 32x32->64
// multiplies, which still takes about a third of the scalar loop's instructions per value.
#define BACKFILL_AVX2 __attribute__((target("avx2")))

// x * c mod 2^64: lo(x)lo(c) + (hi(x)lo(c) + lo(x)hi(c)) << 32.
BACKFILL_AVX2 inline __m256i mullo64(__m256i x, __m256i c_lo, __m256i c_hi) noexcept {
  const __m256i lo_lo = _mm256_mul_epu32(x, c_lo);
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), c_lo), _mm256_mul_epu32(x, c_hi));
  return _mm256_add_epi64(lo_lo, _mm256_slli_epi64(cross, 32));
}

BACKFILL_AVX2 inline __m256i mix64_v4(__m256i x) noexcept {
  constexpr std::uint64_t c1 = 0xff51afd7ed558ccdULL;
  constexpr std::uint64_t c2 = 0xc4ceb9fe1a85ec53ULL;
  x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 33));
  x = mullo64(x, _mm256_set1_epi64x(static_cast<long long>(c1 & 0xffffffffU)),
              _mm256_set1_epi64x(static_cast<long long>(c1 >> 32)));
  x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 33));
  x = mullo64(x, _mm256_set1_epi64x(static_cast<long long>(c2 & 0xffffffffU)),
              _mm256_set1_epi64x(static_cast<long long>(c2 >> 32)));
  return _mm256_xor_si256(x, _mm256_srli_epi64(x, 33));
}

BACKFILL_AVX2 inline void store4(std::uint64_t* out, __m256i h, bool fold) noexcept {
  if (fold) {
    const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out));
    h = _mm256_xor_si256(_mm256_or_si256(_mm256_slli_epi64(o, 23), _mm256_srli_epi64(o, 41)), h);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
}

BACKFILL_AVX2 inline __m256i float_bits4(__m256d d) noexcept {
  d = _mm256_add_pd(d, _mm256_setzero_pd());
  const __m256d nan = _mm256_cmp_pd(d, d, _CMP_UNORD_Q);
  const __m256d canonical =
      _mm256_castsi256_pd(_mm256_set1_epi64x(static_cast<long long>(kCanonicalNan)));
  return _mm256_castpd_si256(_mm256_blendv_pd(d, canonical, nan));
}

template <class Load>
BACKFILL_AVX2 std::size_t vector_loop4(std::size_t n, std::uint64_t key, std::uint64_t* out,
                                       bool fold, Load&& load) noexcept {
  const __m256i vkey = _mm256_set1_epi64x(static_cast<long long>(key));
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) store4(out + k, mix64_v4(_mm256_xor_si256(load(k), vkey)), fold);
  return k;
}

BACKFILL_AVX2 std::size_t i64_v_avx2(const std::int64_t* v, std::size_t n, std::uint64_t seed,
                                     std::uint64_t* out, bool fold) noexcept {
  return vector_loop4(n, seed, out, fold, [v](std::size_t k) BACKFILL_AVX2 {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + k));
  });
}
BACKFILL_AVX2 std::size_t i32_v_avx2(const std::int32_t* v, std::size_t n, std::uint64_t seed,
                                     std::uint64_t* out, bool fold) noexcept {
  return vector_loop4(n, seed, out, fold, [v](std::size_t k) BACKFILL_AVX2 {
    return _mm256_cvtepi32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + k)));
  });
}
BACKFILL_AVX2 std::size_t u32_v_avx2(const std::uint32_t* v, std::size_t n, std::uint64_t seed,
                                     std::uint64_t* out, bool fold) noexcept {
  return vector_loop4(n, seed, out, fold, [v](std::size_t k) BACKFILL_AVX2 {
    return _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + k)));
  });
}
BACKFILL_AVX2 std::size_t f64_v_avx2(const double* v, std::size_t n, std::uint64_t seed,
                                     std::uint64_t* out, bool fold) noexcept {
  return vector_loop4(n, seed ^ kFloatTag, out, fold, [v](std::size_t k) BACKFILL_AVX2 {
    return float_bits4(_mm256_loadu_pd(v + k));
  });
}
BACKFILL_AVX2 std::size_t f32_v_avx2(const float* v, std::size_t n, std::uint64_t seed,
                                     std::uint64_t* out, bool fold) noexcept {
  return vector_loop4(n, seed ^ kFloatTag, out, fold, [v](std::size_t k) BACKFILL_AVX2 {
    return float_bits4(_mm256_cvtps_pd(_mm_loadu_ps(v + k)));
  });
}

bool has_avx512() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}
bool has_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#define BACKFILL_VECTOR(fn, ...) \
  (has_avx512() ? fn(__VA_ARGS__) : has_avx2() ? fn##_avx2(__VA_ARGS__) : std::size_t{0})
#else
bool has_avx512() noexcept { return false; }
bool has_avx2() noexcept { return false; }
#define BACKFILL_VECTOR(fn, ...) \
  std::size_t { 0 }
#endif

}  // namespace

bool vectorized() noexcept { return has_avx512() || has_avx2(); }

void hash_i64(const std::int64_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept {
  const std::size_t k = BACKFILL_VECTOR(i64_v, v, n, seed, out, fold);
  scalar(v + k, n - k, out + k, fold, [seed](std::int64_t x) { return hash_int(x, seed); });
}

void hash_i32(const std::int32_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept {
  const std::size_t k = BACKFILL_VECTOR(i32_v, v, n, seed, out, fold);
  scalar(v + k, n - k, out + k, fold, [seed](std::int32_t x) { return hash_int(x, seed); });
}

void hash_u32(const std::uint32_t* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept {
  const std::size_t k = BACKFILL_VECTOR(u32_v, v, n, seed, out, fold);
  scalar(v + k, n - k, out + k, fold, [seed](std::uint32_t x) { return hash_int(x, seed); });
}

void hash_f64(const double* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept {
  const std::size_t k = BACKFILL_VECTOR(f64_v, v, n, seed, out, fold);
  scalar(v + k, n - k, out + k, fold, [seed](double x) { return hash_double(x, seed); });
}

void hash_f32(const float* v, std::size_t n, std::uint64_t seed, std::uint64_t* out,
              bool fold) noexcept {
  const std::size_t k = BACKFILL_VECTOR(f32_v, v, n, seed, out, fold);
  scalar(v + k, n - k, out + k, fold,
         [seed](float x) { return hash_double(static_cast<double>(x), seed); });
}

}  // namespace backfill::detail::kernels
