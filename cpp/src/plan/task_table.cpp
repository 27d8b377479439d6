// Plan -> Arrow task table. Buffers are filled straight from the plan's columns.
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "backfill/arrow.hpp"
#include "backfill/error.hpp"
#include "backfill/plan.hpp"
#include "common/parallel.hpp"
#include "plan/plan_internal.hpp"

namespace backfill {

namespace {

using Bytes = std::vector<std::uint8_t>;

// Below this many rows a column is filled on the calling thread.
constexpr std::size_t kMinChunk = 1 << 14;

template <class T>
std::shared_ptr<Bytes> allocate(std::size_t n) {
  return std::make_shared<Bytes>(n * sizeof(T));
}

template <class T>
T* data_of(const std::shared_ptr<Bytes>& b) {
  return reinterpret_cast<T*>(b->data());
}

arrow::Column column(arrow::DataType type, std::size_t n, std::shared_ptr<Bytes> values) {
  arrow::Column c;
  c.type = std::move(type);
  c.length = static_cast<std::int64_t>(n);
  c.buffers = {nullptr, std::move(values)};
  return c;
}

std::int32_t checked_offset(std::size_t n, std::string_view what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidInput(fmt::format("the task table's {} exceed 2^31 entries", what));
  }
  return static_cast<std::int32_t>(n);
}

// Task labels without formatting one string per task: a plan's millions of tasks start at a few
// thousand distinct partitions, so each (grain, zone) formats the labels of the partition indices
// its models' tasks span once, and a task's label is found by its partition index.
class Labels {
 public:
  Labels(const Plan& plan, const Graph& g);
  // Label id of every task; tasks [lo, hi) only, so chunks can run in parallel.
  void ids(std::size_t lo, std::size_t hi, std::uint32_t* out) const;
  [[nodiscard]] std::string_view text(std::uint32_t id) const noexcept {
    return std::string_view(chars_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

 private:
  struct Group {
    detail::Axis axis;
    std::int64_t lo = std::numeric_limits<std::int64_t>::max();  // partition indices [lo, hi)
    std::int64_t hi = std::numeric_limits<std::int64_t>::min();
    std::size_t tasks = 0;
    std::vector<Seconds> starts;  // starts[i - lo] = start of partition i, i in [lo, hi]
    std::uint32_t base = 0;       // label id of partition lo
  };
  std::uint32_t add(std::string_view s) {
    chars_ += s;
    offsets_.push_back(chars_.size());
    return static_cast<std::uint32_t>(offsets_.size() - 2);
  }

  const Plan& plan_;
  std::vector<Group> groups_;
  std::vector<std::int32_t> group_of_;  // by ModelId.value; -1: unpartitioned
  std::vector<std::uint32_t> sparse_;   // by task, for groups too sparse for a dense range
  std::uint32_t full_ = 0;              // label id of "full"
  std::string chars_;
  std::vector<std::size_t> offsets_{0};
};

Labels::Labels(const Plan& plan, const Graph& g) : plan_(plan), group_of_(g.size(), -1) {
  full_ = add("full");
  const auto start = plan.task_start();
  for (const ModelPlan& mp : plan.models()) {
    const NodeSpec& n = g.node(mp.model);
    if (!n.partitioning || mp.tasks == 0) continue;
    auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& gr) {
      return gr.axis.grain() == n.partitioning->grain && gr.axis.tz() == n.partitioning->tz;
    });
    if (it == groups_.end()) {
      it = groups_.emplace(groups_.end());
      it->axis = detail::Axis(n.partitioning);
    }
    group_of_[mp.model.value] = static_cast<std::int32_t>(it - groups_.begin());
    it->lo = std::min(it->lo, it->axis.index_of(start[mp.first_task]));
    it->hi = std::max(it->hi, it->axis.index_of(start[mp.first_task + mp.tasks - 1]) + 1);
    it->tasks += mp.tasks;
  }
  for (std::size_t k = 0; k < groups_.size(); ++k) {
    Group& gr = groups_[k];
    const auto range = static_cast<std::size_t>(gr.hi - gr.lo);
    if (range <= 4 * gr.tasks + 4096) {
      gr.base = static_cast<std::uint32_t>(offsets_.size() - 1);
      gr.starts.reserve(range + 1);
      for (std::int64_t i = gr.lo; i <= gr.hi; ++i) gr.starts.push_back(gr.axis.start_of(i));
      for (std::int64_t i = gr.lo; i < gr.hi; ++i) (void)add(gr.axis.partition(i).label());
      continue;
    }
    // Tasks spread thinly over a long range (rare): one label per task.
    if (sparse_.empty()) sparse_.assign(plan.task_count(), 0);
    for (const ModelPlan& mp : plan.models()) {
      if (group_of_[mp.model.value] != static_cast<std::int32_t>(k)) continue;
      for (std::uint32_t t = mp.first_task; t < mp.first_task + mp.tasks; ++t) {
        sparse_[t] = add(gr.axis.partition(gr.axis.index_of(start[t])).label());
      }
    }
  }
  (void)checked_offset(chars_.size(), "label bytes");
}

void Labels::ids(std::size_t lo, std::size_t hi, std::uint32_t* out) const {
  const auto model = plan_.task_model();
  const auto start = plan_.task_start();
  const auto parts = plan_.task_partitions();
  // Within a model, a task usually starts where the previous one's partitions end; otherwise
  // (a new model, a gap, a chunk boundary) its index is found by binary search.
  std::int64_t next = -1;
  const Group* prev = nullptr;
  for (std::size_t t = lo; t < hi; ++t) {
    const std::int32_t k = group_of_[model[t].value];
    if (k < 0) {
      out[t] = full_;
      prev = nullptr;
      continue;
    }
    const Group& gr = groups_[static_cast<std::size_t>(k)];
    if (gr.starts.empty()) {
      out[t] = sparse_[t];
      prev = nullptr;
      continue;
    }
    std::int64_t i = next;
    const bool follows = prev == &gr && t > lo && model[t] == model[t - 1] && i >= gr.lo &&
                         i < gr.hi && gr.starts[static_cast<std::size_t>(i - gr.lo)] == start[t];
    if (!follows) {
      const auto pos = std::upper_bound(gr.starts.begin(), gr.starts.end(), start[t]);
      i = gr.lo + (pos - gr.starts.begin()) - 1;
    }
    out[t] = gr.base + static_cast<std::uint32_t>(i - gr.lo);
    next = i + parts[t];
    prev = &gr;
  }
}

}  // namespace

