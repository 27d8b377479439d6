// Name helpers shared by the graph and the selectors: "did you mean" hints and glob matching.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backfill/graph.hpp"

namespace backfill::detail {

// " (did you mean 'clean_orders'?)" for the closest name within a small edit distance, else "".
[[nodiscard]] std::string did_you_mean(std::string_view name, const std::vector<NodeSpec>& nodes);

// fnmatch-style: '*' any run, '?' one character, '[abc]' / '[a-z]' / '[!a]' a class.
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view text) noexcept;
[[nodiscard]] bool has_glob(std::string_view pattern) noexcept;

}  // namespace backfill::detail
