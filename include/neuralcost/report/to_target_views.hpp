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

}  // namespace neuralcost
