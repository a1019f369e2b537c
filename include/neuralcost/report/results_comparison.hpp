// Two results files compared cell by cell (model, backend, mode, batch, device), as
// google/benchmark's compare tool compares repetitions: per matching cell the change of the
// estimate with a 95% interval (bootstrap of the ratio of medians over both runs' round medians)
// and a two-sided Mann-Whitney U test on the round medians, so that "transformer jit got 12%
// faster" is told apart from noise. A change is significant only when p < alpha and it is at
// least the minimum effect (Criterion's noise threshold): below it the answer is "no significant
// change". Runs without rounds (older files) fall back to their passes, which one window makes
// overconfident (a note says so). The decision is made here; views only print it.
#pragma once

#include <algorithm>
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
  std::string tested_on;         ///< "rounds" or "passes" (older files), "" when not tested
  std::optional<RankTest> test;  ///< the U test on round medians (or passes), when both runs have them
  /// The change's test against what two studies differ by (StudyEffect): a normal test of the log
  /// ratio's distance from the common shift, with the cell's own variance and the between-study
  /// one; 0 when not applied
  double study_p_value = 0;
  /// ratio over the files' common shift (StudyEffect::shift): the change relative to the other
  /// cells, which the result is about when the files have a study effect; = ratio otherwise
  double relative = 0;
  Change change = Change::kNotComparable;
  std::vector<std::string> notes;  ///< e.g. "after is mistrusted: too noisy ...", "hardware differs"
  /// What the decision rests on: the larger of the U test's p and study_p_value (1 when not tested)
  double p_value() const { return test ? std::max(test->p_value, study_p_value) : 1.0; }
};

/// What separates two studies beyond what either study's rounds sample (docs/profiling.md §2a,
/// "Between studies"): each cell's log ratio after / before is its estimates' noise, a shift
/// common to every cell (the machine between the studies, or a change of the code that hits every
/// cell: one comparison cannot tell them apart) and a between-study deviation of its own. Over the
/// tested cells: the common shift (the median log ratio), their spread around it (1.4826 MAD),
/// and the part of that spread the cells' own intervals do not explain, the between-study spread
/// tau: the smallest at which every cell's deviation from the shift over sqrt(own² + tau²) has a
/// robust sd (1.4826 MAD) of 1. Each cell is then tested relative to the shift, with tau in its
/// variance and interval: a change no larger than two studies of this machine differ by is not
/// significant. The shift itself is said, and a gate fails on it (shift_slower_than). Needs 10
/// tested cells or more.
struct StudyEffect {
  std::size_t cells = 0;
  double shift = 0;    ///< exp(median log ratio) − 1
  double spread = 0;   ///< of the log ratios around the shift (1.4826 MAD)
  double within = 0;   ///< the cells' own standard error of the log ratio (median)
  double between = 0;  ///< tau: what the cells' own intervals leave out
  /// The shift's own uncertainty: each file's machine level (the standard error of its study's
  /// mean pace, which every cell of the study shares; the median over its cells' runs, 0 when the
  /// file does not carry it) and the median's standard error over the cells, in quadrature
  double level_before = 0, level_after = 0;
  double shift_sd = 0;       ///< of the log shift
  double shift_p_value = 1;  ///< a normal test of the log shift against 0
  Interval shift_ci95;       ///< of the shift, as a ratio after / before
};

/// One backend's cells against the other backends' cells of the same comparison: whether the
/// backend as a whole changed relative to the rest. A change of one backend by 10 % cannot be told
/// from a cell's noise on a shared machine (a cell's rounds spread by 15-20 % there), nor from a
/// whole study's drift (every cell a few % slower in the next hour), but its cells together, each
/// compared with the other backends' cells measured in the same windows, can: the drift cancels.
struct GroupChange {
  /// what the cells share: "backend" (jax, torch, ...) or "mode" (eager, compiled): a change in the
  /// code hits one backend or one mode's cells, where the machine's drift hits them all
  std::string dimension = "backend";
  std::string name;                        ///< the backend or mode
  std::size_t cells = 0, other_cells = 0;  ///< tested cells of the group and of the others
  /// median of the group's cell ratios / median of the other cells' ratios (after / before)
  double ratio = 0;
  Interval ratio_ci95;                 ///< percentile bootstrap over both sets of cells
  std::optional<RankTest> test;        ///< U test of the group's cell ratios against the others'
  Change change = Change::kNotTested;  ///< faster, slower, no significant change; not tested: too few cells
  double p_value() const { return test ? test->p_value : 1.0; }
};

