// dbt's node selection syntax over a Graph.
//
//   auto ids = backfill::select(graph, "fct_daily_sales+ tag:finance,fct_*", "tag:deprecated");
//
// A selector is a space-separated union of terms; a term is a comma-separated intersection of
// atoms; an atom is  [@ | N+ | +] [method:]pattern [+ | +N]  where
//   name / glob    a node whose name matches (fnmatch: *, ?, [...]); sources and models
//   tag:T          models tagged T (globs allowed)
//   source:S       sources matching S (so "source:raw.*+" is everything fed by raw)
//   strategy:S     models with that strategy (replace, merge, append, full, view)
//   grain:G        models partitioned by grain G ("none" for unpartitioned)
//   +x / N+x       x with all ancestors / ancestors within N edges
//   x+ / x+N       x with all descendants / descendants within N edges
//   @x             x, its descendants and every ancestor of those descendants
// `exclude` uses the same syntax and is removed from the result.
#pragma once

#include <string_view>
#include <vector>

#include "backfill/graph.hpp"

namespace backfill {

// The selected models (sources never appear) in topological order. An atom that matches no
// node throws NotFound naming it; malformed syntax or an unknown method throws InvalidInput;
// a selection left empty by `exclude` throws NotFound. O(atoms * (V + E)).
[[nodiscard]] std::vector<ModelId> select(const Graph& graph, std::string_view selector,
                                          std::string_view exclude = {});

// The same as a mark per node (sources included when matched), for callers that combine sets.
[[nodiscard]] std::vector<bool> select_marks(const Graph& graph, std::string_view selector);

}  // namespace backfill
