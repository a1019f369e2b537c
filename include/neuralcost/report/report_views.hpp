// Views over results files: the study report (one self-contained HTML file with Vega charts, or
// Markdown), the cost of every run, and the comparison of two results files. They render what
// the results, findings.hpp, cost.hpp and results_comparison.hpp say and decide nothing.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "neuralcost/report/cost.hpp"
#include "neuralcost/report/findings.hpp"
#include "neuralcost/report/results.hpp"
#include "neuralcost/report/results_comparison.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {

/// What a report shows: the results and their findings, and optionally their cost and a
/// comparison with an earlier results file.
struct ReportInput {
  const ResultsFile* results = nullptr;
  Findings findings;
  std::optional<CostReport> cost;
  std::optional<ResultsComparison> comparison;
};

/// The report as one HTML file that works offline: `vega_script` (load_vega_script) is inlined,
/// the data and chart specs are embedded as JSON, and every name from outside is escaped.
/// Sections: findings in sentences; the roofline of the runs' hardware (compute roofs per
/// dtype, memory roofs per cache level and DRAM, ridge points) with every measured run as a
/// point and the per-layer points of a chosen run (hover: layer, kind, FLOPs, bytes, intensity,
/// time, efficiency, limit); latency with its 95% CI per model, framework and mode; an
/// efficiency heatmap; batch scaling; compiled-over-eager speedup; cost (with prices); the
/// comparison (with a baseline); every run with its verdict and CV; failed cells; warnings.
/// A page script records what each chart drew in a hidden <pre id="nc-check"> (for the
/// browser test): {"ready", "errors", "charts": {id: {"expected", "drawn", "marks": {name: items}}}}.
std::string render_report_html(const ReportInput& input, const std::string& vega_script);

/// The same report in Markdown: findings, tables (runs, failed cells, cost, comparison), no charts.
std::string render_report_markdown(const ReportInput& input);

/// The folder of Debian's libjs-vega modules: $NEURALCOST_VEGA_DIR, else the one found at build
/// time (usually /usr/share/javascript/vega).
std::string vega_directory();
/// Vega's modules from `dir` (Debian ships them one file each: vega-util.min.js, ...) wrapped as
/// one script that defines the global `vega` (parse, View). kNotFound naming the missing file and
/// the package (libjs-vega) when a module is not there.
std::string load_vega_script(const std::string& dir);

/// The cost of every run: table (per run: price, cost per sample and per million samples and
/// tokens with their intervals, money above the lower bound, the costliest layer), Markdown,
/// CSV or JSON (docs/json-schema.md#cost).
///
///   model  backend  mode  batch  per sample            per 1M samples   per 1M tokens  above bound /1M  costliest
///   layer ff     jax      jit   4      6.1e-09 (6.0-6.3e-09)  0.0061 USD       -              0.0052 USD 3:dot_general
std::string render_cost(const ResultsFile& results, const CostReport& cost, Format format);
nlohmann::json cost_json(const ResultsFile& results, const CostReport& cost);

/// Two results files cell by cell: before and after medians, the change with its 95% interval,
/// the U test's p-value and what it decides; then the cells only one file has.
///
///   cell                     before    after     change   95% CI            p       result
///   ff, jax jit, batch 4     120 µs    98.1 µs   -18.2%   -20.1% .. -16.0%  0.0001  faster
std::string render_results_comparison(const ResultsComparison& comparison, Format format);
nlohmann::json results_comparison_json(const ResultsComparison& comparison);

}  // namespace neuralcost
