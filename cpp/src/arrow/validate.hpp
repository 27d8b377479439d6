// Checks of an imported Arrow array that the C data interface leaves to the consumer: the
// content of offsets, view and dictionary-index buffers, which every later read trusts.
#pragma once

#include <string_view>

#include "backfill/arrow.hpp"

namespace backfill::arrow::detail {

// Throws InvalidInput naming `path` when `v` (offset applied, children and dictionary already
// validated) cannot be read safely: a required buffer is null, string or list offsets are
// negative, decrease or (lists) point past the child, a view names a missing buffer or bytes
// past its size, or a valid slot's dictionary index lies outside the dictionary. O(length).
void validate_layout(const ArrayView& v, std::string_view path);

}  // namespace backfill::arrow::detail
