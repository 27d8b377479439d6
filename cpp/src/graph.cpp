// The model graph: validation, cycle detection and topological order on Boost.Graph.
#include "backfill/graph.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

#include "backfill/error.hpp"
#include "plan/names.hpp"

namespace backfill {

namespace {

using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
using Vertex = boost::graph_traits<BoostGraph>::vertex_descriptor;
using BoostEdge = boost::graph_traits<BoostGraph>::edge_descriptor;

// Records the DFS tree so that the first back edge u -> v yields the cycle v -> ... -> u -> v.
class CycleFinder : public boost::default_dfs_visitor {
 public:
  CycleFinder(std::vector<Vertex>& parent, const std::vector<NodeSpec>& nodes)
      : parent_(&parent), nodes_(&nodes) {}
  void tree_edge(BoostEdge e, const BoostGraph& g) const {
    (*parent_)[boost::target(e, g)] = boost::source(e, g);
  }
  void back_edge(BoostEdge e, const BoostGraph& g) const {
    const Vertex u = boost::source(e, g);
    const Vertex v = boost::target(e, g);
    std::vector<std::string_view> path;
    for (Vertex w = u; w != v; w = (*parent_)[w]) path.push_back((*nodes_)[w].name);
    path.push_back((*nodes_)[v].name);
    std::reverse(path.begin(), path.end());
    path.push_back((*nodes_)[v].name);
    throw CycleError(fmt::format("dependency cycle: {}", fmt::join(path, " -> ")));
  }

 private:
  std::vector<Vertex>* parent_;
  const std::vector<NodeSpec>* nodes_;
};

void validate_node(const NodeSpec& n) {
  if (n.name.empty()) throw InvalidInput("a source or model has an empty name");
  if (n.kind == NodeKind::source) {
    if (!n.depends_on.empty()) {
      throw InvalidInput(
          fmt::format("source '{}' has dependencies ({}); only models depend on "
                      "other nodes",
                      n.name, n.depends_on.front().parent));
    }
    if (n.retention && *n.retention <= 0) {
      throw InvalidInput(
          fmt::format("source '{}' has retention {} s; expected a positive "
                      "duration or none (kept forever)",
                      n.name, *n.retention));
    }
    return;
  }
  const bool partitioned = n.partitioning.has_value();
  if (n.strategy == Strategy::replace && !partitioned) {
    throw InvalidInput(
        fmt::format("model '{}' has strategy 'replace' but no grain; replace "
                    "deletes and inserts a period, so give it a grain (or use "
                    "strategy 'full')",
                    n.name));
  }
  if ((n.strategy == Strategy::full || n.strategy == Strategy::view) && partitioned) {
    throw InvalidInput(fmt::format(
        "model '{}' has strategy '{}' and grain '{}'; a {} model is "
        "rebuilt whole, so it takes no grain",
        n.name, to_string(n.strategy), to_string(n.partitioning->grain), to_string(n.strategy)));
  }
  for (const auto& d : n.depends_on) {
    if (d.mapping.kind != MappingKind::window) continue;
    if (d.mapping.start > d.mapping.end) {
      throw InvalidInput(
          fmt::format("model '{}' reads '{}' through window({}, {}): the window "
                      "start is after its end; expected start <= end",
                      n.name, d.parent, d.mapping.start, d.mapping.end));
    }
    if (!partitioned) {
      throw InvalidInput(
          fmt::format("model '{}' reads '{}' through window({}, {}) but has no "
                      "grain; window offsets count partitions of the reading "
                      "model",
                      n.name, d.parent, d.mapping.start, d.mapping.end));
    }
  }
}

}  // namespace

Strategy parse_strategy(std::string_view name) {
  for (auto s :
       {Strategy::replace, Strategy::merge, Strategy::append, Strategy::full, Strategy::view}) {
    if (to_string(s) == name) return s;
  }
  throw InvalidInput(
      fmt::format("unknown strategy '{}'; expected one of replace, merge, append, "
                  "full, view",
                  name));
}

SourceKind parse_source_kind(std::string_view name) {
  for (auto k : {SourceKind::raw, SourceKind::kafka, SourceKind::external}) {
    if (to_string(k) == name) return k;
  }
  throw InvalidInput(
      fmt::format("unknown source kind '{}'; expected one of raw, kafka, external", name));
}

MappingKind parse_mapping_kind(std::string_view name) {
  for (auto k : {MappingKind::overlap, MappingKind::window, MappingKind::all}) {
    if (to_string(k) == name) return k;
  }
  throw InvalidInput(
      fmt::format("unknown partition mapping '{}'; expected one of overlap, window, all", name));
}

std::string_view to_string(NodeKind kind) noexcept {
  return kind == NodeKind::source ? "source" : "model";
}

std::string_view to_string(Strategy strategy) noexcept {
  switch (strategy) {
    case Strategy::replace: return "replace";
    case Strategy::merge: return "merge";
    case Strategy::append: return "append";
    case Strategy::full: return "full";
    case Strategy::view: return "view";
  }
  return "?";
}

std::string_view to_string(SourceKind kind) noexcept {
  switch (kind) {
    case SourceKind::raw: return "raw";
    case SourceKind::kafka: return "kafka";
    case SourceKind::external: return "external";
  }
  return "?";
}

std::string_view to_string(MappingKind kind) noexcept {
  switch (kind) {
    case MappingKind::overlap: return "overlap";
    case MappingKind::window: return "window";
    case MappingKind::all: return "all";
  }
  return "?";
}

std::string to_string(const Mapping& m) {
  if (m.kind == MappingKind::window) return fmt::format("window({}, {})", m.start, m.end);
  return std::string(to_string(m.kind));
}

Graph::Graph(std::vector<NodeSpec> nodes) : nodes_(std::move(nodes)) {
  const auto n = static_cast<std::uint32_t>(nodes_.size());
  index_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    validate_node(nodes_[i]);
    if (!index_.emplace(nodes_[i].name, i).second) {
      throw InvalidInput(fmt::format("duplicate name '{}': {} {} and {} {}", nodes_[i].name,
                                     to_string(nodes_[index_[nodes_[i].name]].kind),
                                     index_[nodes_[i].name], to_string(nodes_[i].kind), i));
    }
  }

