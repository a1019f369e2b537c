// Views of the links between devices: the built-in interconnects and systems (`hardware
// interconnects`, `hardware systems`) and a collective calibration (`hardware calibrate
// --collectives`; its JSON holds every point and the fitted interconnect spec).
#pragma once

#include <string>
#include <vector>

#include "neuralcost/calibrate/collective_calibration.hpp"
#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/calibrate/pipeline_parallel_check.hpp"
#include "neuralcost/calibrate/tensor_parallel_check.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

/// One row per link: id, kind, scope, line rate, achieved bus bandwidth and its share of the line
/// rate, step latency, in-network reduction.
std::string render_interconnects(const std::vector<InterconnectSpec>& specs, Format format);
/// One row per system: id, device, devices per node, links, NICs.
std::string render_systems(const std::vector<SystemSpec>& systems, Format format);
/// Per collective and rank count: its segments (α, bus bandwidth) and the fit's error on the sizes
/// it was not fitted to, against the 10 % the calibration aims at; then the notes.
std::string render_collective_calibration(const CollectiveCalibration& calibration, Format format);
/// A measured data-parallel step against its prediction (`profile --train --data-parallel N`):
/// step, compute and link time with their intervals over rounds, the ranks' skew, the predicted
/// link time, exposed time and step, and whether each is within `within` (15 %) of the measured.
std::string render_data_parallel_check(const DataParallelCheck& check, double within, Format format);
/// A measured tensor-parallel step against its prediction (`profile --train --tensor-parallel N`):
/// as render_data_parallel_check, with the collectives a step (measured and predicted) and the
/// parameters a rank (run and by the shard's graph).
std::string render_tensor_parallel_check(const TensorParallelCheck& check, double within, Format format);
/// A measured pipeline-parallel step against its prediction (`profile --train --pipeline-parallel
/// N`): the step and its bubble and transfers (the step less its busiest stage alone), each stage's
/// work alone, the transfers a step and each stage's parameters, measured and predicted.
std::string render_pipeline_parallel_check(const PipelineParallelCheck& check, double within, Format format);

}  // namespace neuralcost
