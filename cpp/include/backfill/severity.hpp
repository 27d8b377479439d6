// Severity of a finding, shared by the planner (plan.hpp) and the SQL lint (lint.hpp).
//   backfill::to_string(backfill::Severity::warning) == "warning"
#pragma once

#include <cstdint>
#include <string_view>

namespace backfill {

enum class Severity : std::uint8_t { info, warning, error };
[[nodiscard]] std::string_view to_string(Severity s) noexcept;

}  // namespace backfill
