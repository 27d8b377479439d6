// Parallel loops shared by the diff engine and the planner.
//   parallel_for: tasks [0, n) pulled from an atomic counter by `threads` threads (diff).
//   parallel_chunks: [0, n) cut into contiguous chunks, one per worker, each writing only its own
//   slots, so results never depend on thread timing; small inputs run inline (planner).
// In both, an exception is rethrown in the caller after every thread has finished.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace backfill::detail {

[[nodiscard]] inline unsigned thread_count(unsigned requested) noexcept {
  if (requested != 0) return requested;
  return std::clamp(std::thread::hardware_concurrency(), 1U, 16U);
}

// Calls fn(task, worker) for every task; the first exception is rethrown after all join.
template <class F>
void parallel_for(std::size_t n, unsigned threads, F&& fn) {
  const unsigned workers = static_cast<unsigned>(std::min<std::size_t>(threads, n));
  if (workers <= 1) {
    for (std::size_t t = 0; t < n; ++t) fn(t, 0U);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](unsigned w) {
    try {
      for (std::size_t t = next++; t < n; t = next++) fn(t, w);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// Worker threads for bulk work: the hardware threads, at most 8 (the loops are memory-bound).
[[nodiscard]] inline std::size_t worker_count() noexcept {
  static const std::size_t n = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  return n;
}

// Calls f(lo, hi, chunk) over chunks of at least `min_chunk` items (at most worker_count()).
template <class F>
void parallel_chunks(std::size_t n, std::size_t min_chunk, F&& f) {
  const std::size_t k =
      std::clamp<std::size_t>(n / std::max<std::size_t>(min_chunk, 1), 1, worker_count());
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
