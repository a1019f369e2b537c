// Views of profile runs: per run, its timing and a per-layer table of measured time against
// the roofline; then one summary row per run. JSON is the stable interface (docs/json-schema.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/measure/comparison.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {

/// Table/Markdown: for each run a block like
///
///   transformer, libtorch eager, batch 32 on this machine [host]
///   median 1.52 ms (95% CI 1.50-1.55 ms, n 140, CV 3.1%), verdict ok
///   layer               FLOPs  bytes   lower bound  measured  efficiency  bound
///   0:aten::transpose   0      0 B     0 s          1.2 µs    -           -
///   ...
///   unattributed (dispatch, framework)             85.0 µs
///
/// (a model file's block has, after its title, the values its inputs were filled with:
/// "inputs: ids: 8x128 int64, integers uniform in [0, 30522); mask: 8x128 fp32, standard normal")
/// then the summary across runs. CSV: the summary rows only.
std::string render_profile(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware, Format format);

/// Only the summary table across runs.
std::string render_profile_summary(const std::vector<ProfileRun>& runs, Format format);

/// Side by side (measure/comparison.hpp decides): a row per model, batch and mode, a column per
/// backend (median latency, efficiency, verdict), and whether the backends ran the same model
/// (same parameter count and contraction FLOPs), with a warning line for each workload where
/// they did not.
std::string render_comparison(const std::vector<ProfileRun>& runs, Format format);
nlohmann::json comparison_json(const std::vector<ProfileRun>& runs);

nlohmann::json profile_json(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware);
/// One element of profile_json's "runs": also one run line of a JSON Lines results file.
nlohmann::json profile_run_json(const ProfileRun& run);

}  // namespace neuralcost
