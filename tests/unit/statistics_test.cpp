// Sample statistics on known sets, with the edge cases written down.
#include "neuralcost/core/statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

TEST(StatisticsTest, KnownSet) {
  const std::vector<double> s = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(median(s), 4.5);
  EXPECT_DOUBLE_EQ(mean(s), 5.0);
  EXPECT_DOUBLE_EQ(stddev(s), std::sqrt(32.0 / 7.0));  // sample stddev
  EXPECT_DOUBLE_EQ(percentile(s, 0), 2);
  EXPECT_DOUBLE_EQ(percentile(s, 100), 9);
  EXPECT_DOUBLE_EQ(percentile(s, 50), 4.5);
  EXPECT_DOUBLE_EQ(percentile(s, 95), 7 + 0.65 * 2);  // rank 6.65 between 7 and 9 (numpy's default)
}

TEST(StatisticsTest, OneSample) {
  const SampleSummary s = summarize({3e-3});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.median, 3e-3);
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.cv, 0);
  EXPECT_DOUBLE_EQ(s.ci95_median.low, 3e-3);
  EXPECT_DOUBLE_EQ(s.ci95_median.high, 3e-3);
}

TEST(StatisticsTest, TwoSamples) {
  const SampleSummary s = summarize({1, 3});
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(2.0));
  // bootstrap medians of two samples are 1, 2 or 3: the interval spans the data
  EXPECT_DOUBLE_EQ(s.ci95_median.low, 1);
  EXPECT_DOUBLE_EQ(s.ci95_median.high, 3);
}

TEST(StatisticsTest, IdenticalSamplesHaveZeroSpread) {
  const SampleSummary s = summarize(std::vector<double>(50, 1.25));
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.ci95_median.low, 1.25);
  EXPECT_DOUBLE_EQ(s.ci95_median.high, 1.25);
  EXPECT_DOUBLE_EQ(s.p5, 1.25);
}

TEST(StatisticsTest, MedianAndItsIntervalResistOutliers) {
  std::vector<double> s;
  for (int i = 0; i < 99; ++i) s.push_back(1.0 + 0.001 * (i % 10));
  s.push_back(1000.0);  // one page-fault storm
  const SampleSummary sum = summarize(s);
  EXPECT_NEAR(sum.median, 1.0045, 1e-3);
  EXPECT_GT(sum.mean, 10.0);  // the mean does not resist
  EXPECT_LT(sum.ci95_median.high, 1.01);
  EXPECT_GE(sum.ci95_median.high, sum.median);
  EXPECT_LE(sum.ci95_median.low, sum.median);
}

TEST(StatisticsTest, BootstrapIsDeterministic) {
  const std::vector<double> s = {5, 1, 4, 2, 3, 9, 7};
  const Interval a = bootstrap_median_ci95(s), b = bootstrap_median_ci95(s);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
}

TEST(StatisticsTest, EmptyAndNonFiniteAreErrors) {
  EXPECT_THROW(summarize({}), Error);
  EXPECT_THROW(median({1.0, std::numeric_limits<double>::quiet_NaN()}), Error);
  EXPECT_THROW(mean({std::numeric_limits<double>::infinity()}), Error);
  EXPECT_THROW(percentile({1.0}, 101), Error);
}

// Reference p-values from scipy.stats.mannwhitneyu(a, b, alternative='two-sided') (scipy 1.17),
// what google/benchmark's compare tool calls.
TEST(StatisticsTest, MannWhitneyExactForSmallSetsWithoutTies) {
  RankTest t = mann_whitney_u({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 0);
  EXPECT_NEAR(t.p_value, 2.0 / 252, 1e-12);  // the one most extreme arrangement of C(10, 5), both tails
  t = mann_whitney_u({1.0, 2.5, 3.1, 4.7}, {2.0, 3.0, 5.5, 6.1, 7.2, 8.8});
  EXPECT_DOUBLE_EQ(t.u, 5);
  EXPECT_NEAR(t.p_value, 0.17142857142857143, 1e-12);
  // swapping the sets mirrors U and keeps p
  const RankTest swapped = mann_whitney_u({2.0, 3.0, 5.5, 6.1, 7.2, 8.8}, {1.0, 2.5, 3.1, 4.7});
  EXPECT_DOUBLE_EQ(swapped.u, 24 - 5);
  EXPECT_NEAR(swapped.p_value, t.p_value, 1e-12);
}

TEST(StatisticsTest, MannWhitneyNormalApproximationWithTies) {
  std::vector<double> a, b;
  for (int i = 1; i <= 20; ++i) a.push_back(i);
  for (int i = 11; i <= 30; ++i) b.push_back(i);
  RankTest t = mann_whitney_u(a, b);
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 50);
  EXPECT_NEAR(t.p_value, 5.2125496206037515e-05, 1e-12);
  t = mann_whitney_u({1, 1, 2, 2, 3}, {2, 3, 3, 4, 4, 5});  // ties: the approximation even when small
  EXPECT_FALSE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 3);
  EXPECT_NEAR(t.p_value, 0.031633423039876964, 1e-12);
}

TEST(StatisticsTest, MannWhitneyEdges) {
  // the same values on both sides: no evidence of a difference
  EXPECT_DOUBLE_EQ(mann_whitney_u({2, 2, 2}, {2, 2, 2, 2}).p_value, 1.0);
  EXPECT_THROW(mann_whitney_u({1.0}, {1, 2, 3}), Error);  // one sample: nothing to rank against
  EXPECT_THROW(mann_whitney_u({}, {1, 2}), Error);
  EXPECT_THROW(mann_whitney_u({1, std::nan("")}, {1, 2}), Error);
}

TEST(StatisticsTest, MedianRatioIntervalCoversTheChange) {
  std::vector<double> before, after;
  for (int i = 0; i < 50; ++i) {
    before.push_back(10 + (i % 5) * 0.1);
    after.push_back(8 + (i % 5) * 0.1);
  }
  const Interval r = bootstrap_median_ratio_ci95(before, after);
  EXPECT_LE(r.low, 8.2 / 10.2);
  EXPECT_GE(r.high, 8.2 / 10.2);
  EXPECT_LT(r.high, 1.0);  // clearly faster
  const Interval same = bootstrap_median_ratio_ci95(before, before);
  EXPECT_LE(same.low, 1.0);
  EXPECT_GE(same.high, 1.0);
  EXPECT_DOUBLE_EQ(bootstrap_median_ratio_ci95(before, after).low, r.low);  // a fixed seed
}

}  // namespace
}  // namespace neuralcost