  BoostGraph g(n);
  std::vector<Edge> edges;
  for (std::uint32_t c = 0; c < n; ++c) {
    std::set<std::string_view> seen;
    for (const auto& d : nodes_[c].depends_on) {
      auto it = index_.find(d.parent);
      if (it == index_.end()) {
        throw NotFound(
            fmt::format("model '{}' depends on '{}', which is not a source or model "
                        "of the project{}",
                        nodes_[c].name, d.parent, detail::did_you_mean(d.parent, nodes_)));
      }
      if (!seen.insert(d.parent).second) {
        throw InvalidInput(
            fmt::format("model '{}' depends on '{}' twice; give each parent once "
                        "with one mapping",
                        nodes_[c].name, d.parent));
      }
      if (it->second == c) {
        throw CycleError(fmt::format("dependency cycle: {} -> {}", nodes_[c].name, d.parent));
      }
      boost::add_edge(it->second, c, g);
      edges.push_back({ModelId{it->second}, ModelId{c}, d.mapping});
    }
  }

  std::vector<Vertex> dfs_parent(n);
  std::vector<boost::default_color_type> colors(n);
  boost::depth_first_search(g, boost::visitor(CycleFinder(dfs_parent, nodes_))
                                   .color_map(boost::make_iterator_property_map(
                                       colors.begin(), boost::get(boost::vertex_index, g))));

  // Kahn's algorithm; the min-heap keeps declaration order among ready nodes.
  std::vector<std::size_t> pending(n);
  std::priority_queue<Vertex, std::vector<Vertex>, std::greater<>> ready;
  for (Vertex v = 0; v < n; ++v) {
    pending[v] = boost::in_degree(v, g);
    if (pending[v] == 0) ready.push(v);
  }
  topo_.reserve(n);
  rank_.assign(n, 0);
  while (!ready.empty()) {
    const Vertex v = ready.top();
    ready.pop();
    rank_[v] = static_cast<std::uint32_t>(topo_.size());
    topo_.push_back(ModelId{static_cast<std::uint32_t>(v)});
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      if (--pending[boost::target(*e, g)] == 0) ready.push(boost::target(*e, g));
    }
  }

  // Flatten in/out edges (counting sort by child, then by parent), keeping declaration order.
  in_offsets_.assign(n + 1, 0);
  out_offsets_.assign(n + 1, 0);
  for (const auto& e : edges) {
    ++in_offsets_[e.child.value + 1];
    ++out_offsets_[e.parent.value + 1];
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    in_offsets_[i + 1] += in_offsets_[i];
    out_offsets_[i + 1] += out_offsets_[i];
  }
  in_.resize(edges.size());
  out_.resize(edges.size());
  auto in_fill = in_offsets_;
  auto out_fill = out_offsets_;
  for (const auto& e : edges) {
    in_[in_fill[e.child.value]++] = e;
    out_[out_fill[e.parent.value]++] = e;
  }
}

std::optional<ModelId> Graph::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return ModelId{it->second};
}

ModelId Graph::at(std::string_view name) const {
  if (auto id = find(name)) return *id;
  throw NotFound(
      fmt::format("no source or model named '{}'{}", name, detail::did_you_mean(name, nodes_)));
}

std::span<const Edge> Graph::in_edges(ModelId id) const noexcept {
  if (id.value >= nodes_.size()) return {};
  return {in_.data() + in_offsets_[id.value], in_offsets_[id.value + 1] - in_offsets_[id.value]};
}

std::span<const Edge> Graph::out_edges(ModelId id) const noexcept {
  if (id.value >= nodes_.size()) return {};
  return {out_.data() + out_offsets_[id.value],
          out_offsets_[id.value + 1] - out_offsets_[id.value]};
}

namespace {

// Breadth-first, so `depth` counts edges on a shortest path.
template <class Next>
std::vector<bool> reach(std::size_t n, ModelId from, int depth, Next&& next) {
  std::vector<bool> seen(n, false);
  std::vector<ModelId> frontier{from};
  for (int level = 0; !frontier.empty() && (depth < 0 || level < depth); ++level) {
    std::vector<ModelId> following;
    for (ModelId v : frontier) {
      for (ModelId w : next(v)) {
        if (!seen[w.value] && w != from) {
          seen[w.value] = true;
          following.push_back(w);
        }
      }
    }
    frontier = std::move(following);
  }
  return seen;
}

}  // namespace

std::vector<bool> Graph::ancestors(ModelId id, int depth) const {
  return reach(size(), id, depth, [this](ModelId v) {
    std::vector<ModelId> out;
    for (const auto& e : in_edges(v)) out.push_back(e.parent);
    return out;
  });
}

std::vector<bool> Graph::descendants(ModelId id, int depth) const {
  return reach(size(), id, depth, [this](ModelId v) {
    std::vector<ModelId> out;
    for (const auto& e : out_edges(v)) out.push_back(e.child);
    return out;
  });
}

}  // namespace backfill
