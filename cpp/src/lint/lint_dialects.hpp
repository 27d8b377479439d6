// What each dialect means by its names: lexical syntax and the functions that read the clock or
// randomness. Function names that read the clock or randomness wherever they exist (now(),
// random(), uuid(), ...) are flagged in every dialect: a user function called today() reads the
// clock too, and a missed clock read silently corrupts a backfill while a false finding costs one
// suppression with a reason. Dialect tables add what only makes sense there: bare keywords
// (Snowflake's sysdate, BigQuery's current_datetime), Postgres' 'now'::timestamp, Snowflake's
// seq.nextval, DuckDB's USING SAMPLE, and the lexical rules (quotes, comments, dollar strings).
#pragma once

#include <span>
#include <string_view>

#include "backfill/lint.hpp"
#include "lint/sql_tokenizer.hpp"

namespace backfill::detail::lint {

struct FunctionName {
  std::string_view name;
  bool zero_args_only = false;  // unix_timestamp(x) converts; unix_timestamp() reads the clock
};

struct DialectRules {
  std::string_view name;
  sql::Syntax syntax;
  std::span<const std::string_view> clock_keywords;      // flagged bare or called: current_date
  std::span<const FunctionName> clock_functions;         // flagged when called: now()
  std::span<const FunctionName> random_functions;        // random(), uuid(), nextval()
  std::span<const std::string_view> ordered_aggregates;  // array_agg: element order
  bool special_date_strings = false;                     // Postgres: 'now'::timestamp, date 'today'
  bool sequence_nextval = false;                         // Snowflake: my_seq.nextval
  bool using_sample = false;                             // DuckDB: USING SAMPLE 10%
  bool bare_sample = false;                              // Snowflake: FROM t SAMPLE (10)
};

[[nodiscard]] const DialectRules& rules_for(Dialect d) noexcept;

// Window functions whose result depends on row order (rank() without ORDER BY is all ties, so it
// is deterministic and not listed).
inline constexpr std::string_view kOrderedWindows[] = {
    "row_number", "ntile", "lag", "lead", "first_value", "last_value", "nth_value"};

// Functions that sort their argument, so an unordered aggregate inside them is fine.
inline constexpr std::string_view kSortingFunctions[] = {"array_sort", "list_sort", "sort_array",
                                                         "array_reverse_sort", "list_reverse_sort"};

// Jinja (dbt) calls that read the clock: modules.datetime.datetime.now(), dbt.current_timestamp().
inline constexpr std::string_view kJinjaClockCalls[] = {"now",
                                                        "utcnow",
                                                        "today",
                                                        "current_timestamp",
                                                        "current_timestamp_backcompat",
                                                        "current_timestamp_in_utc_backcompat",
                                                        "snapshot_get_time"};

}  // namespace backfill::detail::lint
