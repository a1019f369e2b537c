// The view of a train-to-target study (`neural-cost train-to-target`, docs/to-target.md): the
// contract in one paragraph, a row per configuration (runs that reached the target, MLPerf's
// olympic mean, means with their 95 % intervals, throughput, cost), each configuration against
// the first, and the approximations.
#pragma once

#include <string>

#include "neuralcost/measure/to_target.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

std::string render_to_target(const ToTargetStudy& study, Format format);

/// The study as one HTML page that works offline (`vega_script` inlined, load_vega_script): the
/// text view, and the validation accuracy of every run against its time (and, when priced, its
/// cost) with the target as a line, coloured by configuration. `path` names the study file.
std::string render_to_target_html(const ToTargetStudy& study, const std::string& path, const std::string& vega_script);

}  // namespace neuralcost
