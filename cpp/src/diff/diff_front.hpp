// The diff's front and back (diff.cpp), shared by the one-shot diff and the streamed one
// (diff_stream.cpp): options validated into a plan, engine results into Arrow tables.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backfill/arrow.hpp"
#include "backfill/diff.hpp"
#include "diff/diff_engine.hpp"

namespace backfill::diff::front {

struct SchemaChange {
  std::string column, change;
  std::optional<std::string> old_type, new_type;
  std::optional<bool> compared;
};

// Validates `opt` against both tables' schemas; `schema` receives the schema changes.
[[nodiscard]] detail::DiffPlan make_plan(const arrow::ImportedTable& o,
                                         const arrow::ImportedTable& n, const Options& opt,
                                         std::vector<SchemaChange>& schema);

[[nodiscard]] std::shared_ptr<arrow::Table> schema_table(const std::vector<SchemaChange>& rows);
// o, n: the two sides' fields (for the type names).
[[nodiscard]] std::shared_ptr<arrow::Table> columns_table(const std::vector<arrow::Field>& o,
                                                          const std::vector<arrow::Field>& n,
                                                          const detail::DiffPlan& plan,
                                                          const detail::EngineResult& r);
[[nodiscard]] std::shared_ptr<arrow::Table> partitions_table(const detail::DiffPlan& plan,
                                                             const detail::EngineResult& r);
// Whole rows of `t` (global row numbers), every column taken in order.
[[nodiscard]] std::shared_ptr<arrow::Table> rows_table(const arrow::ImportedTable& t,
                                                       const std::vector<std::int64_t>& rows);
// key columns..., column, old, new for r.changed_rows (rows of o and n).
[[nodiscard]] std::shared_ptr<arrow::Table> changed_table(const arrow::ImportedTable& o,
                                                          const arrow::ImportedTable& n,
                                                          const detail::DiffPlan& plan,
                                                          const detail::EngineResult& r);

}  // namespace backfill::diff::front
