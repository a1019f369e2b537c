// The rows of a measured forward pass's per-layer table, from the backend's timed events.
#pragma once

#include <vector>

#include "neuralcost/measure/profile.hpp"

namespace neuralcost {

/// One row per framework op of `t` (an event), holding the records of `a` that came from it,
/// named by module (see LayerMeasurement::module); kInternal when the profiled and the captured
/// runs differ.
std::vector<LayerMeasurement> measure_layers(const Analysis& a, const LayerTiming& t);

}  // namespace neuralcost
