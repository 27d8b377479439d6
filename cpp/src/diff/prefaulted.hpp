// A large uninitialized array whose pages are faulted in up front, in parallel ranges, by
// madvise(MADV_POPULATE_WRITE) (Linux >= 5.14): one system call per range instead of one page
// fault (a trap, a page clear and a page-table update) per 4 KiB on first write. Elsewhere, or
// when the kernel refuses, pages fault in on first touch as usual.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "common/parallel.hpp"

namespace backfill::detail {

template <class T>
class Prefaulted {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  Prefaulted() = default;
  Prefaulted(std::size_t n, unsigned threads) : bytes_(n * sizeof(T)) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    if (bytes_ >= kMinBytes) {
      void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        mapped_ = static_cast<T*>(p);
        const std::size_t chunk = (bytes_ / threads + kPage - 1) / kPage * kPage;
        parallel_for(threads, threads, [&](std::size_t t, unsigned) {
          const std::size_t lo = t * chunk;
          if (lo < bytes_) {
            (void)madvise(static_cast<char*>(p) + lo, std::min(chunk, bytes_ - lo),
                          MADV_POPULATE_WRITE);
          }
        });
        return;
      }
    }
#endif
    heap_ = std::make_unique_for_overwrite<T[]>(n);
  }
  Prefaulted(const Prefaulted&) = delete;
  Prefaulted& operator=(const Prefaulted&) = delete;
  Prefaulted(Prefaulted&& o) noexcept { swap(o); }
  Prefaulted& operator=(Prefaulted&& o) noexcept {
    Prefaulted(std::move(o)).swap(*this);
    return *this;
  }
  ~Prefaulted() { reset(); }

  void reset() noexcept {
#if defined(__linux__)
    if (mapped_ != nullptr) munmap(mapped_, bytes_);
#endif
    mapped_ = nullptr;
    heap_.reset();
  }
  [[nodiscard]] T* get() const noexcept { return mapped_ != nullptr ? mapped_ : heap_.get(); }

 private:
  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kMinBytes = std::size_t{1} << 22;  // smaller: the heap's pages
  void swap(Prefaulted& o) noexcept {
    std::swap(bytes_, o.bytes_);
    std::swap(mapped_, o.mapped_);
    std::swap(heap_, o.heap_);
  }
  std::size_t bytes_ = 0;
  T* mapped_ = nullptr;
  std::unique_ptr<T[]> heap_;
};

}  // namespace backfill::detail
