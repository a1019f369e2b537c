// Sample statistics and the bootstrap interval of the median (see statistics.hpp).
#include "neuralcost/core/statistics.hpp"

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

Interval bootstrap_median_ratio_ci95(const std::vector<double>& before, const std::vector<double>& after, int resamples,
                                     std::uint64_t seed) {
  validate(before);
  validate(after);
  if (resamples < 1) throw Error(ErrorCode::kInvalidArgument, "bootstrap needs at least one resample");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick_before(0, before.size() - 1), pick_after(0, after.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> b(before.size()), a(after.size());
  for (int r = 0; r < resamples; ++r) {
    for (double& d : b) d = before[pick_before(rng)];
    for (double& d : a) d = after[pick_after(rng)];
    const double mb = median_in_place(b);
    if (mb > 0) ratios.push_back(median_in_place(a) / mb);
  }
  if (ratios.empty()) throw Error(ErrorCode::kInvalidArgument, "the median before is 0: no ratio");
  return {percentile(ratios, 2.5), percentile(ratios, 97.5)};
}

RankTest mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  validate(a);
  validate(b);
  if (a.size() < 2 || b.size() < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a rank test needs at least 2 samples in each set (got {} and {})", a.size(), b.size()));
  }
  const std::size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  // pooled values, tagged with their set; midranks for ties
  std::vector<std::pair<double, bool>> pooled;
  pooled.reserve(n);
  for (double x : a) pooled.emplace_back(x, true);
  for (double x : b) pooled.emplace_back(x, false);
  std::sort(pooled.begin(), pooled.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i), midrank = (static_cast<double>(i + j) + 1) / 2;  // 1-based
    for (std::size_t k = i; k < j; ++k) {
      if (pooled[k].second) rank_sum_a += midrank;
    }
    if (j - i > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2), dn = static_cast<double>(n);
  RankTest result;
  result.u = rank_sum_a - dn1 * (dn1 + 1) / 2;
  const double u_big = std::max(result.u, dn1 * dn2 - result.u);  // the larger of U1 and U2
  if (std::min(n1, n2) <= 8 && !ties) {
    // exact null distribution of U by counting arrangements: c[m][k][u], rolled over m
    const std::size_t max_u = n1 * n2;
    // ways[j][u]: arrangements of i samples of a and j of b with U = u (i advances in the outer loop)
    std::vector<std::vector<double>> prev(n2 + 1, std::vector<double>(max_u + 1, 0.0)), cur = prev;
    for (std::size_t j = 0; j <= n2; ++j) prev[j][0] = 1;  // i = 0: U = 0
    for (std::size_t i = 1; i <= n1; ++i) {
      for (std::size_t j = 0; j <= n2; ++j) {
        for (std::size_t u = 0; u <= max_u; ++u) {
          // the largest value is from a (it beats all j of b: U + j) or from b
          double w = (u >= j ? prev[j][u - j] : 0.0);
          if (j > 0) w += cur[j - 1][u];
          cur[j][u] = w;
        }
      }
      std::swap(prev, cur);
    }
    const std::vector<double>& counts = prev[n2];
    double total = 0, tail = 0;
    for (std::size_t u = 0; u <= max_u; ++u) {
      total += counts[u];
      if (static_cast<double>(u) >= u_big - 1e-9) tail += counts[u];
    }
    result.p_value = std::min(1.0, 2 * tail / total);
    result.exact = true;
    return result;
  }
  const double mu = dn1 * dn2 / 2;
  const double variance = dn1 * dn2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (variance <= 0) return result;  // every value equal: no evidence of a difference
  const double z = (u_big - mu - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return result;
}

MedianInterval order_statistic_median_ci(std::vector<double> values, double confidence) {
  validate(values);
  if (!(confidence > 0 && confidence < 1)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("confidence {} must be between 0 and 1", confidence));
  }
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  // cdf[j] = P(Binomial(n, 1/2) <= j), in logs for large n
  std::vector<double> cdf(n + 1);
  double acc = 0;
  for (std::size_t j = 0; j <= n; ++j) {
    const double log_p = std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(j) + 1) -
                         std::lgamma(static_cast<double>(n - j) + 1) - static_cast<double>(n) * std::log(2.0);
    acc += std::exp(log_p);
    cdf[j] = acc;
  }
  MedianInterval out;
  out.k = 1;
  out.coverage = n == 1 ? 0.0 : 1 - 2 * cdf[0];
  for (std::size_t k = 2; 2 * k <= n + 1; ++k) {
    const double coverage = 1 - 2 * cdf[k - 1];
    if (coverage < confidence) break;
    out.k = k;
    out.coverage = coverage;
  }
  out.interval = {values[out.k - 1], values[n - out.k]};
  return out;
}

double iqr(const std::vector<double>& samples) { return percentile(samples, 75) - percentile(samples, 25); }

double mad(const std::vector<double>& samples) {
  const double m = median(samples);
  std::vector<double> deviations;
  deviations.reserve(samples.size());
  for (double x : samples) deviations.push_back(std::fabs(x - m));
  return median_in_place(deviations);
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
  s.iqr = iqr(samples);
  s.mad = mad(samples);
  s.ci95_median = bootstrap_median_ci95(samples);
  return s;
}

namespace {

/// The continued fraction of the regularized incomplete beta function I_x(a, b) (modified Lentz).
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, epsilon = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::abs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 / (std::abs(1 + aa * d) < tiny ? tiny : 1 + aa * d);
    c = 1 + aa / c;
    c = std::abs(c) < tiny ? tiny : c;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 / (std::abs(1 + aa * d) < tiny ? tiny : 1 + aa * d);
    c = 1 + aa / c;
    c = std::abs(c) < tiny ? tiny : c;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < epsilon) break;
  }
  return h;
}

double regularized_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

}  // namespace

double student_t_cdf(double t, double df) {
  if (!(df > 0) || !std::isfinite(df) || std::isnan(t)) {
    throw Error(ErrorCode::kInvalidArgument, "Student's t needs df > 0 and a number");
  }
  const double tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw Error(ErrorCode::kInvalidArgument, "a quantile's probability must be in (0, 1)");
  double low = -1, high = 1;
  while (student_t_cdf(low, df) > p) low *= 2;
  while (student_t_cdf(high, df) < p) high *= 2;
  while (high - low > 1e-10 * std::max(1.0, std::abs(high))) {
    const double mid = 0.5 * (low + high);
    (student_t_cdf(mid, df) < p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

}  // namespace neuralcost
