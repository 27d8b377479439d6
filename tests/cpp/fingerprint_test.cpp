#include "backfill/fingerprint.hpp"

#include <gtest/gtest.h>

#include "arrow_support.hpp"
#include "backfill/error.hpp"

namespace arrow = backfill::arrow;
namespace fp = backfill::fingerprint;

namespace {

using backfill::testing::imported;

fp::Fingerprint of(std::vector<std::int64_t> a, std::vector<std::string> b) {
  arrow::Table t;
  t.add("a", arrow::int64_column(std::move(a)));
  t.add("b", arrow::utf8_column(b));
  return fp::fingerprint(imported(std::move(t)), {}).total;
}

}  // namespace

TEST(Fingerprint, IgnoresRowOrder) {
  EXPECT_EQ(of({1, 2, 3}, {"x", "y", "z"}), of({3, 1, 2}, {"z", "x", "y"}));
  EXPECT_EQ(of({1, 2, 3}, {"x", "y", "z"}).digest(), of({2, 3, 1}, {"y", "z", "x"}).digest());
}

TEST(Fingerprint, SeesOneChangeAndDuplicates) {
  const auto base = of({1, 2}, {"x", "y"});
  EXPECT_NE(base, of({1, 2}, {"x", "Y"}));
  EXPECT_NE(base, of({1, 2, 2}, {"x", "y", "y"}));
  EXPECT_NE(of({1, 2, 2, 2}, {"x", "y", "y", "y"}), of({1, 2}, {"x", "y"}));  // no XOR cancel
  const auto changed = of({1, 2}, {"x", "Y"});
  EXPECT_EQ(base.column_sums[0], changed.column_sums[0]);  // column a untouched
  EXPECT_NE(base.column_sums[1], changed.column_sums[1]);
  EXPECT_EQ(base.digest().size(), 32U);
}

TEST(Fingerprint, UnknownColumnThrows) {
  arrow::Table t;
  t.add("a", arrow::int64_column({1}));
  fp::Options o;
  o.columns = std::vector<std::string>{"zz"};
  EXPECT_THROW((void)fp::fingerprint(imported(std::move(t)), o), backfill::NotFound);
}
