// libFuzzer target for dbt-style node selectors (backfill::select, fed by --select/--exclude),
// over a small fixed graph with sources, tags, grains, strategies and a window edge. Input: the
// selector, then after the first NUL byte the exclude selector. Checks beyond "no crash, no
// sanitizer report":
//  - select either returns or throws a backfill::Error (never another exception);
//  - the result holds models only, each once, in topological order;
//  - without an exclude, select() returns exactly the models select_marks() marks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backfill/error.hpp"
#include "backfill/graph.hpp"
#include "backfill/select.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

backfill::NodeSpec node(std::string name, std::vector<std::string> parents,
                        std::vector<std::string> tags = {}) {
  backfill::NodeSpec n;
  n.name = std::move(name);
  n.event_time = "at";
  n.partitioning = backfill::Partitioning{backfill::Grain::day, {}, {}};
  n.tags = std::move(tags);
  for (auto& p : parents) n.depends_on.push_back({std::move(p), {}});
  return n;
}

const backfill::Graph& graph() {
  static const backfill::Graph g = [] {
    backfill::NodeSpec raw;
    raw.name = "raw.orders";
    raw.kind = backfill::NodeKind::source;
    std::vector<backfill::NodeSpec> nodes{raw};
    nodes.push_back(node("clean_orders", {"raw.orders"}, {"daily", "finance"}));
    nodes.push_back(node("clean_order_items", {}, {"daily"}));
    nodes.push_back(node("fct_daily_sales", {"clean_orders", "clean_order_items"}, {"finance"}));
    auto monthly = node("fct_monthly_sales", {"fct_daily_sales"}, {"finance", "monthly"});
    monthly.partitioning->grain = backfill::Grain::month;
    nodes.push_back(monthly);
    auto window = node("fct_sales_7d", {});
    window.depends_on.push_back({"fct_daily_sales", {backfill::MappingKind::window, -6, 0}});
    nodes.push_back(window);
    auto dim = node("dim_customers", {"raw.orders"}, {"deprecated"});
    dim.partitioning.reset();
    dim.strategy = backfill::Strategy::full;
    nodes.push_back(dim);
    return backfill::Graph(std::move(nodes));
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  const std::string_view selector = all.substr(0, nul);
  const std::string_view exclude =
      nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);
  const auto& g = graph();

  std::vector<backfill::ModelId> ids;
  try {
    ids = backfill::select(g, selector, exclude);
  } catch (const backfill::Error&) {
    return 0;
  }
  std::vector<bool> seen(g.size(), false);
  std::uint32_t last_rank = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    check(ids[i].value < g.size() && !seen[ids[i].value]);
    check(g.node(ids[i]).kind == backfill::NodeKind::model);
    check(i == 0 || g.topo_rank(ids[i]) > last_rank);
    seen[ids[i].value] = true;
    last_rank = g.topo_rank(ids[i]);
  }
  if (exclude.empty()) {
    const auto marks = backfill::select_marks(g, selector);
    for (std::size_t i = 0; i < g.size(); ++i) {
      check(seen[i] == (marks[i] && g.nodes()[i].kind == backfill::NodeKind::model));
    }
  }
  return 0;
}
