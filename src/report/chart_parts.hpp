// Parts the HTML report's charts share (html_charts.cpp): the Vega spec's base, selectors,
// scales and tooltips over a results file's runs.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/report/results.hpp"

namespace neuralcost::report::chart_parts {

/// A Vega 5 spec of `width` x `height` with the report's fonts and axes.
nlohmann::json base_spec(double width, double height);
/// A select input bound to a signal: `options` with their `labels`.
nlohmann::json select_signal(const std::string& name, const nlohmann::json& value, const nlohmann::json& options,
                             const nlohmann::json& labels, const std::string& label);
/// "model · backend mode"
std::string label_of(const ResultRun& r);
/// The distinct values of `field` over the runs (the measured ones only when asked), in order.
std::vector<std::string> distinct(const std::vector<ResultRun>& runs, std::string ResultRun::*field,
                                  bool measured_only);
/// Colour by backend, shape by mode.
nlohmann::json color_scale(const std::vector<ResultRun>& runs);
nlohmann::json shape_scale(const std::vector<ResultRun>& runs);
/// A run's tooltip: name, median and interval, intensity, achieved rate, efficiency, limit, verdict.
nlohmann::json run_tooltip(const ResultRun& r);
/// The largest batch of the measured runs (the default of the batch selectors).
std::int64_t largest_batch(const std::vector<ResultRun>& runs);
/// A select input over the batches.
nlohmann::json batch_selector(const std::set<std::int64_t>& batches, std::int64_t value);

}  // namespace neuralcost::report::chart_parts
