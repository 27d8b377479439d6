// Large planner arrays (tens of MB per million tasks) are allocated fresh and touched once, page by
// page, so 4 KiB page faults were about a third of planning time. On Linux we ask for transparent
// huge pages on such arrays (one fault per 2 MiB); elsewhere, or when THP is off, this is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace backfill::detail {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Advises the whole 2 MiB pages inside [data, data + bytes); smaller ranges are left alone.
inline void advise_huge_pages(const void* data, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < 2 * kHugePage) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t lo = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t hi = (begin + bytes) & ~(kHugePage - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // best effort
#else
  (void)data;
  (void)bytes;
#endif
}

// reserve(n) with huge pages advised; call before the first write so the faults get them.
template <class T, class A>
void reserve_huge(std::vector<T, A>& v, std::size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

// A vector of n copies of value, huge pages advised.
template <class T>
[[nodiscard]] std::vector<T> huge_vector(std::size_t n, T value = T{}) {
  std::vector<T> v;
  reserve_huge(v, n);
  v.assign(n, value);
  return v;
}

}  // namespace backfill::detail
