#include "backfill/graph.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "backfill/error.hpp"
#include "backfill/select.hpp"
#include "plan/names.hpp"

namespace {

using backfill::Graph;
using backfill::Mapping;
using backfill::MappingKind;
using backfill::NodeKind;
using backfill::NodeSpec;

NodeSpec model(std::string name, std::vector<std::string> parents, bool partitioned = true,
               std::vector<std::string> tags = {}) {
  NodeSpec n;
  n.name = std::move(name);
  if (partitioned) {
    n.partitioning = backfill::Partitioning{};
  } else {
    n.strategy = backfill::Strategy::full;
  }
  for (auto& p : parents) n.depends_on.push_back({std::move(p), Mapping{}});
  n.tags = std::move(tags);
  return n;
}

NodeSpec source(std::string name) {
  NodeSpec n;
  n.name = std::move(name);
  n.kind = NodeKind::source;
  n.partitioning = backfill::Partitioning{};
  return n;
}

std::vector<std::string> names(const Graph& g, const std::vector<backfill::ModelId>& ids) {
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(g.node(id).name);
  return out;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const backfill::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Graph, TopologicalOrderIsStable) {
  const Graph g({model("z", {"b"}), model("b", {}), source("raw"), model("a", {"raw"}),
                 model("c", {"a", "z"})});
  EXPECT_EQ(names(g, g.topological_order()), (std::vector<std::string>{"b", "z", "raw", "a", "c"}));
  EXPECT_EQ(g.in_edges(*g.find("c")).size(), 2u);
  EXPECT_EQ(g.out_edges(*g.find("b")).size(), 1u);
  EXPECT_EQ(g.topo_rank(*g.find("c")), 4u);
  const auto up = g.ancestors(*g.find("c"));
  EXPECT_TRUE(up[g.find("raw")->value] && up[g.find("b")->value] && !up[g.find("c")->value]);
  const auto near = g.ancestors(*g.find("c"), 1);
  EXPECT_FALSE(near[g.find("raw")->value]);
  EXPECT_TRUE(near[g.find("a")->value]);
}

TEST(Graph, Errors) {
  EXPECT_EQ(message_of([] {
              Graph({model("fct", {"clean_order"}), model("clean_orders", {})});
            }),
            "model 'fct' depends on 'clean_order', which is not a source or model of the project "
            "(did you mean 'clean_orders'?)");
  EXPECT_THROW(Graph({model("fct", {"nope"})}), backfill::NotFound);
  EXPECT_THROW(Graph({model("a", {}), model("a", {})}), backfill::InvalidInput);
  EXPECT_EQ(message_of([] {
              Graph({model("a", {"c"}), model("b", {"a"}), model("c", {"b"})});
            }),
            "dependency cycle: a -> b -> c -> a");
  EXPECT_THROW(Graph({model("a", {"a"})}), backfill::CycleError);
  NodeSpec w = model("w", {});
  w.depends_on.push_back({"a", Mapping{MappingKind::window, 2, 1}});
  EXPECT_THROW(Graph({model("a", {}), w}), backfill::InvalidInput);
  NodeSpec s = source("s");
  s.depends_on.push_back({"a", Mapping{}});
  EXPECT_THROW(Graph({model("a", {}), s}), backfill::InvalidInput);
  NodeSpec replace_without_grain = model("r", {}, false);
  replace_without_grain.strategy = backfill::Strategy::replace;
  EXPECT_THROW(Graph({replace_without_grain}), backfill::InvalidInput);
  EXPECT_THROW((void)backfill::parse_strategy("upsert"), backfill::InvalidInput);
  EXPECT_EQ(backfill::to_string(Mapping{MappingKind::window, -6, 0}), "window(-6, 0)");
}

TEST(Select, Syntax) {
  const Graph g({source("raw.orders"), model("clean", {"raw.orders"}, true, {"daily"}),
                 model("fct_daily", {"clean"}, true, {"daily", "finance"}),
                 model("fct_monthly", {"fct_daily"}, true, {"finance"}), model("dim", {}, false),
                 model("rpt", {"fct_monthly", "dim"}, false)});
  auto sel = [&](std::string_view s, std::string_view x = {}) {
    return names(g, backfill::select(g, s, x));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(sel("fct_daily+"), (V{"fct_daily", "fct_monthly", "rpt"}));
  EXPECT_EQ(sel("fct_daily+1"), (V{"fct_daily", "fct_monthly"}));
  EXPECT_EQ(sel("+fct_daily"), (V{"clean", "fct_daily"}));
  EXPECT_EQ(sel("1+fct_monthly"), (V{"fct_daily", "fct_monthly"}));
  EXPECT_EQ(sel("@fct_monthly"), (V{"clean", "fct_daily", "fct_monthly", "dim", "rpt"}));
  EXPECT_EQ(sel("tag:finance"), (V{"fct_daily", "fct_monthly"}));
  EXPECT_EQ(sel("fct_*"), (V{"fct_daily", "fct_monthly"}));
  EXPECT_EQ(sel("tag:daily,fct_*"), (V{"fct_daily"}));
  EXPECT_EQ(sel("dim clean"), (V{"clean", "dim"}));
  EXPECT_EQ(sel("source:raw.*+1"), (V{"clean"}));
  EXPECT_EQ(sel("*", "tag:daily grain:none"), (V{"fct_monthly"}));
  EXPECT_THROW((void)sel("fct_weekly"), backfill::NotFound);
  EXPECT_THROW((void)sel("colour:red"), backfill::InvalidInput);
  EXPECT_THROW((void)sel("  "), backfill::InvalidInput);
}

TEST(Names, Glob) {
  using backfill::detail::glob_match;
  EXPECT_TRUE(glob_match("fct_*", "fct_daily"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("f?t_*_sales", "fct_daily_sales"));
  EXPECT_TRUE(glob_match("clean_[ab]*", "clean_b"));
  EXPECT_TRUE(glob_match("[a-c]x", "bx"));
  EXPECT_FALSE(glob_match("[!a-c]x", "bx"));
  EXPECT_FALSE(glob_match("fct_*", "dim_fct_x"));
  EXPECT_TRUE(glob_match("*_*_*", "a_b_c"));
  EXPECT_FALSE(glob_match("a*b", "a_c"));
}

}  // namespace
