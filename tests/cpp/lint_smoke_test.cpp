#include <gtest/gtest.h>
#include "backfill/lint.hpp"
TEST(LintSmoke, Runs) {
  backfill::LintOptions o;
  auto r = backfill::lint("select now(), '{{ run_started_at }}' from t", o);
  EXPECT_EQ(r.findings.size(), 2u);
}
