// Byte offset -> (line, column), both 1-based. Lines end at "\n", "\r\n" or a lone "\r"; columns
// count code points, a byte outside any well-formed UTF-8 sequence counting as one. Lookups at
// increasing offsets on one line continue from the previous one, so locating every token of a
// file is O(n) even when it is one long line.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace backfill::detail {

struct Position {
  std::size_t line = 1;
  std::size_t column = 1;
};

// Length of the well-formed UTF-8 sequence at text[i] (1..4), or 0 if none starts there.
[[nodiscard]] std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept;

// The first byte offset that is not part of well-formed UTF-8 and how many such bytes there are.
struct Utf8Check {
  std::size_t first_invalid = static_cast<std::size_t>(-1);
  std::size_t invalid_bytes = 0;
};
[[nodiscard]] Utf8Check check_utf8(std::string_view text) noexcept;

class Locator {
 public:
  explicit Locator(std::string_view text);
  [[nodiscard]] Position locate(std::size_t offset);

 private:
  std::string_view text_;
  std::vector<std::size_t> line_starts_;
  std::size_t cache_line_ = 0;    // index into line_starts_
  std::size_t cache_offset_ = 0;  // a sequence boundary on that line
  std::size_t cache_column_ = 1;
};

}  // namespace backfill::detail
