// Rounds: the unit of evidence of a measured cell (docs/profiling.md, "Rounds"). A round is the
// cell timed in its own window of time (after other cells ran, some rounds in a freshly
// prepared model: a fresh worker process); a cell's estimate is the median of its rounds'
// medians and its 95 % interval comes from the rounds (order statistics of the round medians),
// never from passes of one window treated as independent: on a shared machine the variance lives
// between windows. Pure arithmetic here; the schedule that takes the rounds is schedule.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/core/statistics.hpp"

namespace neuralcost {

struct RoundOptions {
  int rounds = 6;       ///< rounds per cell at least (6: the [min, max] of 6 medians is a 96.9 % interval)
  int max_rounds = 12;  ///< more while the interval is wider than ok_half_width, up to this
  /// Preparations per cell: its rounds are split over this many, each in a freshly prepared
  /// model (a fresh worker process), each in its own sweep over the study's cells. A cell whose
  /// rounds disagree gets one more, for its rounds beyond `rounds` (schedule.hpp)
  int processes = 1;
  /// The verdict's threshold: `ok` needs the 95 % interval within this fraction of the estimate
  /// on both sides (and a 95 % coverage: at least 6 rounds)
  double ok_half_width = 0.05;
  std::uint64_t seed = 1;  ///< of the interleaving order (the same seed, the same order)
};

/// One round of a cell.
struct Round {
  int process = 0;  ///< which preparation of the cell took it (0: the first)
  int sweep = 0;    ///< the schedule's sweep (rounds of one sweep and pass of a group were taken side by side)
  int pass = 0;     ///< the pass over the group's cells within the sweep: (sweep, pass) pairs rounds of two cells
  double start_seconds = 0;  ///< when it started, from the start of the schedule
  std::vector<double> samples_seconds;
  SampleSummary summary;
  std::vector<std::string> reasons;  ///< what the timing contract mistrusted in this round (load, clock)
  /// The machine's canary read just before the round (a 64 MiB stream, CPU runs): how fast the
  /// machine's memory was; 0 when not read (GPU runs, files written before it)
  double machine_seconds = 0;
  /// The CPU canary read just before the round (a chain of multiply-adds, CPU runs): how fast the
  /// cores were; 0 when not read
  double cpu_canary_seconds = 0;
  /// How much the resident memory of the model's process grew over the round's own passes
  /// (bytes; 0 when not read: GPU runs, rounds resumed from a file)
  double memory_growth_bytes = 0;
};

struct RoundsEstimate {
  std::size_t rounds = 0;
  double median_seconds = 0;       ///< the median of the round medians
  MedianInterval interval;         ///< order statistics of the round medians (coverage says what it holds)
  double relative_half_width = 0;  ///< max(estimate - low, high - estimate) / estimate
  /// Robust relative spreads: within a round, the median over rounds of 1.4826 MAD / median of
  /// its passes; between rounds, 1.4826 MAD / median of the round medians
  double within_round_spread = 0;
  double between_round_spread = 0;
  /// The spread of round medians that within-round noise alone would give (the median's standard
  /// error, 1.2533 x within spread / sqrt(passes)); between_round_spread above it means the
  /// variance lives between windows
  double expected_between_spread = 0;
  std::string dominant;  ///< "between rounds" or "within rounds"
  /// The canary over the cell's rounds (those that read it): its median and robust relative
  /// spread, 1.4826 MAD / median; 0 when no round read it
  double machine_seconds = 0;
  double machine_spread = 0;
  /// The machine's level over the study (MachineLevel): its standard deviation (log units, about
  /// relative), added in quadrature to the rounds' interval; 0 when it was not read
  double level_spread = 0;
  std::size_t level_ticks = 0;  ///< the ticks it was read from (0: not read)
  Interval rounds_interval;     ///< the rounds' own interval, before the level was added
};

/// The machine's level over a study (docs/profiling.md, "The machine's level"). Every cell's
/// rounds share it: a slow stretch of the machine slows all the rounds taken in it, and a study's
/// mean level is one draw of it, which the rounds of one cell, treated as independent, cannot see
/// (the next study draws another). It is read from the rounds of all the study's cells: log round
/// median = cell + tick's pace + noise, fitted by median polish (Tukey), where a tick is a pass of
/// the schedule over its cells (the rounds taken side by side); the ticks in time order are cut
/// into kLevelBatches batches, and the standard error of their mean is the spread of the batch
/// means over sqrt(batches) (the batch-means method for a series whose values are correlated in
/// time). Not read (spread 0) from fewer than kLevelMinCells cells or 2 * kLevelBatches ticks:
/// with two cells, one cell's own jump is half the pace of its ticks.
struct LevelPoint {
  std::int64_t tick = 0;  ///< which pass of the schedule took the round
  std::size_t cell = 0;
  double seconds = 0;     ///< when the round started
  double log_median = 0;  ///< log of the round's median
};
struct MachineLevel {
  double spread = 0;  ///< the standard error of the study's mean pace (log units); 0: not read
  std::size_t ticks = 0, cells = 0;
  std::vector<double> batch_means;  ///< each batch's mean pace (log units), in time order
};
inline constexpr std::size_t kLevelBatches = 4;
inline constexpr std::size_t kLevelMinCells = 3;
MachineLevel machine_level(const std::vector<LevelPoint>& points);

/// The estimate and interval of a cell from its rounds (at least one; kInvalidArgument otherwise),
/// the interval widened by the machine's level where it was read: in log units, each side's
/// half-width becomes sqrt(half² + (1.96 level.spread)²).
RoundsEstimate estimate_rounds(const std::vector<Round>& rounds, const MachineLevel& level = {});

/// Whether the estimate's interval is narrow enough to act on (and holds 95 %).
bool rounds_agree(const RoundsEstimate& estimate, const RoundOptions& options);

/// Why a cell's rounds are not `ok`, as one reason line; empty when they agree. When they
/// disagree it also names what this machine showed makes them do so: more than one
/// `intra_op_threads` (0: unknown), and the machine's canary moving 5 % or more over the rounds.
/// Memory that grows pass by pass (docs/profiling.md "Memory that grows"): over the later half of
/// the rounds (at least 2), the resident memory of the model's process grew in at least 3 of 4
/// rounds and by at least kGrowthPerPassLimit a pass on average. Then the reason to mistrust the
/// cell, with the growth per pass; else empty.
inline constexpr double kGrowthPerPassLimit = 256.0 * 1024;
struct MemoryGrowth {
  double bytes_per_pass = 0;
  std::string reason;  ///< empty when the memory does not grow
};
MemoryGrowth memory_growth(const std::vector<Round>& rounds);

std::string rounds_disagreement(const RoundsEstimate& estimate, const RoundOptions& options, int intra_op_threads = 0);

/// A seeded random permutation of 0..n-1 (std::mt19937_64 seeded with seed and salt, a
/// Fisher-Yates shuffle): the same arguments give the same order on every machine.
std::vector<std::size_t> seeded_order(std::size_t n, std::uint64_t seed, std::uint64_t salt);

/// A paired comparison of two cells whose rounds were taken side by side (the same sweep and
/// pass): per pair the ratio b / a of their round medians; the estimate is the median ratio and
/// the interval its order-statistic 95 % interval. `pairs` 0 when none pair, and when either cell
/// has two rounds at one (sweep, pass): rounds not taken tick by tick (a profile's processes at
/// sweep 0, pass 0) have no partner to pair with.
struct PairedRatio {
  std::size_t pairs = 0;
  double ratio = 0;
  MedianInterval interval;
};
PairedRatio paired_ratio(const std::vector<Round>& a, const std::vector<Round>& b);
/// The same from round medians already paired (a[i] with b[i]).
PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b);
/// Whether every (sweep, pass) of `ticks` occurs once: the rounds can be paired tick by tick.
bool one_round_a_tick(const std::vector<std::pair<int, int>>& ticks);
/// Whether a paired ratio is narrow enough to state: its interval holds 95 % and lies within
/// `ok_half_width` of the ratio on both sides (the verdict's threshold); true when nothing pairs.
bool paired_ratio_agrees(const PairedRatio& ratio, const RoundOptions& options);

}  // namespace neuralcost