// Columns are allocated up front and filled in parallel chunks of rows; each chunk writes only its
// own rows, so the table is the same whatever the thread count.
arrow::Table task_table(const Plan& plan) {
  using arrow::TypeId;
  const std::size_t n = plan.task_count();
  const Graph& g = plan.graph();
  const auto models = plan.task_model();
  const auto start = plan.task_start();
  const auto end = plan.task_end();
  const auto parts = plan.task_partitions();
  const auto wave = plan.task_wave();
  const auto s0 = plan.sched_start();
  const auto s1 = plan.sched_end();
  const auto dep_offsets = plan.dep_offsets();
  const auto dep_values = plan.dep_values();
  (void)checked_offset(dep_values.size(), "dependencies");

  // model: indices into the planned models' names.
  std::vector<std::int32_t> code(g.size(), -1);
  std::vector<std::string> names;
  for (const ModelPlan& mp : plan.models()) {
    code[mp.model.value] = static_cast<std::int32_t>(names.size());
    names.push_back(g.node(mp.model).name);
  }
  const Labels labels(plan, g);
  bool any_null = false;
  for (const ModelPlan& mp : plan.models())
    any_null |= mp.tasks > 0 && !g.node(mp.model).partitioning;

  auto task_id = allocate<std::int64_t>(n);
  auto model = allocate<std::int32_t>(n);
  auto us0 = allocate<std::int64_t>(n);
  auto us1 = allocate<std::int64_t>(n);
  auto partitions = allocate<std::int32_t>(n);
  auto waves = allocate<std::int32_t>(n);
  auto sched0 = allocate<double>(n);
  auto sched1 = allocate<double>(n);
  auto list_offsets = allocate<std::int32_t>(n + 1);
  auto list_values = allocate<std::int64_t>(dep_values.size());
  std::vector<std::uint32_t> label_id(n);
  detail::parallel_chunks(n, kMinChunk, [&](std::size_t lo, std::size_t hi, std::size_t) {
    auto* id = data_of<std::int64_t>(task_id);
    auto* md = data_of<std::int32_t>(model);
    auto* a = data_of<std::int64_t>(us0);
    auto* b = data_of<std::int64_t>(us1);
    auto* p = data_of<std::int32_t>(partitions);
    auto* w = data_of<std::int32_t>(waves);
    auto* x = data_of<double>(sched0);
    auto* y = data_of<double>(sched1);
    auto* off = data_of<std::int32_t>(list_offsets);
    for (std::size_t i = lo; i < hi; ++i) {
      id[i] = static_cast<std::int64_t>(i);
      md[i] = code[models[i].value];
      a[i] = start[i] == detail::kUnbounded ? 0 : start[i] * 1'000'000;
      b[i] = end[i] == detail::kUnbounded ? 0 : end[i] * 1'000'000;
      p[i] = static_cast<std::int32_t>(parts[i]);
      w[i] = static_cast<std::int32_t>(wave[i]);
      x[i] = s0[i];
      y[i] = s1[i];
      off[i] = static_cast<std::int32_t>(dep_offsets[i]);
    }
    if (hi == n) off[n] = static_cast<std::int32_t>(dep_offsets[n]);
    labels.ids(lo, hi, label_id.data());
  });
  detail::parallel_chunks(dep_values.size(), kMinChunk,
                          [&](std::size_t lo, std::size_t hi, std::size_t) {
                            auto* v = data_of<std::int64_t>(list_values);
                            for (std::size_t i = lo; i < hi; ++i) v[i] = dep_values[i];
                          });

  // label: offsets by a running sum, then the bytes in parallel.
  auto label_offsets = allocate<std::int32_t>(n + 1);
  auto* loff = data_of<std::int32_t>(label_offsets);
  std::size_t bytes = 0;
  loff[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bytes += labels.text(label_id[i]).size();
    loff[i + 1] = checked_offset(bytes, "label bytes");
  }
  auto label_chars = std::make_shared<Bytes>(bytes);
  detail::parallel_chunks(n, kMinChunk, [&](std::size_t lo, std::size_t hi, std::size_t) {
    auto* out = reinterpret_cast<char*>(label_chars->data());
    for (std::size_t i = lo; i < hi; ++i) {
      const std::string_view s = labels.text(label_id[i]);
      std::memcpy(out + loff[i], s.data(), s.size());
    }
  });

  // Validity of start/end: null for the tasks of unpartitioned models.
  std::shared_ptr<Bytes> validity;
  std::int64_t nulls = 0;
  if (any_null) {
    validity = std::make_shared<Bytes>((n + 7) / 8, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (start[i] != detail::kUnbounded) {
        (*validity)[i / 8] = static_cast<std::uint8_t>((*validity)[i / 8] | (1U << (i % 8)));
      } else {
        ++nulls;
      }
    }
  }

  arrow::Table table;
  table.add("task_id", column(arrow::make_type(TypeId::int64), n, std::move(task_id)));
  arrow::Column model_col = column(arrow::make_type(TypeId::int32), n, std::move(model));
  model_col.dictionary = std::make_shared<const arrow::Column>(arrow::utf8_column(names));
  model_col.type.dictionary = std::make_shared<const arrow::DataType>(model_col.dictionary->type);
  table.add("model", std::move(model_col));
  for (auto* buf : {&us0, &us1}) {
    arrow::Column c =
        column(arrow::timestamp_type(arrow::TimeUnit::micro, "UTC"), n, std::move(*buf));
    c.buffers[0] = validity;
    c.null_count = nulls;
    table.add(buf == &us0 ? "start" : "end", std::move(c));
  }
  arrow::Column label = column(arrow::make_type(TypeId::utf8), n, std::move(label_offsets));
  label.buffers.push_back(std::move(label_chars));
  table.add("label", std::move(label));
  table.add("partitions", column(arrow::make_type(TypeId::int32), n, std::move(partitions)));
  table.add("wave", column(arrow::make_type(TypeId::int32), n, std::move(waves)));
  table.add("sched_start", column(arrow::make_type(TypeId::float64), n, std::move(sched0)));
  table.add("sched_end", column(arrow::make_type(TypeId::float64), n, std::move(sched1)));
  arrow::Column deps =
      column(arrow::list_type(arrow::make_type(TypeId::int64)), n, std::move(list_offsets));
  deps.children.push_back(
      column(arrow::make_type(TypeId::int64), dep_values.size(), std::move(list_values)));
  table.add("depends_on", std::move(deps));
  return table;
}

}  // namespace backfill
