// One cell while the schedule measures it (schedule.hpp): its prepared model between rounds, the
// rounds so far, and what its first preparation learnt (analysis, per-layer times, the model's
// contract facts). Implemented in profile.cpp, beside the pipeline's other steps.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/schedule.hpp"

namespace neuralcost {

/// A round's passes fewer than this are enough: the round's median is one value of the cell's
/// estimate, whose interval comes from the rounds.
inline constexpr int kRoundMinSamples = 5;

/// The least time a cell's visit takes when its round is interleaved pass by pass with the other
/// cells of its model and batch (CPU runs): a pass at least, and passes for 2 ms. The machine's
/// pace here moves on a scale of 10 to 100 ms, so cells measured this close together see the
/// same pace and their ratio (compiled over eager, one framework over another) keeps little of it.
inline constexpr double kInterleavedVisitSeconds = 0.002;

struct CellSession {
  CellPlan plan;
  ProfileRun run;  ///< identity; after open_session the analysis (and a training step's memory)
  OpGraph forward;
  std::unique_ptr<RunEnvironment> device;
  std::unique_ptr<PreparedModel> model;  ///< empty between preparations
  std::vector<std::unique_ptr<Sampler>> samplers;
  std::map<std::string, std::string> model_environment;
  std::string synchronisation;
  std::optional<LayerTiming> layer_timing;
  std::optional<TimingResult> first_timing;  ///< its counters and warm-up are the run's
  std::vector<Round> rounds;
  std::string round_error;  ///< why the last round that failed did (the cell's error when none was timed)
  int preparations = 0;
  std::string pool;     ///< the worker-process pool of its preparation (RunOptions::process_pool)
  bool fresh = false;   ///< prepared and not yet timed: its next round has the full warm-up
  bool alone = false;   ///< a round of its own ended a shared process: from then on, a process of its own
  bool opened = false;  ///< analysed (the first preparation)
  bool failed = false;  ///< finished as failed
};

/// The timing options of one round: --budget split over the rounds, the round's own verdict off,
/// a shorter warm-up unless the model was just prepared.
TimingOptions round_timing(const ProfileOptions& options, bool after_preparation);

/// Prepares the cell's model, captures and analyses it, starts its samplers and takes its
/// per-layer times (and a training step's measured memory). Throws when it cannot be prepared.
void open_session(CellSession& session, const HardwareSpec& hardware, const ProfileOptions& options);
/// The model prepared afresh (for a worker: a fresh process); throws when it cannot be.
void prepare_again(CellSession& session, const ProfileOptions& options);
/// Releases the model (a worker process ends).
void close_model(CellSession& session);
/// One round in the prepared model.
Round time_round(CellSession& session, const ProfileOptions& options, bool after_preparation);
/// A round taken in visits, interleaved with other cells' rounds pass by pass (schedule.cpp):
/// begin_round resumes the model and warms it up; the window's visits take its passes;
/// end_round pauses the model and makes the round. A visit that throws leaves the model
/// resumed: the caller closes it or calls end_round.
std::unique_ptr<TimingWindow> begin_round(CellSession& session, const ProfileOptions& options, bool after_preparation);
Round end_round(CellSession& session, TimingWindow& window);
/// The cell's run from its rounds: estimate, interval, verdict, rates, contract, layers;
/// `cut_short` (when not empty) is a reason to mistrust it (interrupted, a failed preparation).
/// `level`: the machine's level over the study's rounds so far (rounds.hpp), part of the interval.
ProfileRun finish_session(CellSession& session, const HardwareSpec& hardware, const ProfileOptions& options,
                          const std::string& cut_short, const MachineLevel& level = {});
/// The run of a cell that could not be measured at all.
ProfileRun failed_cell(const CellPlan& plan, const ProfileOptions& options, const std::string& error);

}  // namespace neuralcost
