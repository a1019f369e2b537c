// MLPerf Training's scoring, on the worked examples of its Training Rules (v1.0, 2021-03-25:
// §12 and the appendix "RCP Examples"), and the Student's t distribution it needs.
#include "neuralcost/measure/time_to_target.hpp"

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/statistics.hpp"

namespace neuralcost {
namespace {

TEST(StudentTTest, QuantilesAreTheTablesOnes) {
  // scipy.stats.t.ppf
  EXPECT_NEAR(student_t_quantile(0.95, 9), 1.8331129, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.95, 11), 1.7958848, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.2281389, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.995, 1), 63.656741, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.05, 9), -1.8331129, 1e-6);
  EXPECT_NEAR(student_t_cdf(0, 3), 0.5, 1e-12);
  EXPECT_NEAR(student_t_cdf(2.0, 5), 0.9490303, 1e-6);
  EXPECT_THROW(student_t_quantile(1.0, 5), Error);
  EXPECT_THROW(student_t_cdf(1.0, 0), Error);
}

std::vector<TargetRun> runs(const std::vector<double>& seconds) {
  std::vector<TargetRun> out;
  for (double s : seconds) out.push_back({s, s, true});
  return out;
}

TEST(OlympicScoreTest, DropsTheFastestAndSlowestAndAveragesTheRest) {
  const OlympicScore s = olympic_score(runs({100, 90, 130, 95, 105}));
  ASSERT_TRUE(s.valid);
  EXPECT_DOUBLE_EQ(s.mean_seconds, (95 + 100 + 105) / 3.0);
  EXPECT_EQ(s.dropped, (std::vector<std::size_t>{1, 2}));  // 90 s and 130 s
}

TEST(OlympicScoreTest, OneRunThatDoesNotConvergeIsTheSlowestAndTwoInvalidate) {
  std::vector<TargetRun> r = runs({100, 90, 130, 95, 105});
  r[2].converged = false;
  const OlympicScore one = olympic_score(r);
  ASSERT_TRUE(one.valid);
  EXPECT_EQ(one.non_converged, 1u);
  EXPECT_DOUBLE_EQ(one.mean_seconds, (95 + 100 + 105) / 3.0);  // 90 and the failed one dropped
  r[0].converged = false;
  const OlympicScore two = olympic_score(r);
  EXPECT_FALSE(two.valid);
  EXPECT_EQ(two.why_invalid, "2 of 5 runs did not reach the target; at most 1 may");
  // UNet3D: 40 runs, 4 dropped at each end, at most 4 not converged
  std::vector<TargetRun> unet = runs(std::vector<double>(40, 50.0));
  for (int i = 0; i < 4; ++i) unet[i].converged = false;
  EXPECT_TRUE(olympic_score(unet, 4).valid);
  unet[4].converged = false;
  EXPECT_FALSE(olympic_score(unet, 4).valid);
  EXPECT_FALSE(olympic_score(runs({1, 2}), 1).valid);
}

// The appendix's benchmark A: 5 submission runs, reference runs at batch 128 and 256
const std::vector<double> kReference128 = {16, 14, 16, 17, 16, 16, 15, 16, 15, 16};
const std::vector<double> kReference256 = {20, 21, 21, 20, 22, 22, 21, 21, 20, 20};

TEST(ConvergenceTest, ReferencePointsAreTheAppendixs) {
  const ConvergencePoint a = reference_convergence_point(128, kReference128);
  EXPECT_DOUBLE_EQ(a.mean_epochs, 15.75);
  EXPECT_NEAR(a.stdev_epochs, 0.43, 0.005);
  EXPECT_EQ(a.runs, 8u);
  const ConvergencePoint b = reference_convergence_point(256, kReference256);
  EXPECT_DOUBLE_EQ(b.mean_epochs, 20.75);
  EXPECT_NEAR(b.stdev_epochs, 0.66, 0.005);
}

TEST(ConvergenceTest, SubmissionOnePassesAndTwoFails) {
  const ConvergenceCheck s1 = check_convergence(reference_convergence_point(128, kReference128), {15, 15, 15, 16, 16});
  EXPECT_NEAR(s1.max_speedup, 1.0353, 5e-5);  // "3.53%"
  EXPECT_NEAR(s1.min_mean_epochs, 15.21, 0.005);
  EXPECT_NEAR(s1.submission_mean_epochs, 15.33, 0.005);
  EXPECT_TRUE(s1.passes);
  EXPECT_NEAR(s1.scaling, 15.75 / (46.0 / 3), 1e-12);  // faster than the mean: scaled back (v2.1 on)
  const ConvergenceCheck s2 = check_convergence(reference_convergence_point(256, kReference256), {19, 19, 19, 20, 21});
  EXPECT_NEAR(s2.max_speedup, 1.0412, 5e-5);  // "4.12%"
  EXPECT_NEAR(s2.min_mean_epochs, 19.93, 0.005);
  EXPECT_FALSE(s2.passes);
  EXPECT_DOUBLE_EQ(s2.scaling, 1.0);
}

TEST(ConvergenceTest, SubmissionThreeIsCheckedAgainstAnInterpolatedPoint) {
  const ConvergencePoint rcp = interpolate_convergence(reference_convergence_point(128, kReference128),
                                                       reference_convergence_point(256, kReference256), 192, 10);
  EXPECT_DOUBLE_EQ(rcp.mean_epochs, 18.25);
  EXPECT_NEAR(rcp.stdev_epochs, 0.547, 0.0005);
  const ConvergenceCheck s3 = check_convergence(rcp, {17, 18, 18, 18, 20});
  EXPECT_NEAR(s3.max_speedup, 1.0368, 5e-5);  // "3.68%"
  EXPECT_DOUBLE_EQ(s3.submission_mean_epochs, 18);
  EXPECT_TRUE(s3.passes);
  EXPECT_THROW(interpolate_convergence(rcp, rcp, 192, 10), Error);
  EXPECT_THROW(check_convergence(rcp, {18, 18}), Error);
}

}  // namespace
}  // namespace neuralcost
