#include "lint/text_position.hpp"

#include <algorithm>

namespace backfill::detail {

std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept {
  // Well-formed sequences per Unicode 15, table 3-7 (no overlongs, surrogates or > U+10FFFF).
  const auto b = [&](std::size_t k) -> unsigned {
    return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0x100U;
  };
  const unsigned c = b(0);
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return b(k) >= lo && b(k) <= hi;
  };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

Utf8Check check_utf8(std::string_view text) noexcept {
  Utf8Check out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      if (out.invalid_bytes++ == 0) out.first_invalid = i;
      ++i;
    } else {
      i += n;
    }
  }
  return out;
}

Locator::Locator(std::string_view text) : text_(text) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) {
      line_starts_.push_back(i + 1);
    }
  }
}

Position Locator::locate(std::size_t offset) {
  offset = std::min(offset, text_.size());
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const auto line = static_cast<std::size_t>(it - line_starts_.begin()) - 1;
  if (line != cache_line_ || offset < cache_offset_) {
    cache_line_ = line;
    cache_offset_ = line_starts_[line];
    cache_column_ = 1;
  }
  // Advance whole sequences; an offset inside a sequence belongs to that code point's column.
  while (cache_offset_ < offset) {
    const std::size_t n = std::max<std::size_t>(1, utf8_sequence_length(text_, cache_offset_));
    if (cache_offset_ + n > offset) return {line + 1, cache_column_};
    cache_offset_ += n;
    ++cache_column_;
  }
  return {line + 1, cache_column_};
}

}  // namespace backfill::detail
