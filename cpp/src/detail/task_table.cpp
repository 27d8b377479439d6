// Plan -> Arrow task table. Buffers are filled straight from the plan's columns.
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "backfill/arrow.hpp"
#include "backfill/error.hpp"
#include "backfill/plan.hpp"
#include "detail/plan_internal.hpp"

namespace backfill {

namespace {

using Bytes = std::vector<std::uint8_t>;

template <class T>
std::shared_ptr<const Bytes> buffer(std::size_t n, auto&& fill) {
  auto out = std::make_shared<Bytes>(n * sizeof(T));
  fill(reinterpret_cast<T*>(out->data()));
  return out;
}

template <class T>
arrow::Column fixed(arrow::DataType type, std::size_t n, auto&& value) {
  arrow::Column c;
  c.type = std::move(type);
  c.length = static_cast<std::int64_t>(n);
  c.buffers = {nullptr, buffer<T>(n, [&](T* out) {
                 for (std::size_t i = 0; i < n; ++i) out[i] = value(i);
               })};
  return c;
}

arrow::Column utf8(const std::vector<std::string>& values) { return arrow::utf8_column(values); }

std::int32_t checked_offset(std::size_t n, std::string_view what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidInput(fmt::format("the task table's {} exceed 2^31 entries", what));
  }
  return static_cast<std::int32_t>(n);
}

}  // namespace

arrow::Table task_table(const Plan& plan) {
  using arrow::TypeId;
  const std::size_t n = plan.task_count();
  const Graph& g = plan.graph();
  arrow::Table table;

  table.add("task_id", fixed<std::int64_t>(arrow::make_type(TypeId::int64), n,
                                           [](std::size_t i) { return static_cast<std::int64_t>(i); }));

  // model: indices into the planned models' names.
  std::vector<std::int32_t> code(g.size(), -1);
  std::vector<std::string> names;
  for (const ModelPlan& mp : plan.models()) {
    code[mp.model.value] = static_cast<std::int32_t>(names.size());
    names.push_back(g.node(mp.model).name);
  }
  const auto models = plan.task_model();
  arrow::Column model = fixed<std::int32_t>(arrow::make_type(TypeId::int32), n,
                                            [&](std::size_t i) { return code[models[i].value]; });
  model.dictionary = std::make_shared<const arrow::Column>(utf8(names));
  model.type.dictionary = std::make_shared<const arrow::DataType>(model.dictionary->type);
  table.add("model", std::move(model));

  // start/end in microseconds, null for unpartitioned models.
  std::vector<bool> valid(n, true);
  bool any_null = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (plan.task_start()[i] == detail::kUnbounded) valid[i] = false, any_null = true;
  }
  if (!any_null) valid.clear();
  for (const char* name : {"start", "end"}) {
    const auto src = std::string_view(name) == "start" ? plan.task_start() : plan.task_end();
    std::vector<std::int64_t> us(n);
    for (std::size_t i = 0; i < n; ++i) {
      us[i] = src[i] == detail::kUnbounded ? 0 : src[i] * 1'000'000;
    }
    table.add(name, arrow::timestamp_column(std::move(us), arrow::TimeUnit::micro, "UTC", valid));
  }

  // label: one string buffer and int32 offsets.
  {
    std::string chars;
    chars.reserve(n * 10);
    auto offsets = std::make_shared<Bytes>((n + 1) * sizeof(std::int32_t));
    auto* offs = reinterpret_cast<std::int32_t*>(offsets->data());
    offs[0] = 0;
    for (std::size_t i = 0; i < n; ++i) {
      chars += plan.task_label(static_cast<std::uint32_t>(i));
      offs[i + 1] = checked_offset(chars.size(), "label bytes");
    }
    arrow::Column label;
    label.type = arrow::make_type(TypeId::utf8);
    label.length = static_cast<std::int64_t>(n);
    label.buffers = {nullptr, std::move(offsets),
                     std::make_shared<const Bytes>(chars.begin(), chars.end())};
    table.add("label", std::move(label));
  }

  const auto parts = plan.task_partitions();
  const auto wave = plan.task_wave();
  table.add("partitions", fixed<std::int32_t>(arrow::make_type(TypeId::int32), n, [&](std::size_t i) {
              return static_cast<std::int32_t>(parts[i]);
            }));
  table.add("wave", fixed<std::int32_t>(arrow::make_type(TypeId::int32), n,
                                        [&](std::size_t i) { return static_cast<std::int32_t>(wave[i]); }));
  const auto s0 = plan.sched_start();
  const auto s1 = plan.sched_end();
  table.add("sched_start", fixed<double>(arrow::make_type(TypeId::float64), n,
                                         [&](std::size_t i) { return s0[i]; }));
  table.add("sched_end", fixed<double>(arrow::make_type(TypeId::float64), n,
                                       [&](std::size_t i) { return s1[i]; }));

  // depends_on: the plan's CSR is already the list layout.
  {
    const auto offsets = plan.dep_offsets();
    const auto values = plan.dep_values();
    (void)checked_offset(values.size(), "dependencies");
    arrow::Column deps;
    deps.type = arrow::list_type(arrow::make_type(TypeId::int64));
    deps.length = static_cast<std::int64_t>(n);
    deps.buffers = {nullptr, buffer<std::int32_t>(n + 1, [&](std::int32_t* out) {
                      for (std::size_t i = 0; i <= n; ++i) out[i] = static_cast<std::int32_t>(offsets[i]);
                    })};
    deps.children.push_back(fixed<std::int64_t>(arrow::make_type(TypeId::int64), values.size(),
                                                [&](std::size_t i) {
                                                  return static_cast<std::int64_t>(values[i]);
                                                }));
    table.add("depends_on", std::move(deps));
  }
  return table;
}

}  // namespace backfill
