// What a set of results says, as facts a report words (the studies' findings): which framework
// and mode is fastest on how many models, the compiled-over-eager speedups and where each came
// from (less dispatch outside the layers, or faster layers), how many runs are memory-bound, the
// best and worst roofline efficiency. Computed here once from the results' own figures; the
// HTML and Markdown reports only put them into words and charts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/report/results.hpp"

namespace neuralcost {

/// A framework and mode ("jax jit").
struct Config {
  std::string backend, mode;
  auto operator<=>(const Config&) const = default;
};

/// The fastest configuration of one model at one batch (on one device).
struct Winner {
  std::string model;
  std::int64_t batch = 0;
  std::string device;
  std::size_t run = 0;         ///< index into ResultsFile::runs of the fastest
  std::size_t contenders = 0;  ///< measured configurations compared
  bool mistrusted = false;     ///< the fastest run is mistrusted
  /// The runner-up's time over the fastest's, with its 95% interval: from rounds taken side by
  /// side (paired by sweep and pass) when both runs have them, else from the two runs' intervals
  std::size_t runner_up = 0;  ///< index into ResultsFile::runs
  double margin = 0;
  Interval margin_ci95;
  std::size_t pairs = 0;  ///< paired rounds behind the margin (0: from the two intervals)
  /// The interval says the fastest is faster (margin_ci95.low > 1 with 95% coverage); otherwise a
  /// tie: the report names no winner
  bool decided = false;
};

struct ConfigWins {
  Config config;
  std::vector<std::string> models;  ///< the models it is fastest on (at their largest batch), decided wins only
  /// of those, the models whose fastest run is mistrusted (its verdict's reasons): said beside the win
  std::vector<std::string> mistrusted;
};

/// Where a compiled mode's time went against eager.
enum class SpeedupSource {
  kDispatch,  ///< most of the time saved was outside the layers (unattributed: dispatch, framework)
  kLayers,    ///< most of it was in the layers (faster kernels or fewer ops)
  kUnknown,   ///< a run has no per-layer times (--layer-runs 0, or a compiled program timed whole)
};

struct Speedup {
  std::size_t eager = 0;     ///< index into ResultsFile::runs
  std::size_t compiled = 0;  ///< index into ResultsFile::runs
  /// eager median / compiled median (below 1: compiling made it slower); with paired rounds the
  /// median of the pairs' ratios, the estimate its interval belongs to
  double speedup = 0;
  SpeedupSource source = SpeedupSource::kUnknown;
  /// 95% interval of the speedup: of paired rounds (eager / compiled round medians taken side by
  /// side) when both runs have them (`pairs` > 0), else from the two runs' intervals
  Interval ci95;
  std::size_t pairs = 0;
};

struct Findings {
  std::size_t runs = 0, ok = 0, mistrusted = 0, failed = 0;
  std::size_t memory_bound = 0, compute_bound = 0;  ///< measured runs by their limiting roof
  std::vector<Winner> winners;                      ///< per model, batch and device with 2+ measured configurations
  /// Wins per configuration over the models, each model at its largest batch; most wins first.
  std::vector<ConfigWins> wins;
  std::size_t models_compared = 0;       ///< models with 2+ configurations at their largest batch
  std::vector<std::string> tied_models;  ///< of those, the ones whose fastest is not decided (a tie)
  std::vector<Speedup> speedups;         ///< every compiled run with an eager run of the same cell
  /// Index into speedups of the largest whose two runs are trusted (of any, when none are).
  std::optional<std::size_t> largest_speedup;
  /// Best and worst roofline efficiency among runs that are not mistrusted (indices into runs).
  std::optional<std::size_t> best_efficiency, worst_efficiency;
  /// The machine's level over the study that every interval carries (the median over the measured
  /// runs that read it; log units, about relative); 0 when no run read it (docs/profiling.md §2a)
  double level_spread = 0;
};

/// The findings of `results`. A mistrusted run still takes part (its figures are what was
/// measured) but is marked wherever it is named; failed runs only count as failed.
Findings find_findings(const ResultsFile& results);

}  // namespace neuralcost
