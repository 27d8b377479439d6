// The lint core: tokenizer tiling and contexts, positions (lines, code-point columns), each rule
// firing on real-looking models and staying silent on strings, comments and quoted names.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "backfill/error.hpp"
#include "backfill/lint.hpp"

namespace {

using backfill::Dialect;
using backfill::LintOptions;
using backfill::Rule;

// (code, line, column, text) of the active findings.
using Hit = std::tuple<std::string, std::size_t, std::size_t, std::string>;

std::vector<Hit> hits(std::string_view sql, LintOptions opt = {}) {
  std::vector<Hit> out;
  for (const auto& f : backfill::lint(sql, opt).findings) {
    if (!f.suppressed) out.emplace_back(std::string(to_string(f.rule)), f.line, f.column, f.text);
  }
  return out;
}

LintOptions dialect(Dialect d) {
  LintOptions o;
  o.dialect = d;
  return o;
}

void expect_tiles(std::string_view sql, Dialect d) {
  const auto toks = backfill::tokenize(sql, d);
  std::size_t pos = 0;
  for (const auto& t : toks) {
    ASSERT_EQ(t.offset, pos) << "gap or overlap before token " << t.kind << " in: " << sql;
    ASSERT_GT(t.length, 0U);
    pos += t.length;
  }
  EXPECT_EQ(pos, sql.size());
}

std::vector<std::string> kinds(std::string_view sql, Dialect d = Dialect::duckdb) {
  std::vector<std::string> out;
  for (const auto& t : backfill::tokenize(sql, d)) {
    if (t.kind != "whitespace" && t.kind != "jinja_whitespace") out.emplace_back(t.kind);
  }
  return out;
}

TEST(LintTokenizer, TilesTrickyInput) {
  for (const Dialect d : {Dialect::duckdb, Dialect::postgres, Dialect::snowflake, Dialect::bigquery,
                          Dialect::spark}) {
    for (std::string_view sql :
         {"select 'it''s', \"a\"\"b\", `x`, $$a$$, $t$b$t$, E'\\'', /* /* */ */ 1 -- c\n",
          "{{ \"}}\" }} {% if x %}{{ {'a': {'b': 1}} }}{% endif %}{# {{ #} '{{ y }}'",
          "'unterminated {{ x", "/* open", "{% raw %}{{ not jinja }}{% endraw %}",
          "\xff\xfe\x00\x01 select", "$1 ${var} :name @p ? a::int -> ->> => '''x''' \r\n\r"}) {
      expect_tiles(sql, d);
    }
  }
}

TEST(LintTokenizer, JinjaStringsAndBracketsDoNotEndABlock) {
  EXPECT_EQ(kinds("{{ '}}' ~ x }}"),
            (std::vector<std::string>{"jinja_open", "jinja_string", "jinja_symbol", "jinja_name",
                                      "jinja_close"}));
  EXPECT_EQ(kinds("{{ {'a': 1}}}"),
            (std::vector<std::string>{"jinja_open", "jinja_symbol", "jinja_string", "jinja_symbol",
                                      "jinja_number", "jinja_symbol", "jinja_close"}));
  // A Jinja block inside a SQL string splits the string into fragments around it.
  EXPECT_EQ(kinds("'{{ x }}'"), (std::vector<std::string>{"string", "jinja_open", "jinja_name",
                                                          "jinja_close", "string"}));
  EXPECT_EQ(kinds("{# now() #}"),
            (std::vector<std::string>{"jinja_open", "jinja_comment_text", "jinja_close"}));
}

TEST(LintTokenizer, DialectLexicalRules) {
  // Nested block comments: Postgres/DuckDB/Spark nest, Snowflake/BigQuery end at the first */.
  EXPECT_EQ(kinds("/* a /* b */ c */ x"), (std::vector<std::string>{"comment", "word"}));
  EXPECT_EQ(kinds("/* a /* b */ c */ x", Dialect::snowflake),
            (std::vector<std::string>{"comment", "word", "symbol", "symbol", "word"}));
  // Double quotes: a name in Postgres, a string in BigQuery; backticks are names there.
  EXPECT_EQ(kinds("\"x\" `y`", Dialect::postgres),
            (std::vector<std::string>{"quoted_name", "symbol", "word", "symbol"}));
  EXPECT_EQ(kinds("\"x\" `y`", Dialect::bigquery),
            (std::vector<std::string>{"string", "quoted_name"}));
  // Dollar tags in Postgres; Snowflake has only $$.
  EXPECT_EQ(kinds("$fn$ now() $fn$", Dialect::postgres), (std::vector<std::string>{"string"}));
  EXPECT_EQ(kinds("$$ now() $$", Dialect::snowflake), (std::vector<std::string>{"string"}));
  EXPECT_EQ(kinds("# c\nx // d", Dialect::bigquery),
            (std::vector<std::string>{"comment", "word", "symbol", "word"}));
  EXPECT_EQ(kinds("x // d", Dialect::snowflake), (std::vector<std::string>{"word", "comment"}));
  // Backslash escapes: Snowflake yes, DuckDB only in E'' strings.
  EXPECT_EQ(kinds("'a\\' now()", Dialect::snowflake), (std::vector<std::string>{"string"}));
  EXPECT_EQ(kinds("'a\\' x"), (std::vector<std::string>{"string", "word"}));
  EXPECT_EQ(kinds("E'a\\' x'"), (std::vector<std::string>{"string"}));
  // Snowflake's col:field is a path, :name after whitespace a parameter.
  EXPECT_EQ(kinds("c:f = :p", Dialect::snowflake),
            (std::vector<std::string>{"word", "symbol", "word", "symbol", "parameter"}));
}

TEST(LintPositions, CodePointColumnsAndLineEnds) {
  // Lines end at \r\n, a lone \r and \n; é (2 bytes), € (3 bytes) and the invalid byte 0xFF
  // each count one column.
  const auto toks = backfill::tokenize("a\r\nb\rc\n\xc3\xa9\xe2\x82\xac\xff!x", Dialect::duckdb);
  std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> at;  // offset, line, column
  for (const auto& t : toks) at.emplace_back(t.offset, t.line, t.column);
  EXPECT_EQ(
      at, (std::vector<std::tuple<std::size_t, std::size_t, std::size_t>>{{0, 1, 1},
                                                                          {1, 1, 2},
                                                                          {3, 2, 1},
                                                                          {4, 2, 2},
                                                                          {5, 3, 1},
                                                                          {6, 3, 2},
                                                                          {7, 4, 1},
                                                                          {13, 4, 4},
                                                                          {14, 4, 5}}));
}

TEST(LintPositions, FindingsAfterMultibyteText) {
  EXPECT_EQ(hits("select 'Grüße €', now()\n  from t where x = 'é' or y < now()"),
            (std::vector<Hit>{{"CLOCK_READ", 1, 19, "now()"}, {"CLOCK_READ", 2, 31, "now()"}}));
}

TEST(LintClock, SilentInStringsCommentsAndQuotedNames) {
  EXPECT_TRUE(hits("select 'now()', \"now\", \"current_date\" -- now()\n/* random() */ from t "
                   "{# {{ run_started_at }} #} where d >= '{{ start }}'")
                  .empty());
  EXPECT_TRUE(hits("select t.current_date, x as current_timestamp from t").empty());
  // A Jinja expression in a SQL comment renders into the comment.
  EXPECT_TRUE(hits("select 1 -- built at {{ run_started_at }}\n").empty());
}

TEST(LintClock, JinjaRendersIntoStrings) {
  EXPECT_EQ(hits("select * from t where d >= '{{ run_started_at }}'"),
            (std::vector<Hit>{{"CLOCK_READ", 1, 32, "run_started_at"}}));
  EXPECT_EQ(hits("{% set today = modules.datetime.date.today() %}select '{{ today }}'"),
            (std::vector<Hit>{{"CLOCK_READ", 1, 16, "modules.datetime.date.today()"}}));
  EXPECT_EQ(hits("select {{ modules.datetime.datetime.now().strftime('%Y') }}"),
            (std::vector<Hit>{{"CLOCK_READ", 1, 11, "modules.datetime.datetime.now()"}}));
}

TEST(LintClock, SqlInDbtMacroArguments) {
  // Jinja strings handed to dbt macros render as SQL.
  EXPECT_EQ(hits("select {{ dbt.dateadd('day', -1, \"current_date\") }}"),
            (std::vector<Hit>{{"CLOCK_READ", 1, 35, "current_date"}}));
  EXPECT_TRUE(hits("select {{ log(\"it's now\") }}, {{ var('x', 'now') }}").empty());
  EXPECT_TRUE(
      hits("{{ log('started at now()', info=True) }}{% do exceptions.warn('random()') %}").empty());
  EXPECT_EQ(hits("{{ config(post_hook=\"insert into audit select now()\") }}").size(), 1U);
}

TEST(LintClock, DialectForms) {
  EXPECT_EQ(
      hits("select sysdate, systimestamp from t", dialect(Dialect::snowflake)),
      (std::vector<Hit>{{"CLOCK_READ", 1, 8, "sysdate"}, {"CLOCK_READ", 1, 17, "systimestamp"}}));
  EXPECT_TRUE(hits("select sysdate from t").empty());  // a column in DuckDB
  EXPECT_EQ(hits("select 'now'::timestamptz, 'now()'::text", dialect(Dialect::postgres)),
            (std::vector<Hit>{{"CLOCK_READ", 1, 8, "'now'::timestamptz"}}));
  EXPECT_EQ(hits("select unix_timestamp(), unix_timestamp(ts)", dialect(Dialect::spark)),
            (std::vector<Hit>{{"CLOCK_READ", 1, 8, "unix_timestamp()"}}));
  EXPECT_EQ(hits("select current_datetime from t", dialect(Dialect::bigquery)),
            (std::vector<Hit>{{"CLOCK_READ", 1, 8, "current_datetime"}}));
}

TEST(LintNondeterministic, FunctionsWindowsAndSampling) {
  EXPECT_EQ(hits("select random(), gen_random_uuid(), row_number() over (partition by k),\n"
                 "  row_number() over (partition by k order by id), rank() over ()\nfrom t"),
            (std::vector<Hit>{{"NONDETERMINISTIC", 1, 8, "random()"},
                              {"NONDETERMINISTIC", 1, 18, "gen_random_uuid()"},
                              {"NONDETERMINISTIC", 1, 37, "row_number() over (partition by k)"}}));
  // Named windows resolve; a Jinja-written spec is given the benefit of the doubt.
  EXPECT_TRUE(hits("select lag(x) over w from t window w as (order by t)").empty());
  EXPECT_EQ(hits("select lag(x) over w from t window w as (partition by k)").size(), 1U);
  EXPECT_TRUE(hits("select lag(x) over (partition by k {{ order_clause }}) from t").empty());
  EXPECT_EQ(hits("select * from t using sample 10%"),
            (std::vector<Hit>{{"NONDETERMINISTIC", 1, 23, "sample 10%"}}));
  EXPECT_TRUE(hits("select * from t using sample 10% (bernoulli, 42)").empty());
  EXPECT_TRUE(
      hits("select * from t tablesample bernoulli (5) repeatable (7)", dialect(Dialect::postgres))
          .empty());
  EXPECT_EQ(hits("select distinct on (k) * from t"),
            (std::vector<Hit>{{"NONDETERMINISTIC", 1, 8, "distinct on (k)"}}));
  EXPECT_TRUE(hits("select distinct on (k) * from t order by k, ts desc").empty());
}

TEST(LintNondeterministic, LimitAndAggregatesAreWarnings) {
  const auto r =
      backfill::lint("select k, array_agg(v) from (select * from t limit 5) group by k", {});
  ASSERT_EQ(r.findings.size(), 2U);
  EXPECT_EQ(r.findings[0].severity, backfill::Severity::warning);
  EXPECT_EQ(r.findings[0].text, "array_agg(v)");
  EXPECT_EQ(r.findings[1].text, "limit 5");
  EXPECT_TRUE(hits("select list_sort(list(v)), string_agg(v, ',' order by v) from t").empty());
  EXPECT_TRUE(hits("select * from (select * from t order by id limit 5)").empty());
  EXPECT_TRUE(hits("select * from t {% if target.name == 'dev' %} limit 100 {% endif %}").empty());
}

TEST(LintUnboundedRead, PerStatementAndMicrobatch) {
  LintOptions o;
  o.partitioned_inputs = {"orders", "raw.events"};
  EXPECT_EQ(hits("select * from {{ ref('orders') }} join analytics.raw.events e using (id)", o),
            (std::vector<Hit>{{"UNBOUNDED_READ", 1, 15, "{{ ref('orders') }}"},
                              {"UNBOUNDED_READ", 1, 40, "analytics.raw.events"}}));
  EXPECT_TRUE(hits("select * from {{ ref('orders') }} where d >= '{{ start }}'", o).empty());
  EXPECT_TRUE(hits("select * from orders where d >= {{ var('start') }}", o).empty());
  EXPECT_TRUE(hits("{% set lo = start %}select * from orders where d >= '{{ lo }}'", o).empty());
  // The period in one statement does not bound another.
  EXPECT_EQ(hits("delete from f where d >= $start;\ninsert into f select * from orders", o),
            (std::vector<Hit>{{"UNBOUNDED_READ", 2, 29, "orders"}}));
  // CTE names are not inputs; a reference in a comment does not count.
  EXPECT_TRUE(hits("with orders as (select 1) select * from orders", o).empty());
  EXPECT_EQ(hits("select * from orders -- {{ start }}", o).size(), 1U);
  // Microbatch filters ref()/source() but not .render() or raw table names.
  o.microbatch = true;
  EXPECT_TRUE(hits("select * from {{ ref('orders') }}", o).empty());
  EXPECT_EQ(hits("select * from {{ ref('orders').render() }}", o).size(), 1U);
  o.microbatch.reset();
  EXPECT_TRUE(hits("{{ config(incremental_strategy='microbatch') }} "
                   "select * from {{ ref('orders') }}",
                   o)
                  .empty());
}

TEST(LintAppendOnly, InsertWithoutClearingThePeriod) {
  EXPECT_EQ(hits("insert into f select 1"),
            (std::vector<Hit>{{"APPEND_ONLY", 1, 1, "insert into f"}}));
  EXPECT_TRUE(hits("delete from main.f where d >= $start; insert into f select 1").empty());
  EXPECT_TRUE(hits("truncate table f; insert into f select 1").empty());
  EXPECT_TRUE(hits("insert into f select 1 on conflict (id) do nothing").empty());
  EXPECT_TRUE(hits("insert overwrite table f select 1", dialect(Dialect::spark)).empty());
  EXPECT_TRUE(hits("delete from {{ this }} where d >= '{{ start }}';\n"
                   "insert into {{ this }} select 1")
                  .empty());
  EXPECT_EQ(hits("delete from other; insert into f select 1").size(), 1U);
  EXPECT_TRUE(hits("select 1").empty());
}

TEST(LintParse, UnterminatedAndUnbalanced) {
  EXPECT_EQ(hits("select 'abc\nfrom t"), (std::vector<Hit>{{"LINT_PARSE", 1, 8, "'"}}));
  EXPECT_EQ(hits("select 1 /* never closed"), (std::vector<Hit>{{"LINT_PARSE", 1, 10, "/*"}}));
  EXPECT_EQ(hits("select {{ x "), (std::vector<Hit>{{"LINT_PARSE", 1, 8, "{{"}}));
  EXPECT_EQ(hits("{% if a %}\nselect 1\n{% for x in y %}{% endif %}").size(), 2U);
  EXPECT_EQ(hits("select 1 {% endif %}"), (std::vector<Hit>{{"LINT_PARSE", 1, 10, "{% endif %}"}}));
  EXPECT_EQ(std::get<0>(hits("select \xff now")[0]), "LINT_PARSE");
}

TEST(LintSuppress, OptionsAndInlineCommentsKeepTheReason) {
  LintOptions o;
  o.ignore = {{Rule::clock_read, "audit column"}};
  const auto r = backfill::lint("select now(), random()", o);
  ASSERT_EQ(r.findings.size(), 2U);
  EXPECT_TRUE(r.findings[0].suppressed);
  EXPECT_EQ(r.findings[0].reason, "audit column");
  EXPECT_FALSE(r.findings[1].suppressed);

  const auto inl = backfill::lint(
      "-- backfill: ignore NONDETERMINISTIC sample ids are hashed downstream\n"
      "select random(),\n  now() /* backfill: ignore CLOCK_READ load time */, now()\n"
      "select now()",
      {});
  ASSERT_EQ(inl.findings.size(), 4U);
  EXPECT_EQ(inl.findings[0].reason, "sample ids are hashed downstream");
  EXPECT_TRUE(inl.findings[1].suppressed && inl.findings[2].suppressed);
  EXPECT_FALSE(inl.findings[3].suppressed);
  EXPECT_EQ(hits("select 1 -- backfill: ignore NOT_A_RULE whatever")[0],
            (Hit{"LINT_PARSE", 1, 10, "-- backfill: ignore NOT_A_RULE whatever"}));
}

TEST(LintOptionsErrors, NameTheBadValue) {
  try {
    (void)backfill::parse_dialect("mysql");
    FAIL();
  } catch (const backfill::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("'mysql'"), std::string::npos);
  }
  LintOptions o;
  o.partitioned_inputs = {"raw..orders"};
  EXPECT_THROW((void)backfill::lint("select 1", o), backfill::InvalidInput);
  o.partitioned_inputs.clear();
  o.period_params = {"1x"};
  EXPECT_THROW((void)backfill::lint("select 1", o), backfill::InvalidInput);
  EXPECT_THROW((void)backfill::parse_rule("CLOCK"), backfill::InvalidInput);
}

}  // namespace
