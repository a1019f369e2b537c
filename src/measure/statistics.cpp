// Sample statistics and the bootstrap interval of the median (see statistics.hpp).
#include "neuralcost/measure/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

void validate(const std::vector<double>& samples) {
  if (samples.empty()) throw Error(ErrorCode::kInvalidArgument, "no samples to summarise");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!std::isfinite(samples[i])) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("sample {} is not a finite number", i));
    }
  }
}

/// Median of a range that may be reordered.
double median_in_place(std::vector<double>& v) {
  const std::size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace

double median(std::vector<double> samples) {
  validate(samples);
  return median_in_place(samples);
}

double mean(const std::vector<double>& samples) {
  validate(samples);
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double stddev(const std::vector<double>& samples) {
  const double m = mean(samples);
  if (samples.size() < 2) return 0.0;
  double sum = 0;
  for (double x : samples) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(samples.size() - 1));
}

double percentile(std::vector<double> samples, double p) {
  validate(samples);
  if (!(p >= 0 && p <= 100)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("percentile {} is outside [0, 100]", p));
  }
  std::sort(samples.begin(), samples.end());
  const double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (rank - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

Interval bootstrap_median_ci95(const std::vector<double>& samples, int resamples, std::uint64_t seed) {
  validate(samples);
  if (resamples < 1) throw Error(ErrorCode::kInvalidArgument, "bootstrap needs at least one resample");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, samples.size() - 1);
  std::vector<double> medians(static_cast<std::size_t>(resamples));
  std::vector<double> draw(samples.size());
  for (double& m : medians) {
    for (double& d : draw) d = samples[pick(rng)];
    m = median_in_place(draw);
  }
  return {percentile(medians, 2.5), percentile(medians, 97.5)};
}

SampleSummary summarize(const std::vector<double>& samples) {
  validate(samples);
  SampleSummary s;
  s.n = samples.size();
  s.median = median(samples);
  s.mean = mean(samples);
  s.stddev = stddev(samples);
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0.0;
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.p5 = percentile(samples, 5);
  s.p95 = percentile(samples, 95);
  s.ci95_median = bootstrap_median_ci95(samples);
  return s;
}

}  // namespace neuralcost
