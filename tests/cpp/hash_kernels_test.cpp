// The column hash loops (vectorized where the CPU allows) against the scalar cell hashes, and
// hash_rows against per-row hashing for every fast path: nulls, NaN, signed zeros, sliced arrays
// (offsets), folding, and lengths that leave vector tails.
#include "arrow/hash_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "arrow/hashing.hpp"
#include "backfill/arrow.hpp"

namespace arrow = backfill::arrow;
namespace kernels = backfill::detail::kernels;
using backfill::detail::combine;
using backfill::detail::hash_double;
using backfill::detail::hash_int;
using backfill::detail::hash_rows;
using backfill::detail::null_hash;

namespace {

constexpr std::uint64_t kSeed = 0x1234567890abcdefULL;

std::vector<double> doubles(std::size_t n) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1e6);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  const double specials[] = {0.0,
                             -0.0,
                             std::nan(""),
                             -std::nan(""),
                             std::nan("0x123"),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::denorm_min(),
                             1.0,
                             -1.0};
  for (std::size_t k = 0; k < std::size(specials) && k * 3 < n; ++k) v[k * 3] = specials[k];
  return v;
}

template <class T>
std::vector<T> ints(std::size_t n) {
  std::mt19937_64 rng(11);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng());
  if (n > 2) {
    v[0] = std::numeric_limits<T>::min();
    v[1] = std::numeric_limits<T>::max();
    v[2] = 0;
  }
  return v;
}

// Runs kernel over every length 0..40 at every start 0..3, unfolded and folded into a prefix.
template <class T, class Kernel, class Scalar>
void check(const std::vector<T>& v, Kernel kernel, Scalar scalar) {
  for (std::size_t start = 0; start < 4; ++start) {
    for (std::size_t n = 0; start + n <= v.size() && n <= 40; ++n) {
      std::vector<std::uint64_t> got(n, 0), want(n, 0);
      kernel(v.data() + start, n, kSeed, got.data(), false);
      for (std::size_t k = 0; k < n; ++k) want[k] = scalar(v[start + k]);
      ASSERT_EQ(got, want) << "n=" << n << " start=" << start;
      std::vector<std::uint64_t> folded(n, 0x55aa55aa55aa55aaULL);
      kernel(v.data() + start, n, kSeed, folded.data(), true);
      for (std::size_t k = 0; k < n; ++k) want[k] = combine(0x55aa55aa55aa55aaULL, want[k]);
      ASSERT_EQ(folded, want) << "folded n=" << n << " start=" << start;
    }
  }
}

}  // namespace

TEST(HashKernels, AgreeWithTheScalarCellHashes) {
  check(ints<std::int64_t>(64), kernels::hash_i64,
        [](std::int64_t x) { return hash_int(x, kSeed); });
  check(ints<std::int32_t>(64), kernels::hash_i32,
        [](std::int32_t x) { return hash_int(x, kSeed); });
  check(ints<std::uint32_t>(64), kernels::hash_u32,
        [](std::uint32_t x) { return hash_int(x, kSeed); });
  check(doubles(64), kernels::hash_f64, [](double x) { return hash_double(x, kSeed); });
  std::vector<float> f;
  for (double d : doubles(64)) f.push_back(static_cast<float>(d));
  check(f, kernels::hash_f32, [](float x) { return hash_double(static_cast<double>(x), kSeed); });
}

TEST(HashKernels, FloatsHashOneNanAndOneZero) {
  const std::vector<double> v = {
      std::nan(""), -std::nan(""), std::nan("0x7"), 0.0, -0.0, 0.0, 0.0, 0.0, 0.0};
  std::vector<std::uint64_t> h(v.size());
  kernels::hash_f64(v.data(), v.size(), kSeed, h.data(), false);
  EXPECT_EQ(h[0], h[1]);
  EXPECT_EQ(h[0], h[2]);
  EXPECT_EQ(h[3], h[4]);
  EXPECT_NE(h[0], h[3]);
}

