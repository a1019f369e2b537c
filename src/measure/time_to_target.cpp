// MLPerf Training's scoring of runs to a target (include/neuralcost/measure/time_to_target.hpp).
#include "neuralcost/measure/time_to_target.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/statistics.hpp"

namespace neuralcost {
namespace {

/// The values with the smallest and the largest one dropped.
std::vector<double> trimmed(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.begin() + 1, v.end() - 1};
}

double population_stdev(const std::vector<double>& v) {
  const double m = mean(v);
  double squares = 0;
  for (double x : v) squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(v.size()));
}

}  // namespace

OlympicScore olympic_score(const std::vector<TargetRun>& runs, std::size_t trim) {
  OlympicScore out;
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  for (const TargetRun& r : runs) {
    if (r.converged && (!std::isfinite(r.seconds) || r.seconds < 0)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("a run's time to target must be >= 0 s, not {}", r.seconds));
    }
    if (!r.converged) ++out.non_converged;
  }
  // fastest first; runs that did not converge after every run that did
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (runs[a].converged != runs[b].converged) return runs[a].converged;
    return runs[a].converged && runs[a].seconds < runs[b].seconds;
  });
  if (runs.size() < 2 * trim + 1) {
    out.why_invalid = fmt::format("{} run(s): the olympic mean drops {} at each end and needs at least {}", runs.size(),
                                  trim, 2 * trim + 1);
    return out;
  }
  if (out.non_converged > trim) {
    out.why_invalid =
        fmt::format("{} of {} runs did not reach the target; at most {} may", out.non_converged, runs.size(), trim);
    return out;
  }
  double sum = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i < trim || i + trim >= order.size()) {
      out.dropped.push_back(order[i]);
    } else {
      out.kept.push_back(order[i]);
      sum += runs[order[i]].seconds;
    }
  }
  out.mean_seconds = sum / static_cast<double>(out.kept.size());
  out.valid = true;
  return out;
}

ConvergencePoint reference_convergence_point(double batch, std::vector<double> epochs) {
  if (epochs.size() < 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a reference convergence point needs at least 3 runs, not {}", epochs.size()));
  }
  const std::vector<double> kept = trimmed(std::move(epochs));
  return {batch, mean(kept), population_stdev(kept), kept.size()};
}

ConvergencePoint interpolate_convergence(const ConvergencePoint& a, const ConvergencePoint& b, double batch,
                                         std::size_t reference_runs) {
  if (!(a.batch < b.batch) || batch < a.batch || batch > b.batch) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("batch {} is not between the reference points' batches {} and {}", batch, a.batch, b.batch));
  }
  const double w = (batch - a.batch) / (b.batch - a.batch);
  return {batch, a.mean_epochs + w * (b.mean_epochs - a.mean_epochs),
          a.stdev_epochs + w * (b.stdev_epochs - a.stdev_epochs), reference_runs};
}

ConvergenceCheck check_convergence(const ConvergencePoint& rcp, std::vector<double> submission_epochs, double alpha) {
  if (submission_epochs.size() < 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a convergence check needs at least 3 submission runs, not {}", submission_epochs.size()));
  }
  if (rcp.runs < 2) throw Error(ErrorCode::kInvalidArgument, "a reference convergence point of fewer than 2 runs");
  if (!(alpha > 0 && alpha < 0.5)) throw Error(ErrorCode::kInvalidArgument, "alpha must be in (0, 0.5)");
  const std::vector<double> kept = trimmed(std::move(submission_epochs));
  const double n_ref = static_cast<double>(rcp.runs), n_sub = static_cast<double>(kept.size());
  const double t = student_t_quantile(1 - alpha, n_ref + n_sub - 2);
  ConvergenceCheck out;
  out.submission_mean_epochs = mean(kept);
  out.min_mean_epochs = rcp.mean_epochs - t * rcp.stdev_epochs * std::sqrt(1 / n_ref + 1 / n_sub);
  out.max_speedup = rcp.mean_epochs / out.min_mean_epochs;
  out.passes = out.submission_mean_epochs >= out.min_mean_epochs;
  if (out.passes) out.scaling = std::max(1.0, rcp.mean_epochs / out.submission_mean_epochs);
  return out;
}

}  // namespace neuralcost
