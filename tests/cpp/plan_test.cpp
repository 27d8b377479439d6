#include "backfill/plan.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <queue>
#include <random>
#include <set>

#include "backfill/arrow.hpp"
#include "backfill/error.hpp"
#include "backfill/select.hpp"
#include "plan/axis.hpp"
#include "plan/plan_internal.hpp"

namespace {

using backfill::Grain;
using backfill::Mapping;
using backfill::MappingKind;
using backfill::NodeSpec;
using backfill::Partitioning;
using backfill::Seconds;

constexpr Seconds kDay = 86400;
const Seconds kAug1 = backfill::days_from_civil(2026, 8, 1) * kDay;
const Seconds kOct29 = backfill::days_from_civil(2026, 10, 29) * kDay;
const Seconds kNov30 = backfill::days_from_civil(2026, 11, 30) * kDay;

NodeSpec model(std::string name, std::optional<Grain> grain,
               std::vector<std::pair<std::string, Mapping>> parents = {}) {
  NodeSpec n;
  n.name = std::move(name);
  n.event_time = "at";
  if (grain) {
    n.partitioning = Partitioning{*grain, {}, {}};
  } else {
    n.strategy = backfill::Strategy::full;
  }
  for (auto& [p, m] : parents) n.depends_on.push_back({p, m});
  return n;
}

std::shared_ptr<const backfill::Graph> shop() {
  return std::make_shared<const backfill::Graph>(std::vector<NodeSpec>{
      model("clean_orders", Grain::day),
      model("clean_order_items", Grain::day),
      model("fct_daily_sales", Grain::day, {{"clean_orders", {}}, {"clean_order_items", {}}}),
      model("fct_monthly_sales", Grain::month, {{"fct_daily_sales", {}}}),
      model("fct_sales_7d", Grain::day, {{"fct_daily_sales", Mapping{MappingKind::window, -6, 0}}}),
  });
}

backfill::PlanRequest request(const backfill::Graph& g, std::string_view selector) {
  backfill::PlanRequest r;
  r.selected = backfill::select(g, selector);
  r.start = kAug1;
  r.end = kOct29;
  r.as_of = kNov30;
  return r;
}

TEST(Axis, FastPathMatchesTheCalendarTable) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<Seconds> instant(-5'000'000'000, 5'000'000'000);
  for (Grain g :
       {Grain::hour, Grain::day, Grain::week, Grain::month, Grain::quarter, Grain::year}) {
    const backfill::detail::Axis fast(Partitioning{g, {}, {}});
    const backfill::detail::Axis table(Partitioning{g, {}, {}}, /*force_table=*/true);
    ASSERT_TRUE(fast.fast());
    ASSERT_FALSE(table.fast());
    for (int i = 0; i < 300; ++i) {
      const Seconds t = instant(rng) / (g == Grain::hour ? 1000 : 1);  // keep hour tables small
      const auto p = backfill::partition_of(t, g);
      const auto k = fast.index_of(t);
      ASSERT_EQ(fast.start_of(k), p.start()) << backfill::to_string(g) << " " << t;
      ASSERT_EQ(fast.start_of(k + 1), p.end());
      ASSERT_EQ(table.start_of(table.index_of(t)), p.start());
      ASSERT_EQ(table.start_of(table.index_of(t) + 1), p.end());
    }
  }
}

TEST(Axis, OtherZonesFollowTheCalendar) {
  const auto berlin = backfill::TimeZone::locate("Europe/Berlin");
  const backfill::detail::Axis axis(Partitioning{Grain::hour, berlin, {}});
  const Seconds oct25 = backfill::days_from_civil(2026, 10, 25) * kDay;
  const auto span = axis.covering(oct25 - 2 * 3600, oct25 + 23 * 3600);  // the Berlin day
  EXPECT_EQ(span.size(), 25);                                            // fall-back: 25 hours
  for (auto i = span.lo; i < span.hi; ++i) {
    EXPECT_EQ(axis.partition(i).start(), axis.start_of(i));
    EXPECT_EQ(axis.partition(i).end(), axis.start_of(i + 1));
  }
}

