#include "lint/lint_dialects.hpp"

#include <fmt/format.h>

#include "backfill/error.hpp"

namespace backfill {

namespace detail::lint {
namespace {

// Bare SQL-standard clock keywords (also accepted with parentheses by most engines).
constexpr std::string_view kStandardClock[] = {"current_date", "current_time", "current_timestamp",
                                               "localtime", "localtimestamp"};
constexpr std::string_view kSnowflakeClock[] = {
    "current_date",   "current_time", "current_timestamp", "localtime",
    "localtimestamp", "sysdate",      "systimestamp"};
constexpr std::string_view kBigQueryClock[] = {"current_date",      "current_time",
                                               "current_timestamp", "current_datetime",
                                               "localtime",         "localtimestamp"};

constexpr FunctionName kClockFunctions[] = {
    {"now"},
    {"today"},
    {"getdate"},
    {"sysdate"},
    {"systimestamp"},
    {"sysdatetime"},
    {"current_datetime"},
    {"transaction_timestamp"},
    {"statement_timestamp"},
    {"clock_timestamp"},
    {"timeofday"},
    {"get_current_timestamp"},
    {"get_current_time"},
    {"current_localtimestamp"},
    {"current_localtime"},
    {"curdate"},
    {"curtime"},
    {"utc_timestamp"},
    {"utc_date"},
    {"unix_timestamp", true},
    {"unix_seconds_now"},
};

constexpr FunctionName kRandomFunctions[] = {
    {"random"},
    {"rand"},
    {"randn"},
    {"random_normal"},
    {"uuid"},
    {"gen_random_uuid"},
    {"newid"},
    {"uuid_string", true},
    {"generate_uuid"},
    {"uuidv4"},
    {"uuidv7"},
    {"uuid_generate_v1"},
    {"uuid_generate_v1mc"},
    {"uuid_generate_v4"},
    {"nextval"},
    {"shuffle"},
    {"monotonically_increasing_id"},
    {"spark_partition_id"},
    {"seq1"},
    {"seq2"},
    {"seq4"},
    {"seq8"},
};

constexpr std::string_view kOrderedAggregates[] = {
    "array_agg",   "string_agg", "listagg",   "group_concat", "collect_list",
    "collect_set", "json_agg",   "jsonb_agg", "xmlagg",       "array_concat_agg"};
constexpr std::string_view kDuckdbOrderedAggregates[] = {
    "array_agg", "string_agg", "listagg", "group_concat", "list", "json_group_array"};

const DialectRules kDuckdb{
    .name = "duckdb",
    .syntax = {.nested_comments = true,
               .dollar_quotes = true,
               .dollar_tags = true,
               .e_strings = true},
    .clock_keywords = kStandardClock,
    .clock_functions = kClockFunctions,
    .random_functions = kRandomFunctions,
    .ordered_aggregates = kDuckdbOrderedAggregates,
    .using_sample = true,
};
const DialectRules kPostgres{
    .name = "postgres",
    .syntax = {.nested_comments = true,
               .dollar_quotes = true,
               .dollar_tags = true,
               .e_strings = true},
    .clock_keywords = kStandardClock,
    .clock_functions = kClockFunctions,
    .random_functions = kRandomFunctions,
    .ordered_aggregates = kOrderedAggregates,
    .special_date_strings = true,
};
const DialectRules kSnowflake{
    .name = "snowflake",
    .syntax = {.dollar_quotes = true, .slash_comments = true, .backslash_escapes = true},
    .clock_keywords = kSnowflakeClock,
    .clock_functions = kClockFunctions,
    .random_functions = kRandomFunctions,
    .ordered_aggregates = kOrderedAggregates,
    .sequence_nextval = true,
    .bare_sample = true,
};
const DialectRules kBigQuery{
    .name = "bigquery",
    .syntax = {.backtick_names = true,
               .double_quote_strings = true,
               .hash_comments = true,
               .backslash_escapes = true,
               .triple_quotes = true},
    .clock_keywords = kBigQueryClock,
    .clock_functions = kClockFunctions,
    .random_functions = kRandomFunctions,
    .ordered_aggregates = kOrderedAggregates,
};
const DialectRules kSpark{
    .name = "spark",
    .syntax = {.backtick_names = true,
               .double_quote_strings = true,
               .nested_comments = true,
               .backslash_escapes = true},
    .clock_keywords = kStandardClock,
    .clock_functions = kClockFunctions,
    .random_functions = kRandomFunctions,
    .ordered_aggregates = kOrderedAggregates,
};

}  // namespace

const DialectRules& rules_for(Dialect d) noexcept {
  switch (d) {
    case Dialect::duckdb: return kDuckdb;
    case Dialect::postgres: return kPostgres;
    case Dialect::snowflake: return kSnowflake;
    case Dialect::bigquery: return kBigQuery;
    case Dialect::spark: return kSpark;
  }
  return kDuckdb;
}

}  // namespace detail::lint

Dialect parse_dialect(std::string_view name) {
  if (name == "duckdb") return Dialect::duckdb;
  if (name == "postgres" || name == "postgresql") return Dialect::postgres;
  if (name == "snowflake") return Dialect::snowflake;
  if (name == "bigquery") return Dialect::bigquery;
  if (name == "spark" || name == "databricks") return Dialect::spark;
  throw InvalidInput(fmt::format(
      "unknown SQL dialect '{}'; expected one of duckdb, postgres, snowflake, bigquery, spark",
      name));
}

std::string_view to_string(Dialect d) noexcept { return detail::lint::rules_for(d).name; }

}  // namespace backfill