/// How fast the machine itself was in each file: the median of the canary read before every
/// round of the compared cells (docs/profiling.md §2a, "The machine's canary").
struct MachineChange {
  double before_seconds = 0, after_seconds = 0;
  std::size_t before_rounds = 0, after_rounds = 0;
  double change = 0;  ///< after / before - 1: positive when the machine's memory was slower after
};

/// The machine's pace within one file, read from the cells themselves: per tick (sweep, pass: a
/// pass over every group, seconds to a minute), the median over the tick's rounds of round median
/// / its cell's estimate. Every cell's rounds spread over the study, so a tick at 1.2 means every
/// cell ran 20 % slower then: the machine, not any one cell.
struct PaceDrift {
  std::size_t ticks = 0;     ///< ticks with at least 8 rounds
  double low = 0, high = 0;  ///< the 10th and 90th percentile of the ticks' paces
  double spread() const { return low > 0 ? high / low - 1 : 0; }
};
/// A pace spread at least this large in either file is a warning of compare: the machine moved
/// within the study by more than the intervals of its cells can hold.
inline constexpr double kPaceWarningSpread = 0.25;

struct ResultsComparison {
  std::string before_path, after_path;
  std::optional<PaceDrift> before_pace, after_pace;  ///< files with rounds in 3 or more full ticks
  /// both files' rounds read the canary (CPU studies written since it exists); else empty
  std::optional<MachineChange> machine;
  /// The same from the CPU canary (a chain of multiply-adds before every round): the cores' pace
  std::optional<MachineChange> cpu;
  /// between the two files, from the cells themselves (10 tested cells or more)
  std::optional<StudyEffect> studies;
  double alpha = 0.05;
  double min_effect = 0.05;       ///< |ratio - 1| below this is "no significant change" whatever p says
  std::vector<CellChange> cells;  ///< in the order of the after file
  /// per backend, then per mode, where the files hold two or more of them (a group is tested with
  /// at least 3 tested cells in it and 3 beside it)
  std::vector<GroupChange> groups;
  std::vector<CellKey> only_before;   ///< cells the after file lacks
  std::vector<CellKey> only_after;    ///< new cells
  std::vector<std::string> warnings;  ///< repeated cells (the last run counts), different hardware
};

/// Compares matching cells of `before` and `after` at significance level `alpha` (0 < alpha < 1)
/// with minimum effect `min_effect` (0 <= min_effect < 1); kInvalidArgument otherwise.
ResultsComparison compare_results(const ResultsFile& before, const ResultsFile& after, double alpha = 0.05,
                                  double min_effect = 0.05);

/// The cells slower by more than `threshold` (a fraction: 0.05 is 5%) with family-wise
/// significance: what a CI gate fails on (compare --fail-if-slower). Each cell's U test is judged
/// against Holm-Bonferroni's thresholds over every tested cell (alpha / m for the smallest p,
/// alpha / (m - 1) for the next, ... until one is not below its threshold), so that an A/A of m
/// cells fails the gate with chance at most alpha; a cell's own result (`change`, at alpha each)
/// is what the comparison prints. The gate spends alpha / 2 on the cells and alpha / 2 on the
/// backends (groups_slower_than), so that the two together keep the A/A's chance at most alpha.
std::vector<const CellChange*> slower_than(const ResultsComparison& comparison, double threshold);
/// How many cells were tested (have a U test): the m of slower_than's correction.
std::size_t tested_cells(const ResultsComparison& comparison);
/// The backends slower than the other backends by more than `threshold` with family-wise
/// significance (Holm over the tested groups), the other half of the CI gate.
std::vector<const GroupChange*> groups_slower_than(const ResultsComparison& comparison, double threshold);
/// Whether every cell moved slower together by more than `threshold` (the study effect's common
/// shift) with significance: the gate fails on it, as it cannot tell the machine's drift from the
/// code's change beyond what the two studies' machine levels explain. The shift is one more test in
/// the backends' Holm family (their alpha / 2).
bool shift_slower_than(const ResultsComparison& comparison, double threshold);

}  // namespace neuralcost
