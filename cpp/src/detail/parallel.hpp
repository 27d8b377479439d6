// Data-parallel loops for the planner's bulk phases.
//
// [0, n) is cut into contiguous chunks, one per worker (the calling thread runs the first), and
// every chunk writes only its own slots, so results never depend on thread timing. Small inputs
// run inline: a thread costs tens of microseconds. An exception in a chunk is rethrown in the
// caller after all chunks have finished.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace backfill::detail {

// Worker threads for bulk work: the hardware threads, at most 8 (the loops are memory-bound).
[[nodiscard]] inline std::size_t worker_count() noexcept {
  static const std::size_t n = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  return n;
}

// Calls f(lo, hi, chunk) over chunks of at least `min_chunk` items (at most worker_count()).
template <class F>
void parallel_chunks(std::size_t n, std::size_t min_chunk, F&& f) {
  const std::size_t k = std::clamp<std::size_t>(n / std::max<std::size_t>(min_chunk, 1), 1,
                                                worker_count());
  if (k == 1) {
    f(std::size_t{0}, n, std::size_t{0});
    return;
  }
  auto bound = [&](std::size_t i) { return n / k * i + std::min(i, n % k); };
  std::vector<std::exception_ptr> errors(k);
  {
    std::vector<std::jthread> threads;
    threads.reserve(k - 1);
    for (std::size_t i = 1; i < k; ++i) {
      threads.emplace_back([&, i] {
        try {
          f(bound(i), bound(i + 1), i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    try {
      f(bound(0), bound(1), std::size_t{0});
    } catch (...) {
      errors[0] = std::current_exception();
    }
  }  // joins
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Runs f and g concurrently (f on the calling thread) when `worth_it` and there are two
// workers, else one after the other; rethrows as above.
template <class F, class G>
void parallel_invoke(bool worth_it, F&& f, G&& g) {
  if (!worth_it || worker_count() == 1) {
    f();
    g();
    return;
  }
  std::exception_ptr errors[2];
  {
    std::jthread other([&] {
      try {
        g();
      } catch (...) {
        errors[1] = std::current_exception();
      }
    });
    try {
      f();
    } catch (...) {
      errors[0] = std::current_exception();
    }
  }  // joins
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace backfill::detail
