// libFuzzer target for the SQL + Jinja tokenizer and the lint. Beyond "no crash, no sanitizer
// report", it checks the invariants the rest of the lint relies on:
//  - tokens tile the input (each starts where the previous ended, none is empty);
//  - positions move forward: lines never decrease, columns grow within a line;
//  - every finding lies inside the input and has a 1-based position;
//  - lint() never throws on any input, in any dialect.
// The first byte picks the dialect, so one corpus covers all five.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backfill/lint.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr backfill::Dialect dialects[] = {backfill::Dialect::duckdb, backfill::Dialect::postgres,
                                            backfill::Dialect::snowflake,
                                            backfill::Dialect::bigquery, backfill::Dialect::spark};
  const backfill::Dialect d = size > 0 ? dialects[data[0] % 5] : backfill::Dialect::duckdb;
  const std::string_view sql(reinterpret_cast<const char*>(data), size);

  const auto tokens = backfill::tokenize(sql, d);
  std::size_t pos = 0;
  std::size_t line = 1;
  std::size_t column = 0;
  for (const auto& t : tokens) {
    check(t.offset == pos && t.length > 0);
    check(t.line >= line && t.column >= 1);
    check(t.line > line || t.column > column);
    pos += t.length;
    line = t.line;
    column = t.column;
  }
  check(pos == size);

  backfill::LintOptions opt;
  opt.dialect = d;
  opt.partitioned_inputs = {"orders", "raw.events"};
  const auto report = backfill::lint(sql, opt);
  for (const auto& f : report.findings) {
    check(f.offset <= size && f.length <= size - f.offset);
    check(f.line >= 1 && f.column >= 1);
  }
  return 0;
}
