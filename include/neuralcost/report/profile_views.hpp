// Views of profile runs: per run, its timing and a per-layer table of measured time against
// the roofline; then one summary row per run. JSON is the stable interface (docs/json-schema.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/measure/comparison.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {

/// Table/Markdown: for each run a block like
///
///   ff, libtorch eager, batch 32 on this machine [host]
///   median 113 µs (95% CI 113 µs - 114 µs, n 20, CV 2.3%), ...; verdict ok
///   layer          kind    op           output  FLOPs   bytes   lower bound  measured  share  waste    efficiency
///   limit block0.linear  none    aten::t              0       0 B     0 s          517 ns    0.5%   517 ns   - -
///   block0.linear  linear  aten::addmm  32x128  6.43 M  519 kB  21.5 µs      76.7 µs   67.7%  55.2 µs  28.1% compute
///   ...
///   unattributed (dispatch, framework)                                      3.05 µs   2.7%   3.05 µs
///   total (timed median)                        7.63 M  773 kB  25.6 µs      113 µs    100%   87.7 µs  22.6% compute
///
/// whose rows `options` groups, sorts and cuts (measure/layer_table.hpp); a model file's block
/// has, after its title, the values its inputs were filled with ("inputs: ids: 8x128 int64, ...").
/// Then the summary across runs. CSV: the layer rows of every run that has them, each keyed by
/// model, backend, mode and batch; the summary rows when no run has layers.
std::string render_profile(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware, Format format,
                           const LayerTableOptions& options = {});

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