TEST(Plan, ShopCountsAndExactDependencies) {
  const auto g = shop();
  const auto plan = backfill::plan(g, request(*g, "fct_daily_sales+"));
  ASSERT_EQ(plan.models().size(), 3u);
  EXPECT_EQ(plan.models()[0].partitions, 89);
  EXPECT_EQ(plan.models()[1].partitions, 3);
  EXPECT_EQ(plan.models()[2].partitions, 95);
  EXPECT_EQ(plan.task_count(), 187u);
  EXPECT_TRUE(plan.ok());
  EXPECT_TRUE(plan.findings().empty());
  // Monthly August (task 89) reads the 31 August days; the rolling 10 Aug (task 92 + 9) reads
  // 4..10 Aug (tasks 3..9).
  const auto aug = plan.depends_on(89);
  ASSERT_EQ(aug.size(), 31u);
  EXPECT_EQ(aug.front(), 0u);
  EXPECT_EQ(aug.back(), 30u);
  const auto rolling = plan.depends_on(92 + 9);
  EXPECT_EQ(std::vector<std::uint32_t>(rolling.begin(), rolling.end()),
            (std::vector<std::uint32_t>{3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(plan.task_label(186), "2026-11-03");
  EXPECT_EQ(plan.wave_count(), 2u);
}

TEST(Plan, ScheduleRespectsDependenciesAndConcurrency) {
  const auto g = shop();
  auto r = request(*g, "+fct_daily_sales+");
  r.concurrency = 3;
  r.cost_per_partition.assign(g->size(), -1);
  r.cost_per_partition[g->find("fct_daily_sales")->value] = 4;
  const auto plan = backfill::plan(g, r);
  for (std::uint32_t t = 0; t < plan.task_count(); ++t) {
    for (auto d : plan.depends_on(t)) {
      ASSERT_LT(d, t);
      ASSERT_GE(plan.sched_start()[t], plan.sched_end()[d]);
    }
    int running = 0;
    for (std::uint32_t u = 0; u < plan.task_count(); ++u) {
      running += plan.sched_start()[u] <= plan.sched_start()[t] &&
                 plan.sched_start()[t] < plan.sched_end()[u];
    }
    ASSERT_LE(running, 3);
  }
  EXPECT_DOUBLE_EQ(plan.schedule().total_work, 89 * 2 + 89 * 4 + 3 + 95);
  EXPECT_GE(plan.schedule().makespan, plan.schedule().total_work / 3);
  const auto slower = plan.rescheduled(r.cost_per_partition, 1.0, 1);
  EXPECT_DOUBLE_EQ(slower.schedule().makespan, slower.schedule().total_work);
  EXPECT_THROW((void)plan.rescheduled({}, 1.0, 0), backfill::InvalidInput);
}

TEST(Plan, ClipReportsStalePartitions) {
  const auto g = shop();
  auto r = request(*g, "fct_daily_sales+");
  r.propagate = backfill::Propagate::clip;
  const auto plan = backfill::plan(g, r);
  EXPECT_EQ(plan.models()[2].partitions, 89);
  ASSERT_EQ(plan.findings().size(), 1u);
  EXPECT_EQ(plan.findings()[0].code, "CLIPPED_IMPACT");
  EXPECT_NE(plan.findings()[0].message.find("6 partitions 2026-10-29..2026-11-03"),
            std::string::npos);
}

TEST(Plan, UnpartitionedFullModelRunsOnceAfterEverything) {
  const auto g = std::make_shared<const backfill::Graph>(
      std::vector<NodeSpec>{model("a", Grain::day), model("m", Grain::month, {{"a", {}}}),
                            model("full", std::nullopt, {{"a", {}}, {"m", {}}})});
  auto r = request(*g, "a+");
  r.end = r.start + 3 * kDay;
  const auto plan = backfill::plan(g, r);
  ASSERT_EQ(plan.task_count(), 5u);
  const auto deps = plan.depends_on(4);
  EXPECT_EQ(std::vector<std::uint32_t>(deps.begin(), deps.end()),
            (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.task_label(4), "full");
  EXPECT_EQ(plan.findings().at(0).code, "FULL_REBUILD");
}

TEST(Plan, BadRequests) {
  const auto g = shop();
  auto r = request(*g, "fct_daily_sales");
  r.end = r.start;
  EXPECT_THROW((void)backfill::plan(g, r), backfill::InvalidInput);
  r = request(*g, "fct_daily_sales");
  r.partitions_per_run = 0;
  EXPECT_THROW((void)backfill::plan(g, r), backfill::InvalidInput);
  r = request(*g, "fct_daily_sales");
  r.concurrency = 0;
  EXPECT_THROW((void)backfill::plan(g, r), backfill::InvalidInput);
  EXPECT_THROW((void)backfill::parse_propagate("spread"), backfill::InvalidInput);
}

}  // namespace

namespace {

// Every row of the task table against the plan's own columns (labels formatted one by one).
void expect_table_matches(const backfill::Plan& plan) {
  const backfill::arrow::Table table = backfill::task_table(plan);
  ASSERT_EQ(table.num_rows(), static_cast<std::int64_t>(plan.task_count()));
  const auto label = table.column("label").view();
  const auto start = table.column("start").view();
  const auto deps = table.column("depends_on").view();
  for (std::uint32_t t = 0; t < plan.task_count(); ++t) {
    EXPECT_EQ(label.bytes_at(t), plan.task_label(t)) << "task " << t;
    if (plan.task_start()[t] == backfill::detail::kUnbounded) {
      EXPECT_FALSE(start.is_valid(t));
    } else {
      EXPECT_EQ(start.template values<std::int64_t>(1)[t], plan.task_start()[t] * 1'000'000);
    }
    const auto* list = deps.values<std::int32_t>(1);
    const auto* ids = deps.children[0].values<std::int64_t>(1);
    const auto want = plan.depends_on(t);
    ASSERT_EQ(static_cast<std::size_t>(list[t + 1] - list[t]), want.size());
    for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(ids[list[t] + k], want[k]);
  }
}

}  // namespace

// Mixed grains and zones; "far" reads 20,000 days ahead, so its impacted days lie decades before
// its parent's: one (day, UTC) label range with a wide gap (the table's sparse path).
std::shared_ptr<const backfill::Graph> mixed() {
  const auto berlin = backfill::TimeZone::locate("Europe/Berlin");
  auto zoned = [&](NodeSpec n) {
    if (n.partitioning) n.partitioning->tz = berlin;
    return n;
  };
  return std::make_shared<const backfill::Graph>(std::vector<NodeSpec>{
      model("daily", Grain::day),
      zoned(model("hourly_berlin", Grain::hour, {{"daily", {}}})),
      zoned(model("daily_berlin", Grain::day, {{"hourly_berlin", {}}})),
      model("monthly", Grain::month, {{"daily", {}}}),
      model("full", std::nullopt, {{"monthly", {}}}),
      model("far", Grain::day, {{"daily", Mapping{MappingKind::window, 20000, 20000}}}),
  });
}

TEST(TaskTable, MatchesThePlanAcrossZonesGrainsRunsAndGaps) {
  const auto g = mixed();
  for (std::uint32_t k : {1u, 5u}) {
    backfill::PlanRequest r = request(*g, "*");
    r.start = backfill::days_from_civil(2022, 1, 1) * kDay;  // enough rows for parallel chunks
    r.partitions_per_run = k;
    const backfill::Plan plan = backfill::plan(g, r);
    ASSERT_GT(plan.task_count(), k == 1 ? 40'000u : 8'000u);
    expect_table_matches(plan);
  }
}

// The list schedule against a plain reference: bottom levels, an ordered set of ready tasks
// (level descending, then id) and a heap of running tasks. Fractional costs make levels span
// many bits, so the planner's radix ranking takes several passes.
TEST(Plan, ScheduleMatchesAReferenceListScheduler) {
  const auto g = mixed();
  backfill::PlanRequest r = request(*g, "*");
  r.start = backfill::days_from_civil(2025, 1, 1) * kDay;
  r.concurrency = 3;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> seconds(0.05, 90.0);
  for (std::uint32_t m = 0; m < g->size(); ++m) r.cost_per_partition.push_back(seconds(rng));
  // A fixed cost per task on some models, and one model batched by 3 (automatic batching).
  r.task_overhead = {0.0, 2.5, 0.0, 7.0};
  r.runs_by_model = {0, 0, 0, 3};
  const backfill::Plan plan = backfill::plan(g, r);
  const std::size_t n = plan.task_count();
  ASSERT_GT(n, 15'000u);
  auto cost = [&](std::size_t t) {
    const std::uint32_t m = plan.task_model()[t].value;
    return (m < r.task_overhead.size() ? r.task_overhead[m] : 0.0) +
           r.cost_per_partition[m] * plan.task_partitions()[t];
  };
  std::vector<double> level(n, 0);
  std::vector<std::vector<std::uint32_t>> succ(n);
  std::vector<std::uint32_t> waiting(n);
  for (std::size_t t = n; t-- > 0;) {
    level[t] += cost(t);
    for (auto d : plan.depends_on(static_cast<std::uint32_t>(t)))
      level[d] = std::max(level[d], level[t]);
  }
  for (std::uint32_t t = 0; t < n; ++t) {
    waiting[t] = static_cast<std::uint32_t>(plan.depends_on(t).size());
    for (auto d : plan.depends_on(t)) succ[d].push_back(t);
  }
  std::set<std::pair<double, std::uint32_t>> ready;  // (-level, id)
  for (std::uint32_t t = 0; t < n; ++t) {
    if (waiting[t] == 0) ready.insert({-level[t], t});
  }
  using Run = std::pair<double, std::uint32_t>;  // (finish, id), earliest first
  std::priority_queue<Run, std::vector<Run>, std::greater<>> running;
  std::vector<double> start(n), end(n);
  double now = 0;
  for (std::size_t done = 0; done < n;) {
    while (running.size() < r.concurrency && !ready.empty()) {
      const std::uint32_t t = ready.begin()->second;
      ready.erase(ready.begin());
      start[t] = now;
      end[t] = now + cost(t);
      running.push({end[t], t});
    }
    now = running.top().first;
    while (!running.empty() && running.top().first <= now) {
      const std::uint32_t t = running.top().second;
      running.pop();
      ++done;
      for (auto s : succ[t]) {
        if (--waiting[s] == 0) ready.insert({-level[s], s});
      }
    }
  }
  for (std::size_t t = 0; t < n; ++t) {
    ASSERT_EQ(plan.sched_start()[t], start[t]) << "task " << t;
    ASSERT_EQ(plan.sched_end()[t], end[t]) << "task " << t;
  }
  EXPECT_EQ(plan.schedule().makespan, *std::max_element(end.begin(), end.end()));
  // The critical path starts at the highest level and follows it down to a sink.
  const auto& path = plan.schedule().critical_path;
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(level[path.front()], *std::max_element(level.begin(), level.end()));
  for (std::size_t k = 1; k < path.size(); ++k) {
    EXPECT_DOUBLE_EQ(level[path[k - 1]], cost(path[k - 1]) + level[path[k]]);
  }
  EXPECT_TRUE(succ[path.back()].empty());
}

namespace {

// A yearly and a monthly model over a daily one, planned for 25 Mar .. 16 Apr 2026 as of the
// 16th: April and 2026 are in progress (started, not ended).
backfill::PlanRequest in_progress_request(const backfill::Graph& g, bool include) {
  backfill::PlanRequest r;
  r.selected = backfill::select(g, "daily+");
  r.start = backfill::days_from_civil(2026, 3, 25) * kDay;
  r.end = backfill::days_from_civil(2026, 4, 16) * kDay;
  r.as_of = r.end;
  r.propagate = backfill::Propagate::clip;
  r.include_in_progress = include;
  return r;
}

}  // namespace

TEST(Plan, APartitionInProgressIsLeftStaleOrIncluded) {
  const auto g = std::make_shared<const backfill::Graph>(std::vector<NodeSpec>{
      model("daily", Grain::day), model("monthly", Grain::month, {{"daily", {}}}),
      model("yearly", Grain::year, {{"daily", {}}})});
  const auto left = backfill::plan(g, in_progress_request(*g, false));
  ASSERT_EQ(left.models().size(), 3u);
  EXPECT_EQ(left.models()[0].partitions, 22);
  EXPECT_EQ(left.models()[1].partitions, 1);  // March; April runs on
  EXPECT_EQ(left.models()[2].partitions, 0);
  std::set<std::string> stale;
  for (const auto& f : left.findings()) {
    if (f.code == "STALE_DOWNSTREAM") {
      EXPECT_EQ(f.severity, backfill::Severity::warning);
      stale.insert(f.model);
    }
  }
  EXPECT_EQ(stale, (std::set<std::string>{"monthly", "yearly"}));

  const auto kept = backfill::plan(g, in_progress_request(*g, true));
  EXPECT_EQ(kept.models()[1].partitions, 2);
  ASSERT_EQ(kept.models()[2].tasks, 1u);
  const auto year = kept.models()[2].first_task;
  EXPECT_EQ(kept.task_start()[year], backfill::days_from_civil(2026, 1, 1) * kDay);
  EXPECT_EQ(kept.task_end()[year], backfill::days_from_civil(2027, 1, 1) * kDay);
  EXPECT_EQ(kept.depends_on(year).size(), 22u);
  for (const auto& f : kept.findings()) EXPECT_NE(f.code, "STALE_DOWNSTREAM") << f.message;
}

TEST(Plan, PartitionsPerRunByModelAndTaskOverhead) {
  const auto g = shop();
  backfill::PlanRequest r = request(*g, "fct_daily_sales+");
  const std::uint32_t daily = g->at("fct_daily_sales").value;
  r.runs_by_model.assign(g->size(), 0);
  r.runs_by_model[daily] = 30;  // 89 days: 30 + 30 + 29
  r.cost_per_partition.assign(g->size(), 0.01);
  r.task_overhead.assign(g->size(), 0.0);
  r.task_overhead[daily] = 0.5;
  const backfill::Plan plan = backfill::plan(g, r);
  for (const auto& mp : plan.models()) {
    if (mp.model.value == daily) {
      EXPECT_EQ(mp.tasks, 3u);
      EXPECT_EQ(mp.partitions_per_run, 30u);
      EXPECT_DOUBLE_EQ(mp.task_overhead, 0.5);
      EXPECT_NEAR(mp.work, 3 * 0.5 + 89 * 0.01, 1e-9);
      for (std::uint32_t t = mp.first_task; t < mp.first_task + mp.tasks; ++t) {
        EXPECT_NEAR(plan.sched_end()[t] - plan.sched_start()[t],
                    0.5 + 0.01 * plan.task_partitions()[t], 1e-9);
      }
    } else {
      EXPECT_EQ(mp.tasks, mp.partitions);  // one partition per task elsewhere
      EXPECT_EQ(mp.partitions_per_run, 1u);
    }
  }
  // Rescheduling keeps the tasks and takes new overheads.
  const backfill::Plan again = plan.rescheduled(r.cost_per_partition, 1.0, 2, {});
  EXPECT_EQ(again.task_count(), plan.task_count());
  EXPECT_LT(again.schedule().total_work, plan.schedule().total_work);
}

TEST(Plan, TaskSizesScaleEachTaskAndAreChecked) {
  const auto g = shop();
  backfill::PlanRequest r = request(*g, "fct_daily_sales");
  r.cost_per_partition.assign(g->size(), 0.5);
  r.task_overhead.assign(g->size(), 0.25);
  r.concurrency = 1;
  const backfill::Plan plan = backfill::plan(g, r);
  const auto n = static_cast<std::uint32_t>(plan.task_count());
  ASSERT_GT(n, 2u);
  EXPECT_DOUBLE_EQ(plan.task_size(0), plan.task_partitions()[0]);
  // One task (a Black Friday) is 20 typical partitions, another is empty: one slot runs all.
  std::vector<double> sizes(n, 1.0);
  sizes[1] = 20.0;
  sizes[2] = 0.0;
  const auto sized = plan.rescheduled(r.cost_per_partition, 1.0, 1, r.task_overhead, sizes);
  EXPECT_DOUBLE_EQ(sized.task_size(1), 20.0);
  EXPECT_NEAR(sized.sched_end()[1] - sized.sched_start()[1], 0.25 + 20 * 0.5, 1e-9);
  EXPECT_NEAR(sized.sched_end()[2] - sized.sched_start()[2], 0.25, 1e-9);
  EXPECT_NEAR(sized.schedule().total_work, n * 0.25 + (n - 2 + 20) * 0.5, 1e-9);
  EXPECT_NEAR(sized.schedule().makespan, sized.schedule().total_work, 1e-9);
  // Without sizes: the partition counts again.
  const auto plain = sized.rescheduled(r.cost_per_partition, 1.0, 1, r.task_overhead);
  EXPECT_NEAR(plain.schedule().total_work, plan.schedule().total_work, 1e-9);
  // A negative size: the task's partitions.
  sizes.assign(n, -1.0);
  const auto negative = plan.rescheduled(r.cost_per_partition, 1.0, 1, r.task_overhead, sizes);
  EXPECT_NEAR(negative.schedule().total_work, plan.schedule().total_work, 1e-9);
  EXPECT_THROW((void)plan.rescheduled({}, 1.0, 1, {}, {1.0}), backfill::InvalidInput);
  sizes[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW((void)plan.rescheduled({}, 1.0, 1, {}, sizes), backfill::InvalidInput);
  sizes[0] = std::numeric_limits<double>::infinity();
  EXPECT_THROW((void)plan.rescheduled({}, 1.0, 1, {}, sizes), backfill::InvalidInput);
}
