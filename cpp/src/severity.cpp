#include "backfill/severity.hpp"

namespace backfill {

std::string_view to_string(Severity s) noexcept {
  switch (s) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "error";
}

}  // namespace backfill
