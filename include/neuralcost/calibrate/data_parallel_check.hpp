// The measured check of a data-parallel step (`profile --train --data-parallel N`, issue 26):
// real DDP or FSDP training steps of a reference network in N local processes on torch.distributed
// (gloo), against the prediction from a calibrated link (`hardware calibrate --collectives
// --spec-output`): the same collectives on that link's measured α–β segments, put on the
// measured compute's timeline as data_parallel_step puts them (docs/distributed.md §7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/parallel/sharding.hpp"

namespace neuralcost {

struct DataParallelCheckRequest {
  std::string model = "cnn";  ///< a reference network
  std::int64_t batch = 32;    ///< per rank
  std::int64_t seq = 32, width = 128, depth = 2;
  int ranks = 2;
  ZeroStage stage = ZeroStage::kNone;  ///< kNone: DDP; kParameters: FSDP (fully_shard per child module)
  std::string optimizer = "sgd";       ///< sgd or adam
  int rounds = 7;                      ///< each alternates `steps` steps with and without communication
  int steps = 3;
  InterconnectSpec link;  ///< calibrated on this machine (its measured segments)
  HardwareSpec hardware;  ///< the roofline whose op times, scaled to the measured compute, give the timeline
  double deadline_seconds = 900;
  /// CPUs the ranks share (0: this process's affinity mask). gloo's collectives run on them too,
  /// so they overlap compute only with a CPU of their own for every rank (2 × ranks CPUs)
  int cpus = 0;
};

/// One measured quantity over the rounds: each round's median, their median and its 95 % interval
/// (order statistics of the round medians).
struct RoundFigure {
  std::vector<double> rounds;
  double median = 0;
  Interval ci95;
};

/// The figure of each round's median: their median and its 95 % interval.
RoundFigure round_figure(std::vector<double> round_medians);

struct DataParallelCheck {
  DataParallelCheckRequest request;
  std::string torch_version;
  std::uint64_t parameters = 0;           ///< elements (equal to the graph's: checked)
  RoundFigure step, compute, link, wait;  ///< seconds a step; link: the collectives' own time; wait: ranks' skew
  int collectives_per_step = 0;           ///< measured
  std::vector<std::string> collectives;   ///< measured kinds ("all_reduce", "all_gather_single", ...)
  std::vector<double> measured_buckets;   ///< DDP: its buckets' bytes
  std::vector<double> units;              ///< FSDP: each unit's parameter elements, as wrapped
  double predicted_link_seconds = 0;      ///< the collectives on the calibrated link
  double predicted_exposed_seconds = 0;   ///< what the step waits for, on the measured compute's timeline
  double predicted_step_seconds = 0;      ///< measured compute + predicted exposed
  int predicted_calls = 0;
  std::vector<std::string> notes;
  double step_error() const { return step.median > 0 ? predicted_step_seconds / step.median - 1 : 0; }
  double link_error() const { return link.median > 0 ? predicted_link_seconds / link.median - 1 : 0; }
};

/// The request's errors (the ones check_data_parallel names first), before anything slow runs.
void check_data_parallel_request(const DataParallelCheckRequest& request);

/// The prediction of `check` from its request and measured figures (compute, and FSDP's units):
/// the predicted link, exposed, step times and calls, and the notes saying how. Without a CPU of
/// its own for each rank's communication (request.cpus < 2 × ranks) nothing overlaps: the whole
/// link time is exposed.
void predict_data_parallel(DataParallelCheck& check);

/// Runs the steps (the torch worker's Python, `python -m neuralcost_worker collectives`) and
/// predicts them. kInvalidArgument for fewer than 2 ranks, another model, a ZeRO stage other than
/// DDP and FSDP, rounds or steps below 1, and a link without measured all-reduce (DDP) or
/// all-gather and reduce-scatter (FSDP) segments over `ranks`; kNotFound without the worker's
/// Python; the worker's failure (a rank that dies: every rank stopped) as one error.
DataParallelCheck check_data_parallel(const DataParallelCheckRequest& request);

}  // namespace neuralcost
