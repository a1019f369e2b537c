// Internal to calibration: a rate measurement from timed runs of a fixed amount of work.
#pragma once

#include <algorithm>
#include <vector>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/hardware/calibration.hpp"

namespace neuralcost {

/// The best of `r` (rates of runs), the median (measure's one median: the mean of the middle two
/// for an even count) and the spread.
inline RateMeasurement rate_summary(const std::vector<double>& r) {
  RateMeasurement m;
  m.runs = static_cast<int>(r.size());
  if (r.empty()) return m;
  const auto [low, high] = std::minmax_element(r.begin(), r.end());
  m.best = *high;
  m.spread = (*high - *low) / *high;
  m.median = median(r);
  return m;
}

/// rate_summary of the rates `work / seconds` of each run.
inline RateMeasurement rate_measurement(double work, const std::vector<double>& seconds) {
  std::vector<double> r;
  for (double s : seconds) r.push_back(work / std::max(s, 1e-9));
  return rate_summary(r);
}

}  // namespace neuralcost
