// The schedule of a measurement (docs/profiling.md, "Rounds"): every cell (a model, backend,
// mode and batch) is measured in rounds, and rounds of different cells are interleaved so that
// a slow stretch of the machine hits every cell alike.
//
// The cells are grouped by model and batch (the configurations a study compares). The schedule
// makes `processes` sweeps; in each, every cell it measures is prepared, group by group in a
// seeded random order (in the first sweep with capture, analysis and per-layer times; in later
// ones afresh), and stays prepared until the sweep ends: a worker's models share one process per
// framework and mode (RunOptions::process_pool), stopped while other cells run. After each group
// is prepared comes a tick, a pass over the prepared cells whose next round is due, each group's
// cells side by side in a seeded order, so that round (sweep, pass) of two cells of a group was
// taken side by side and pairs them; on a CPU the group's rounds of a tick are interleaved pass by
// pass (visits of a few ms in turn, cell_session.hpp), as the machine's pace moves faster than a
// round lasts. A cell's rounds are due at ticks spread evenly from its
// preparation to the sweep's last planned tick: its rounds sample the machine across the sweep
// (minutes), not the one window (seconds) in which it was prepared. After the last sweep a cell
// whose rounds agree is finished; those whose rounds disagree get an extra sweep, prepared afresh
// (fresh worker processes: what differs between processes is sampled where it matters), taking
// rounds until they agree or max_rounds, while the time limit allows; then they are finished:
// estimate and interval from the rounds, verdict, layers on their scale. A round that fails in a
// shared process is taken again after a new preparation: in a new shared process when another
// model had ended it (PreparedModel::lost_its_process), else in a process of its own from then on.
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
  std::string chosen_by;                ///< how its backend was chosen (the contract's backend_chosen_by), "" for none
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
