// The view of a data-parallel training step (`analyze --train --parallel dp=N --system ID`):
// step time and its limit, throughput, compute, each collective's link time and exposed share,
// per-device memory against the device's.
#pragma once

#include <string>

#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

std::string render_data_parallel(const TrainingReport& report, const DataParallelStep& step,
                                 const DataParallelRequest& request, Format format);

}  // namespace neuralcost
