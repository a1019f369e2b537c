// Sample statistics on known sets, with the edge cases written down.
#include "neuralcost/measure/statistics.hpp"

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

}  // namespace
}  // namespace neuralcost
