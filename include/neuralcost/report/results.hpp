// Results files read back: what `profile --format json` prints (one document with `runs`) and
// what a study appends (JSON Lines: one run per line, optionally after a `{"hardware": ...}`
// header line; docs/json-schema.md#results-lines). The report, cost and compare read results
// only through this, so they never depend on how a result was produced.
//
// A file is never trusted: every run is checked field by field, and a line that is not JSON
// (truncated by an interrupted write), not a results line (foreign) or a run with a missing or
// ill-typed field is skipped with a warning that names its line; the good lines are still read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

/// One framework op of a measured run (a `layers[]` element).
struct ResultLayer {
  std::int64_t event = 0;
  std::string name;    ///< the framework's op name (outside text: escape it)
  std::string module;  ///< the module path users know ("stage0.conv"); empty in older files or when unknown
  std::string pass;    ///< a training step's row: its phase ("backward"), else empty
  /// How views name the layer: "PASS: MODULE" for a step's row, its module path, else
  /// "EVENT:NAME" (outside text: escape it); as layer_name() of measure/layer_table.hpp.
  std::string label() const {
    if (!pass.empty()) return module.empty() ? pass : pass + ": " + module;
    return module.empty() ? std::to_string(event) + ":" + name : module;
  }
  std::string kind;  ///< op kind of its record with the largest lower bound; empty when none
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  double lower_bound_seconds = 0;
  double measured_seconds = 0;  ///< on the run's scale (layers + unattributed = the timed median)
  double waste_seconds = 0;     ///< measured - lower bound, at least 0
  double efficiency = 0;
  std::string bound;  ///< "compute", "memory", or empty (no records)
  bool modeled = true;
};

/// One round of a run (timing.rounds[]): the unit of evidence of its estimate.
struct ResultRound {
  int process = 0, sweep = 0, pass = 0;  ///< (sweep, pass) pairs it with a round of another cell of the study
  double median_seconds = 0;
  double machine_seconds = 0;     ///< the machine's canary before the round (0: not read)
  double cpu_canary_seconds = 0;  ///< the CPU canary before the round (0: not read)
};

/// One run as the file holds it. Every figure is the file's: nothing is re-derived here.
struct ResultRun {
  std::string source;  ///< where it was read: "results.jsonl:7" or "profile.json: runs[3]"
  std::string model;   ///< outside text (a model file's path): escape it
  std::string backend;
  std::string mode;
  std::int64_t batch = 0;
  std::string device;
  std::string verdict;  ///< "ok", "mistrusted" or "failed": the run's outcome as written
  std::vector<std::string> reasons;
  std::string error;        ///< why it failed (failed runs only)
  std::string hardware_id;  ///< the spec its roofline used

  // Measured runs (verdict ok or mistrusted) only:
  double median_seconds = 0;
  double ci95_low_seconds = 0;
  double ci95_high_seconds = 0;
  double cv = 0;
  std::int64_t samples = 0;
  std::vector<double> samples_seconds;  ///< empty in files written before it was added
  std::vector<ResultRound> rounds;      ///< empty in files written before rounds (one window: overconfident)
  double interval_coverage = 0;         ///< of [ci95_low, ci95_high] from the rounds; 0 without rounds
  /// The machine's level over its study (the standard error of the study's mean pace, log units)
  /// that the interval carries; 0 when not read (files before it, too few cells)
  double level_spread = 0;
  /// the round medians
  std::vector<double> round_medians() const {
    std::vector<double> m;
    for (const ResultRound& r : rounds) m.push_back(r.median_seconds);
    return m;
  }
  double efficiency = 0;
  double fused_efficiency = 0;
  double samples_per_second = 0;
  double achieved_flops_per_second = 0;
  std::string bound;  ///< "compute" or "memory"
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;  ///< bytes read + written (unfused)
  double arithmetic_intensity = 0;
  double lower_bound_seconds = 0;
  double unattributed_seconds = 0;
  std::vector<ResultLayer> layers;
  std::map<std::string, std::string> contract;
  std::vector<std::string> warnings;

  bool failed() const { return verdict == "failed"; }
  bool mistrusted() const { return verdict == "mistrusted"; }
};

/// The workload a run measured: runs of two files match when these are equal. A training step
/// (contract workload = train) is another workload than the forward pass of the same cell.
struct CellKey {
  std::string model, backend, mode, device;
  std::int64_t batch = 0;
  bool training = false;
  auto operator<=>(const CellKey&) const = default;
};
CellKey cell_of(const ResultRun& run);
/// "transformer, jax jit, batch 4" (plus " on cuda:0" off the CPU, ", training step" for one).
std::string cell_name(const CellKey& cell);

struct ResultsFile {
  std::string path;
  std::vector<HardwareSpec> hardware;  ///< the specs the runs were measured against, first seen first
  std::vector<ResultRun> runs;         ///< in file order
  std::vector<std::string> warnings;   ///< what was skipped and why, "FILE:LINE: ..."
};

/// Parses the text of a results file (`origin` names it in messages): a profile document, or JSON
/// Lines. Throws kDataLoss for an empty file or a profile document that is not complete JSON;
/// bad lines become warnings. The result may have no runs (see require_runs).
ResultsFile parse_results(std::string_view text, const std::string& origin);
/// Reads and parses a results file; kNotFound when it cannot be opened.
ResultsFile read_results(const std::string& path);
/// Throws kDataLoss ("FILE: no runs to report (N lines skipped)") when `results` has no run.
void require_runs(const ResultsFile& results);

/// The spec named `id` in `results`, or nullptr.
const HardwareSpec* find_hardware(const ResultsFile& results, const std::string& id);

}  // namespace neuralcost
