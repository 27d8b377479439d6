// Test support: a C++-built Arrow table as the diff and fingerprint read it, through the same
// C stream export/import a Python caller's table takes.
#pragma once

#include <memory>
#include <utility>

#include "backfill/arrow.hpp"

namespace backfill::testing {

[[nodiscard]] inline arrow::ImportedTable imported(arrow::Table t) {
  ArrowArrayStream s{};
  arrow::export_table(std::make_shared<const arrow::Table>(std::move(t)), &s);
  return arrow::import_stream(&s);
}

}  // namespace backfill::testing
