// The views of a decoder's training step over dp × tp × pp devices (`analyze DECODER --train
// --parallel dp=D,tp=T,pp=P --system ID`) and of the search over layouts (`--search --devices N`):
// the step and what it is made of (the busiest device's micro-batches, the bubble, the transfers,
// the exposed gradient reduction, the optimizer), MFU and HFU, and each pipeline stage's times and
// memory against the device's.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/parallel/model_parallel.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

/// One step of `model` (its name as analyze prints it).
std::string render_model_parallel(const std::string& model, const ModelParallelStep& step, Format format);

/// A ranked search (search_model_parallel): the first `top` rows (every one in JSON and CSV).
std::string render_model_parallel_search(const std::string& model, const std::vector<ModelParallelStep>& ranked,
                                         int devices, std::size_t top, Format format);

}  // namespace neuralcost
