// The model graph: sources and models, their partitioning, and dependencies that carry a
// partition mapping (overlap, window, all). Built once from specs, validated, then immutable.
//
//   std::vector<backfill::NodeSpec> specs = ...;   // sources and models, any order
//   backfill::Graph g(std::move(specs));            // throws NotFound / InvalidInput / CycleError
//   for (backfill::ModelId id : g.topological_order()) fmt::print("{}\n", g.node(id).name);
//
// Storage is a Boost.Graph bidirectional adjacency list (validation, cycle detection and the
// topological sort run on it); per-node in/out edge spans are flattened once for the planner.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backfill/calendar.hpp"

namespace backfill {

// A node of the graph (source or model). A strong typedef so it never mixes with task ids or
// partition indices.
struct ModelId {
  std::uint32_t value = 0;
  friend constexpr auto operator<=>(ModelId, ModelId) noexcept = default;
};

enum class NodeKind : std::uint8_t { source, model };
// replace: delete + insert the period; merge on unique_key; append; full: rebuild the table; view.
enum class Strategy : std::uint8_t { replace, merge, append, full, view };
enum class SourceKind : std::uint8_t { raw, kafka, external };

[[nodiscard]] Strategy parse_strategy(std::string_view name);
[[nodiscard]] SourceKind parse_source_kind(std::string_view name);
[[nodiscard]] std::string_view to_string(NodeKind kind) noexcept;
[[nodiscard]] std::string_view to_string(Strategy strategy) noexcept;
[[nodiscard]] std::string_view to_string(SourceKind kind) noexcept;
[[nodiscard]] inline auto format_as(Strategy s) noexcept { return to_string(s); }

// How a node's rows are split in time. `begin` (models only) is the first instant with data: the
// partition containing it is the first that exists.
struct Partitioning {
  Grain grain = Grain::day;
  TimeZone tz{};
  std::optional<Seconds> begin;
};

// Which parent partitions a child partition reads.
// - overlap: every parent partition overlapping the child partition.
// - window: the child partitions [c + start, c + end] (offsets in the child's grain), then every
//   parent partition overlapping that span; window(-6, 0) on days is a 7-day rolling read.
// - all: the whole parent.
enum class MappingKind : std::uint8_t { overlap, window, all };
[[nodiscard]] MappingKind parse_mapping_kind(std::string_view name);
[[nodiscard]] std::string_view to_string(MappingKind kind) noexcept;

struct Mapping {
  MappingKind kind = MappingKind::overlap;
  std::int32_t start = 0;  // window only
  std::int32_t end = 0;    // window only, inclusive
  friend constexpr bool operator==(const Mapping&, const Mapping&) noexcept = default;
};
[[nodiscard]] std::string to_string(const Mapping& mapping);  // "overlap", "window(-6, 0)", "all"

struct DependencySpec {
  std::string parent;
  Mapping mapping{};
};

struct NodeSpec {
  std::string name;
  NodeKind kind = NodeKind::model;
  std::optional<Partitioning> partitioning;  // none: unpartitioned
  Strategy strategy = Strategy::replace;     // models
  SourceKind source_kind = SourceKind::raw;  // sources
  std::optional<Seconds> retention;          // sources; none: kept forever
  std::string event_time;                    // column; empty: none
  std::vector<std::string> tags;
  std::vector<DependencySpec> depends_on;  // models
};

struct Edge {
  ModelId parent;
  ModelId child;
  Mapping mapping;
};

class Graph {
 public:
  Graph() = default;
  // Validates, in this order, naming the offending node: empty or duplicate names, sources with
  // dependencies, invalid partitioning for the strategy (replace needs a grain; full and view
  // need none), windows with start > end or on an unpartitioned child, unknown parents (names
  // the model and the missing parent), duplicate edges, and cycles (CycleError listing the path
  // "a -> b -> c -> a"). O(V + E) plus the name hashing.
  explicit Graph(std::vector<NodeSpec> nodes);

  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  [[nodiscard]] const NodeSpec& node(ModelId id) const { return nodes_.at(id.value); }
  [[nodiscard]] const std::vector<NodeSpec>& nodes() const noexcept { return nodes_; }
  [[nodiscard]] std::optional<ModelId> find(std::string_view name) const;
  // Throws NotFound naming `name` (and a close match when there is one).
  [[nodiscard]] ModelId at(std::string_view name) const;

  [[nodiscard]] std::span<const Edge> in_edges(ModelId id) const noexcept;   // parents
  [[nodiscard]] std::span<const Edge> out_edges(ModelId id) const noexcept;  // children

  // Every node, parents before children; ties broken by declaration order (Kahn's algorithm
  // with a min-heap), so the order is stable as a project grows.
  [[nodiscard]] const std::vector<ModelId>& topological_order() const noexcept { return topo_; }
  // Position of a node in topological_order().
  [[nodiscard]] std::uint32_t topo_rank(ModelId id) const noexcept { return rank_[id.value]; }

  // Nodes reachable upstream (ancestors) or downstream (descendants) of `id` within `depth`
  // edges (-1: unbounded); `id` itself is not included. One mark per node.
  [[nodiscard]] std::vector<bool> ancestors(ModelId id, int depth = -1) const;
  [[nodiscard]] std::vector<bool> descendants(ModelId id, int depth = -1) const;

 private:
  std::vector<NodeSpec> nodes_;
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<Edge> in_;   // grouped by child
  std::vector<Edge> out_;  // grouped by parent
  std::vector<std::uint32_t> in_offsets_;
  std::vector<std::uint32_t> out_offsets_;
  std::vector<ModelId> topo_;
  std::vector<std::uint32_t> rank_;
};

}  // namespace backfill
