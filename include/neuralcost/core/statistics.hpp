// Statistics over timing samples, as free functions (after google/benchmark). Edge cases are
// part of the contract: one sample has stddev 0 and a zero-width interval; an empty set or a
// non-finite sample is an error (kInvalidArgument), never a NaN in a report.
#pragma once

#include <cstdint>
#include <vector>

namespace neuralcost {

/// Median: the middle sample, or the mean of the two middle samples for an even count.
double median(std::vector<double> samples);
double mean(const std::vector<double>& samples);
/// Sample standard deviation (n - 1 in the denominator); 0 for a single sample.
double stddev(const std::vector<double>& samples);
/// Percentile p in [0, 100] with linear interpolation between order statistics (the
/// "type 7" rule of R and numpy): percentile(s, 50) == median(s).
double percentile(std::vector<double> samples, double p);

/// The standard normal's 97.5th percentile: a two-sided 95 % interval is ± kZ95 standard deviations.
inline constexpr double kZ95 = 1.959963984540054;

struct Interval {
  double low = 0;
  double high = 0;
};

/// Percentile-bootstrap 95 % confidence interval of the median: `resamples` resamples with
/// replacement drawn from a fixed seed, so the same samples always give the same interval.
Interval bootstrap_median_ci95(const std::vector<double>& samples, int resamples = 2000,
                               std::uint64_t seed = 0x6e657572616cULL);

/// Percentile-bootstrap 95 % interval of median(after) / median(before): each resample draws
/// both sets with replacement (independently, from a fixed seed). The change of a median between
/// two runs, as a ratio; its width reflects both runs' noise.
Interval bootstrap_median_ratio_ci95(const std::vector<double>& before, const std::vector<double>& after,
                                     int resamples = 2000, std::uint64_t seed = 0x6e657572616cULL);

/// The two-sided Mann-Whitney U test (Wilcoxon rank-sum) of two independent sets, as
/// google/benchmark's compare tool runs it (scipy's mannwhitneyu, two-sided): `u` is U of `a`
/// (midranks for ties). The p-value is exact when the smaller set has at most 8 samples and
/// there are no ties, else the normal approximation with tie and continuity corrections. A set
/// with fewer than 2 samples cannot be tested: kInvalidArgument; all values equal: p = 1.
struct RankTest {
  double u = 0;
  double p_value = 1;
  bool exact = false;
};
RankTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

/// The distribution-free confidence interval of a median from order statistics (the sign test's
/// interval; scipy.stats.quantile_test(x, q=median).confidence_interval() is the same):
/// [x(k), x(n+1-k)] of the sorted values, with the largest k whose coverage
/// 1 - 2 P(Binomial(n, 1/2) <= k - 1) is at least `confidence`. It assumes only that the values
/// are independent draws of one distribution (rounds of a cell, not passes of one window). With
/// n <= 5 no k reaches 95 %: the interval is then [min, max] and `coverage` says what it holds
/// (93.75 % for 5); callers name it.
struct MedianInterval {
  Interval interval;
  double coverage = 0;  ///< the exact coverage of this interval for the population median
  std::size_t k = 0;    ///< the 1-based order statistic of its low end
};
MedianInterval order_statistic_median_ci(std::vector<double> values, double confidence = 0.95);

/// Interquartile range (p75 - p25, type 7) and the median absolute deviation from the median
/// (unscaled): robust spreads that a few slow passes do not move.
double iqr(const std::vector<double>& samples);
double mad(const std::vector<double>& samples);

struct SampleSummary {
  std::size_t n = 0;
  double median = 0;
  double mean = 0;
  double stddev = 0;
  double cv = 0;  ///< stddev / mean (0 when the mean is 0)
  double min = 0;
  double max = 0;
  double p5 = 0;
  double p95 = 0;
  double iqr = 0;  ///< p75 - p25
  double mad = 0;  ///< median absolute deviation (unscaled)
  Interval ci95_median;
};

/// All of the above at once (validates the samples once).
SampleSummary summarize(const std::vector<double>& samples);

/// Student's t distribution with `df` > 0 degrees of freedom: P(T ≤ t), through the regularized
/// incomplete beta function; and its quantile (the t with P(T ≤ t) = p, 0 < p < 1), by bisection
/// to 1e-10. kInvalidArgument outside those ranges.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

}  // namespace neuralcost
