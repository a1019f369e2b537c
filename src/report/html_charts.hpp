// The Vega 5 chart specs of the HTML report (report/html_report.cpp), with their data inline.
// Every chart names the mark whose items are its data points, and says how many it should draw
// with the defaults: the page's check compares that with what was drawn.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/report/report_views.hpp"

namespace neuralcost::report {

struct Chart {
  std::string id;    ///< element id, "chart-roofline"
  std::string mark;  ///< the mark whose items are counted
  std::size_t expected = 0;
  nlohmann::json spec;
};

/// Achieved FLOP/s against arithmetic intensity under the roofs; `notes` gets what it left out.
Chart roofline_chart(const ResultsFile& results, std::vector<std::string>& notes);
/// Latency against batch, per backend and mode.
Chart latency_chart(const ResultsFile& results);
/// Roofline efficiency per model and configuration.
Chart heatmap_chart(const ResultsFile& results);
/// Samples/s against batch.
Chart scaling_chart(const ResultsFile& results);
/// The speedups the findings state, with their intervals.
Chart speedup_chart(const ResultsFile& results, const Findings& findings);
/// The ratios of a comparison of two results files.
Chart comparison_chart(const ResultsComparison& comparison);

}  // namespace neuralcost::report