TEST(HashKernels, IntegerWidthsHashAlike) {
  const std::vector<std::int32_t> a = {-5, 0, 7, 1 << 30, -(1 << 30), 3, 4, 5, 6};
  std::vector<std::int64_t> b(a.begin(), a.end());
  std::vector<std::uint32_t> c = {0, 7, 1U << 30, 3, 4, 5, 6, 8, 9};
  std::vector<std::int64_t> d(c.begin(), c.end());
  std::vector<std::uint64_t> ha(a.size()), hb(b.size()), hc(c.size()), hd(d.size());
  kernels::hash_i32(a.data(), a.size(), kSeed, ha.data(), false);
  kernels::hash_i64(b.data(), b.size(), kSeed, hb.data(), false);
  kernels::hash_u32(c.data(), c.size(), kSeed, hc.data(), false);
  kernels::hash_i64(d.data(), d.size(), kSeed, hd.data(), false);
  EXPECT_EQ(ha, hb);
  EXPECT_EQ(hc, hd);
}

namespace {

// hash_rows over [begin, end) of a column, sliced by `cut` rows, against one row at a time
// through the generic per-row path (a one-row range always takes the same code as the scalar).
void check_rows(const arrow::Column& col,
                std::uint64_t (*cell)(const arrow::ArrayView&, std::int64_t)) {
  arrow::ArrayView full = col.view();
  for (std::int64_t cut : {0, 1, 5}) {
    arrow::ArrayView a = full;
    a.offset += cut;
    a.length -= cut;
    for (auto [b, e] : {std::pair<std::int64_t, std::int64_t>{0, a.length}, {3, a.length - 2}}) {
      const auto n = static_cast<std::size_t>(e - b);
      std::vector<std::uint64_t> got(n), folded(n, 99);
      hash_rows(a, b, e, kSeed, got.data(), false);
      hash_rows(a, b, e, kSeed, folded.data(), true);
      for (std::size_t k = 0; k < n; ++k) {
        const auto i = b + static_cast<std::int64_t>(k);
        const std::uint64_t want = a.is_valid(i) ? cell(a, i) : null_hash(kSeed);
        ASSERT_EQ(got[k], want) << "row " << i << " cut " << cut;
        ASSERT_EQ(folded[k], combine(99, want)) << "row " << i << " cut " << cut;
      }
    }
  }
}

arrow::Validity every_third_null(std::size_t n) {
  arrow::Validity ok(n, true);
  for (std::size_t k = 0; k < n; k += 3) ok[k] = false;
  return ok;
}

}  // namespace

TEST(HashRows, FixedWidthColumnsWithNullsAndOffsets) {
  const auto d = doubles(53);
  const auto i = ints<std::int64_t>(53);
  const auto j = ints<std::int32_t>(53);
  for (const auto& ok : {arrow::Validity{}, every_third_null(53)}) {
    check_rows(arrow::float64_column(d, ok), [](const arrow::ArrayView& a, std::int64_t r) {
      return hash_double(a.values<double>()[r], kSeed);
    });
    check_rows(arrow::int64_column(i, ok), [](const arrow::ArrayView& a, std::int64_t r) {
      return hash_int(a.values<std::int64_t>()[r], kSeed);
    });
    check_rows(arrow::int32_column(j, ok), [](const arrow::ArrayView& a, std::int64_t r) {
      return hash_int(a.values<std::int32_t>()[r], kSeed);
    });
    check_rows(arrow::date32_column(j, ok), [](const arrow::ArrayView& a, std::int64_t r) {
      return hash_int(a.values<std::int32_t>()[r], kSeed);
    });
    check_rows(arrow::timestamp_column(i, arrow::TimeUnit::micro, "UTC", ok),
               [](const arrow::ArrayView& a, std::int64_t r) {
                 return hash_int(a.values<std::int64_t>()[r], kSeed);
               });
  }
}

TEST(HashRows, StringsWithNullsAndOffsets) {
  std::vector<std::string> s;
  for (int k = 0; k < 53; ++k)
    s.push_back(std::string(static_cast<std::size_t>(k % 40), 'a') + std::to_string(k));
  for (const auto& ok : {arrow::Validity{}, every_third_null(53)}) {
    check_rows(arrow::utf8_column(s, ok), [](const arrow::ArrayView& a, std::int64_t r) {
      return backfill::detail::hash_bytes(a.bytes_at(r), kSeed);
    });
  }
}
