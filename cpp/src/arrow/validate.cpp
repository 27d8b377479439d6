// The C data interface gives no buffer sizes: a consumer may assume that each buffer is as large
// as the layout implies (from length + offset, the last offset, the variadic sizes), and must
// check everything else before it indexes with it. These checks are what Arrow C++ calls full
// validation, restricted to what our reads depend on; they run once per imported array.
#include "arrow/validate.hpp"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "backfill/error.hpp"

namespace backfill::arrow::detail {

namespace {

[[noreturn]] void fail(std::string_view path, const ArrayView& v, std::string_view what) {
  throw InvalidInput(
      fmt::format("column '{}' ({}): malformed Arrow array: {}", path, to_string(*v.type), what));
}

void need_buffer(const ArrayView& v, std::size_t i, std::string_view path, std::string_view what) {
  if (v.buffers.at(i) == nullptr) fail(path, v, fmt::format("its {} buffer is null", what));
}

// Offsets of slots [offset, offset + length]: non-negative, non-decreasing, and (lists) at most
// `limit`. Returns the first and last offset.
template <class T>
std::pair<std::int64_t, std::int64_t> check_offsets(const ArrayView& v, std::string_view path,
                                                    std::int64_t limit) {
  const T* offs = static_cast<const T*>(v.buffers[1]) + v.offset;
  const auto first = static_cast<std::int64_t>(offs[0]);
  if (first < 0) fail(path, v, fmt::format("offset {} is negative", first));
  for (std::int64_t i = 0; i < v.length; ++i) {
    if (offs[i + 1] < offs[i]) {
      fail(path, v,
           fmt::format("offsets decrease at slot {} ({} then {})", i, offs[i], offs[i + 1]));
    }
  }
  const auto last = static_cast<std::int64_t>(offs[v.length]);
  if (last > limit) {
    fail(path, v,
         fmt::format("offset {} points past the end of its child (length {})", last, limit));
  }
  return {first, last};
}

void check_views(const ArrayView& v, std::string_view path) {
  need_buffer(v, 1, path, "views");
  // validity, views, the variadic data buffers, then their sizes (int64 each).
  const std::size_t n_data = v.buffers.size() - 3;
  const auto* sizes = static_cast<const std::int64_t*>(v.buffers.back());
  const auto* views = static_cast<const char*>(v.buffers[1]);
  for (std::int64_t i = 0; i < v.length; ++i) {
    const char* view = views + 16 * (v.offset + i);
    std::int32_t len = 0;
    std::memcpy(&len, view, 4);
    if (len < 0) fail(path, v, fmt::format("slot {} has a negative length {}", i, len));
    if (len <= 12) continue;
    std::int32_t buf = 0;
    std::int32_t off = 0;
    std::memcpy(&buf, view + 8, 4);
    std::memcpy(&off, view + 12, 4);
    if (buf < 0 || static_cast<std::size_t>(buf) >= n_data) {
      fail(path, v, fmt::format("slot {} names data buffer {} of {}", i, buf, n_data));
    }
    if (sizes == nullptr || v.buffers[2 + static_cast<std::size_t>(buf)] == nullptr) {
      fail(path, v, fmt::format("slot {} reads a null data buffer", i));
    }
    const std::int64_t size = sizes[buf];
    if (off < 0 || static_cast<std::int64_t>(off) + len > size) {
      fail(path, v,
           fmt::format("slot {} reads bytes [{}, {}) of a data buffer of {} bytes", i, off,
                       static_cast<std::int64_t>(off) + len, size));
    }
  }
}

void check_indices(const ArrayView& v, std::string_view path) {
  const std::int64_t n = v.dictionary->length;
  for (std::int64_t i = 0; i < v.length; ++i) {
    if (!v.is_valid(i)) continue;
    const bool ok = v.type->id == TypeId::uint64
                        ? v.values<std::uint64_t>()[i] < static_cast<std::uint64_t>(n)
                        : v.int_at(i) >= 0 && v.int_at(i) < n;
    if (!ok) {
      fail(
          path, v,
          fmt::format("slot {} has dictionary index {} (dictionary length {})", i, v.int_at(i), n));
    }
  }
}

}  // namespace

void validate_layout(const ArrayView& v, std::string_view path) {
  if (v.length == 0) return;  // nothing is read: buffers may be null
  const TypeId id = v.type->id;
  if (v.null_count > 0 && v.buffers[0] == nullptr && id != TypeId::null) {
    fail(path, v, fmt::format("null count {} but no validity bitmap", v.null_count));
  }
  switch (id) {
    case TypeId::null:
    case TypeId::struct_: break;
    case TypeId::utf8:
    case TypeId::binary:
    case TypeId::large_utf8:
    case TypeId::large_binary: {
      need_buffer(v, 1, path, "offsets");
      const bool large = id == TypeId::large_utf8 || id == TypeId::large_binary;
      const auto [first, last] = large ? check_offsets<std::int64_t>(v, path, INT64_MAX)
                                       : check_offsets<std::int32_t>(v, path, INT64_MAX);
      if (last > first) need_buffer(v, 2, path, "data");
      break;
    }
    case TypeId::utf8_view:
    case TypeId::binary_view: check_views(v, path); break;
    case TypeId::list:
    case TypeId::large_list: {
      need_buffer(v, 1, path, "offsets");
      const std::int64_t limit = v.children.at(0).length;
      if (id == TypeId::list) {
        (void)check_offsets<std::int32_t>(v, path, limit);
      } else {
        (void)check_offsets<std::int64_t>(v, path, limit);
      }
      break;
    }
    default: need_buffer(v, 1, path, "values"); break;
  }
  if (v.dictionary) check_indices(v, path);
}

}  // namespace backfill::arrow::detail
