// A minimal fork-join loop: tasks [0, n) pulled from an atomic counter by `threads` threads.
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

}  // namespace backfill::detail
