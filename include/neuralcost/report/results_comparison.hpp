// Two results files compared cell by cell (model, backend, mode, batch, device), as
// google/benchmark's compare tool compares repetitions: per matching cell the change of the
// estimate with a 95% interval (bootstrap of the ratio of medians over both runs' round medians)
// and a two-sided Mann-Whitney U test on the round medians, so that "transformer jit got 12%
// faster" is told apart from noise. A change is significant only when p < alpha and it is at
// least the minimum effect (Criterion's noise threshold): below it the answer is "no significant
// change". Runs without rounds (older files) fall back to their passes, which one window makes
// overconfident (a note says so). The decision is made here; views only print it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/report/results.hpp"

namespace neuralcost {

/// What became of one cell.
enum class Change {
  kFaster,         ///< significantly faster after (p < alpha, median lower)
  kSlower,         ///< significantly slower after
  kNoChange,       ///< the test found no significant difference
  kNotTested,      ///< a run lacks per-sample times (or has fewer than 2): the interval only
  kNotComparable,  ///< the cell failed before or after: no times to compare
};
/// "faster", "slower", "no significant change", "not tested", "not comparable".
std::string_view change_name(Change change);

struct CellChange {
  CellKey cell;
  ResultRun before;
  ResultRun after;
  double ratio = 0;     ///< after median / before median (0 when not comparable)
  Interval ratio_ci95;  ///< of the ratio: bootstrap over both sample sets, else from the two CIs
  bool ratio_ci_from_samples = false;
  std::string tested_on;  ///< "rounds" or "passes" (older files), "" when not tested
  std::optional<RankTest> test;  ///< the U test on round medians (or passes), when both runs have them
  Change change = Change::kNotComparable;
  std::vector<std::string> notes;  ///< e.g. "after is mistrusted: too noisy ...", "hardware differs"
};

struct ResultsComparison {
  std::string before_path, after_path;
  double alpha = 0.05;
  double min_effect = 0.05;  ///< |ratio - 1| below this is "no significant change" whatever p says
  std::vector<CellChange> cells;       ///< in the order of the after file
  std::vector<CellKey> only_before;    ///< cells the after file lacks
  std::vector<CellKey> only_after;     ///< new cells
  std::vector<std::string> warnings;   ///< repeated cells (the last run counts), different hardware
};

/// Compares matching cells of `before` and `after` at significance level `alpha` (0 < alpha < 1)
/// with minimum effect `min_effect` (0 <= min_effect < 1); kInvalidArgument otherwise.
ResultsComparison compare_results(const ResultsFile& before, const ResultsFile& after, double alpha = 0.05,
                                  double min_effect = 0.05);

/// The cells slower by more than `threshold` (a fraction: 0.05 is 5%) with significance: what a
/// CI gate fails on (compare --fail-if-slower).
std::vector<const CellChange*> slower_than(const ResultsComparison& comparison, double threshold);

}  // namespace neuralcost
