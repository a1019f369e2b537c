// A data-parallel training step (`analyze --train --parallel dp=N --system ID`): the one-device
// step graph's roofline times on a timeline, its gradients reduced in DDP's buckets on a
// communication stream as they become ready (overlapped with the rest of the backward pass), or
// ZeRO's reduce-scatters and gathers; per-device memory from the ledger with the model states
// sharded by stage (docs/distributed.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/parallel/sharding.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {

struct DataParallelRequest {
  int ranks = 1;  ///< the data-parallel degree (devices)
  ZeroStage stage = ZeroStage::kNone;
  SystemSpec system;
  InterconnectSpec intra, inter;  ///< the system's links (or a calibrated one in place of intra)
  /// DDP's buckets: the first holds 1 MiB, the others 25 MiB (torch's defaults,
  /// dist._DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb).
  double first_bucket_bytes = 1024.0 * 1024;
  double bucket_bytes = 25.0 * 1024 * 1024;
  /// Each op's time × this: 1 for the roofline bound; a measured step over the bound puts the
  /// collectives on a measured run's timeline (the measured check, docs/distributed.md §7).
  double compute_scale = 1;
};

/// One kind of collective the step runs, summed over its calls.
struct StepCommunication {
  StepCollective collective;
  int calls = 0;               ///< buckets (DDP, ZeRO-1/2 gradients), else 1
  double seconds = 0;          ///< link time of all its calls
  double exposed_seconds = 0;  ///< what the step waits for (not hidden behind compute)
  double wire_bytes_per_rank = 0;
  std::string basis;  ///< "model", "measured", "measured, extrapolated"
};

struct DataParallelStep {
  int ranks = 1, per_node = 1, nodes = 1;
  ZeroStage stage = ZeroStage::kNone;
  std::int64_t batch_per_device = 0;
  double forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;  ///< one device, lower bounds
  double compute_seconds = 0;        ///< forward + backward + optimizer (the optimizer's share sharded by ZeRO)
  double communication_seconds = 0;  ///< every collective's link time
  double exposed_seconds = 0;        ///< communication the step waits for
  double step_seconds = 0;           ///< compute + exposed
  std::vector<StepCommunication> communication;
  ShardedStates states;
  std::uint64_t bucket_copy_bytes = 0;  ///< DDP: its flat gradient buckets (gradient_as_bucket_view off)
  std::uint64_t memory_lower_bytes = 0, memory_upper_bytes = 0;  ///< per device
  std::optional<double> device_memory_bytes;
  std::vector<std::string> approximations;
  /// One device's step FLOPs (exact, from the step graph): without recomputation (model) and with
  /// it (hardware), and the device's peak in the step's dtype.
  double model_flops = 0, hardware_flops = 0, peak_flops_per_second = 0;
  /// Model and hardware FLOPs utilization at the step bound: the most this layout can reach.
  double mfu() const { return step_seconds > 0 ? model_flops / (step_seconds * peak_flops_per_second) : 0; }
  double hfu() const { return step_seconds > 0 ? hardware_flops / (step_seconds * peak_flops_per_second) : 0; }

  /// samples per second over all devices: ranks × batch per device / step
  double samples_per_second() const {
    return step_seconds > 0 ? ranks * static_cast<double>(batch_per_device) / step_seconds : 0;
  }
  /// "fits" (the upper bound within the device's memory), "does not fit" (the lower bound above it),
  /// "may fit" (between), "unknown" (the spec gives no memory)
  std::string fit() const;
  /// "compute" or "link": which of the two the step waits for most
  std::string limit() const { return exposed_seconds > compute_seconds ? "link" : "compute"; }
};

/// A layout of `--parallel dp=N,tp=N[,pp=N,ep=N]` (each 1 when not given).
struct ParallelLayout {
  int dp = 1, tp = 1, pp = 1;
  int ep = 1;  ///< expert parallelism: a decoder's experts split over ep of the dp replicas
};
/// Parses --parallel. kInvalidArgument for anything but KEY=N pairs of dp, tp, pp, ep with N ≥ 1.
ParallelLayout parse_parallel_layout(const std::string& text);

/// One configuration of a search: a ZeRO stage over one report (a batch and checkpoint policy).
struct DataParallelCandidate {
  std::size_t report = 0;  ///< index into the reports searched
  DataParallelStep step;
};

/// Every ZeRO stage over every report (each a per-device batch and checkpoint policy of one
/// model), ranked: those that fit by samples/s (fastest first), then those that may fit, then the
/// rest. `base` gives the devices and links (its stage is ignored).
std::vector<DataParallelCandidate> rank_data_parallel(const std::vector<TrainingReport>& reports,
                                                      const DataParallelRequest& base);

/// The step of `report` (a one-device step of the per-device batch) over `request.ranks` devices.
/// Devices fill nodes of system.devices_per_node first. kInvalidArgument for ranks < 1, or ranks
/// above one node that are not a whole number of nodes.
DataParallelStep data_parallel_step(const TrainingReport& report, const DataParallelRequest& request);

}  // namespace neuralcost
