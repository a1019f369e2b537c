// A study: every model × backend × mode × batch profiled under the timing contract, one cell
// at a time, into a JSON Lines results file that survives interruption and can be resumed
// (docs/profiling.md, "Studies"; the line format: docs/json-schema.md, "Results lines").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/measure/profile.hpp"
#include "neuralcost/measure/rounds.hpp"

namespace neuralcost {

struct StudyCell {
  const Backend* backend = nullptr;
  std::string model;
  std::string mode;
  std::int64_t batch = 0;
};

/// "model|backend|mode|batch|device": a cell's identity in a results file.
std::string cell_key(const std::string& model, const std::string& backend, const std::string& mode, std::int64_t batch,
                     const std::string& device);

/// Every cell of `plan` (models and their backends) × modes (each backend's own when empty) ×
/// batches (a model file: its own batch, the first dimension of its first input).
std::vector<StudyCell> study_cells(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                   const ProfileOptions& options);

/// The settings that make a results file's cells comparable, written in its header: the model
/// options, the timing contract, the device and threads, the hardware id. `--resume` refuses a
/// file whose settings differ, naming the first difference.
nlohmann::json study_settings(const ModelRequest& base, const ProfileOptions& options, const std::string& hardware_id);

/// What a results file already holds, for --resume.
struct StudyProgress {
  bool has_header = false;
  nlohmann::json settings;     ///< the header's "study" object
  std::set<std::string> done;  ///< cell_key of every run line (failed ones too)
  /// the round lines of cells without a run line (a study cut short keeps its finished rounds)
  std::map<std::string, std::vector<Round>> rounds;
  std::uint64_t good_bytes = 0;  ///< the length of the file up to its last complete line
  std::uint64_t cut_bytes = 0;   ///< a last line cut short (not a whole JSON object): dropped
  bool missing_newline = false;  ///< the last line is whole but unterminated: a newline is added
};
/// Reads `path` (which must exist): its header's settings and the cells of its run lines. A last
/// line without its newline that is not a whole JSON object (a write cut short) is not a cell; the
/// file is cut back to good_bytes before appending (cut_bytes says how much). One that is whole is
/// read, and missing_newline asks for its newline. A line that is not JSON elsewhere is kDataLoss
/// naming it.
StudyProgress read_study_progress(const std::string& path);
/// The first difference between two settings objects ("--budget: 2 in the file, 0.5 now"), or empty.
std::string settings_difference(const nlohmann::json& in_file, const nlohmann::json& now);

/// A round line of a results file: {"round": {"cell": KEY, "process", "sweep", "pass",
/// "start_seconds", "samples_seconds", "reasons"}} (docs/json-schema.md, "Results lines").
nlohmann::json round_line(const std::string& cell, const Round& round);

/// Measures the cells (skipping those in progress.done, reusing progress.rounds) on the
/// interleaved schedule of measure/schedule.hpp, calling `on_round` as each round ends and
/// `on_run` as each cell is finished (failed ones too). Stops after a SIGINT/SIGTERM
/// (core/interrupt.hpp): a cell it cut short is not passed on (its rounds were). `time_limit`:
/// seconds for the whole study (0: none), which more rounds than the minimum must fit in.
/// Returns the number of cells finished.
std::size_t run_study(const std::vector<StudyCell>& cells, const ModelRequest& base, const HardwareSpec& hardware,
                      const ProfileOptions& options, const StudyProgress& progress, double time_limit,
                      const std::function<void(const Round&, const std::string& cell)>& on_round,
                      const std::function<void(const ProfileRun&, std::size_t index)>& on_run);

}  // namespace neuralcost
