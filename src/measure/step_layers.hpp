// Training: a measured step's per-layer rows from the backend's timed events (LayerTiming with
// step_phases), each holding the step-graph records it ran, for its FLOPs, bytes and lower bound.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/measure/profile.hpp"

namespace neuralcost {

/// The step's three phases as rows: forward (and recompute), backward (input and weight
/// gradients), optimizer, each with the records of its passes.
std::vector<LayerMeasurement> measure_phases(const Analysis& a, const LayerTiming& t);

/// The step's events as rows "PHASE: MODULE" (docs/profiling.md §4b). A record belongs to the
/// module whose forward or backward runs it: a forward record to its "module" attribute, the
/// loss to "loss", a gradient record to the module of the forward op it differentiates, a sum of
/// a tensor's partial gradients to the module of the op that produced the tensor (the weights'
/// module for a weight's), an optimizer record to the optimizer's one row. Each goes to the row
/// of its phase and module, else the row of the longest module holding it ("encoder0" for
/// "encoder0.norm1"; "" holds every module). A record no row holds gets a row without time, and
/// a warning in `warnings`. A row without records whose module holds another row's (a
/// container's own Python between its children) is dropped: its time is unattributed.
std::vector<LayerMeasurement> measure_step_layers(const Analysis& a, const LayerTiming& t,
                                                  std::vector<std::string>& warnings);

}  // namespace neuralcost
