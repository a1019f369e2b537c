// Scoring runs to a quality target as MLPerf Training does (Training Rules v1.0, §12 "Benchmark
// Results" and §13 "Reference Convergence Points"; docs/profiling.md, "Time to a target"): the
// olympic mean of N runs, the rule for runs that do not converge, and the check of a
// submission's epochs to converge against reference convergence points (RCPs).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace neuralcost {

/// One training run to a quality target.
struct TargetRun {
  double seconds = 0;  ///< time to the target (ignored when not converged)
  double epochs = 0;   ///< epochs (or samples, steps) to the target
  bool converged = true;
};

struct OlympicScore {
  bool valid = false;
  double mean_seconds = 0;           ///< the mean of the runs kept
  std::vector<std::size_t> kept;     ///< indices into the runs, fastest first
  std::vector<std::size_t> dropped;  ///< the `trim` fastest and `trim` slowest (non-converged ones among these)
  std::size_t non_converged = 0;
  std::string why_invalid;  ///< when not valid
};

/// Drops the `trim` fastest and the `trim` slowest runs and averages the rest; a run that did
/// not converge counts as the slowest, and more than `trim` of them make the result invalid
/// (MLPerf: trim 1 for 5 or 10 runs, 4 of 40 for UNet3D). Invalid, with the reason, also when
/// fewer than 2·trim + 1 runs are given. kInvalidArgument for negative or non-finite times.
OlympicScore olympic_score(const std::vector<TargetRun>& runs, std::size_t trim = 1);

/// A reference convergence point: epochs to converge at one batch size.
struct ConvergencePoint {
  double batch = 0;
  double mean_epochs = 0;
  double stdev_epochs = 0;  ///< population standard deviation (numpy's np.std, as MLPerf's checker)
  std::size_t runs = 0;     ///< the reference runs it stands for
};

/// The RCP of reference runs at `batch`: the fastest and slowest run dropped, the mean and
/// population standard deviation of the rest; `runs` is the count kept. kInvalidArgument for
/// fewer than 3 runs.
ConvergencePoint reference_convergence_point(double batch, std::vector<double> epochs);
/// The RCP at a batch between two RCPs: mean and standard deviation linear in the batch, standing
/// for `reference_runs` runs (MLPerf's checker: 2N). kInvalidArgument outside [a.batch, b.batch].
ConvergencePoint interpolate_convergence(const ConvergencePoint& a, const ConvergencePoint& b, double batch,
                                         std::size_t reference_runs);

struct ConvergenceCheck {
  double submission_mean_epochs = 0;  ///< of the runs the olympic mean keeps
  double min_mean_epochs = 0;         ///< the fastest convergence the reference allows
  double max_speedup = 0;             ///< rcp mean / min_mean_epochs
  bool passes = false;
  /// MLPerf (v2.1 on): a passing submission that converges faster than the RCP's mean is scaled by
  /// rcp mean / submission mean (≥ 1); 1 otherwise.
  double scaling = 1;
};

/// A one-sided two-sample Student's t test at `alpha` with equal variances: the submission's mean
/// epochs (its olympic-kept runs, N − 2) may be below the RCP's mean by at most
/// t(1 − alpha; n_ref + n_sub − 2) · stdev · sqrt(1/n_ref + 1/n_sub). kInvalidArgument for fewer
/// than 3 submission runs or an RCP of fewer than 2 runs.
ConvergenceCheck check_convergence(const ConvergencePoint& rcp, std::vector<double> submission_epochs,
                                   double alpha = 0.05);

}  // namespace neuralcost
