// The schedule of a measurement (docs/profiling.md, "Rounds"): every cell (a model, backend,
// mode and batch) is measured in rounds, and rounds of different cells are interleaved so that
// a slow stretch of the machine hits every cell alike.
//
// The cells are grouped by model and batch (the configurations a study compares). The schedule
// makes `processes` sweeps over the groups, each in a seeded random order. In a sweep, a group's
// cells are prepared (in the first sweep with capture, analysis and per-layer times; in later
// ones afresh, which for a worker is a fresh process) and their rounds are taken in passes, each
// pass over the group's cells in a seeded random order, so that round (sweep, pass) of two cells
// of a group was taken side by side and pairs them. After the last sweep a cell whose rounds
// agree is finished; one whose rounds disagree waits for an extra sweep, which prepares it
// afresh (a fresh worker process: what differs between processes is sampled where it matters)
// and takes more rounds, up to max_rounds, while the time limit allows; then it is finished:
// its estimate and interval from its rounds, its verdict, its layers on its scale.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/measure/profile.hpp"

namespace neuralcost {

/// One cell to measure.
struct CellPlan {
  const Backend* backend = nullptr;
  ModelRequest request;  ///< model, sizes, batch
  std::string mode;
  std::string chosen_by;  ///< how its backend was chosen (the contract's backend_chosen_by), "" for none
  std::optional<std::string> mismatch;  ///< a hardware-mismatch warning for its runs
};

struct ScheduleHooks {
  /// Each finished cell, failed ones too.
  std::function<void(const ProfileRun&, std::size_t cell)> on_run;
  /// Each round as it ends (to keep it: a resumed study reuses it).
  std::function<void(const Round&, std::size_t cell)> on_round;
  /// Rounds already taken, per cell (empty or one entry per cell): counted as done.
  std::vector<std::vector<Round>> done;
  /// After SIGINT/SIGTERM: finish the cells that have rounds (their verdict says they were cut
  /// short) instead of dropping them. A study keeps rounds in its file and does not.
  bool finish_partial_cells = true;
  /// Seconds for the whole schedule (0: no limit): the extra sweep prepares a cell only when its
  /// preparation (as long as its last one) fits in what is left, and takes rounds until it is spent.
  double time_limit_seconds = 0;
};

/// Measures `cells` under options.rounds (see above) and returns one run per cell, in the order
/// the cells were finished. A cell that cannot be prepared is a failed run; one whose later
/// preparation fails keeps its rounds, with a warning.
std::vector<ProfileRun> measure_cells(const std::vector<CellPlan>& cells, const HardwareSpec& hardware,
                                      const ProfileOptions& options, ScheduleHooks hooks = {});

/// The cells of `backend` for `base`: every batch of options.batches × mode of options.modes
/// (the backend's default without). Throws when the backend cannot run here, has no such mode or
/// device, or the options are invalid (the checks of profile()).
std::vector<CellPlan> backend_cells(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                    const ProfileOptions& options, const std::string& chosen_by = "");

}  // namespace neuralcost
