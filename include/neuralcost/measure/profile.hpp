// Profiling real runs: for each mode and batch, capture the ops that ran, analyse them on the
// roofline, time the model under the timing contract, time each layer with the backend's
// profiler, and record the contract. A run that fails is recorded with its error and the
// others go on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/measure/timing.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {

struct ProfileOptions {
  std::vector<std::string> modes;         ///< empty: the backend's default mode
  std::vector<std::int64_t> batches = {1};
  TimingOptions timing;
  int layer_runs = 20;                    ///< profiled passes for per-layer times (0: skip)
};

/// One framework op of a run (it may have become several op records).
struct LayerMeasurement {
  std::size_t event = 0;
  std::string name;                  ///< the framework's name, e.g. "aten::linear"
  std::vector<std::size_t> records;  ///< indices into ProfileRun::analysis.ops
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  double lower_bound_seconds = 0;
  double measured_seconds = 0;       ///< median over the profiled passes
  double efficiency = 0;             ///< lower bound / measured (0 when nothing was measured)
  std::optional<Bound> bound;        ///< the roof of its records' largest lower bound
  bool modeled = true;
};

struct ProfileRun {
  std::string backend;
  std::string mode;
  std::string model;
  std::int64_t batch = 0;
  bool failed = false;
  std::string error;              ///< why the run failed
  Analysis analysis;              ///< of the ops that actually ran
  TimingResult timing;
  /// analysis lower bound / median time. Above 1 means the run beat the unfused bound (the
  /// framework fused or reused data in cache); only beating the fused bound is mistrusted.
  double efficiency = 0;
  double fused_efficiency = 0;    ///< fused lower bound / median time
  double samples_per_second = 0;
  double achieved_flops_per_second = 0;
  std::vector<LayerMeasurement> layers;
  int profiled_passes = 0;           ///< passes run under the profiler for per-layer times
  double profiled_pass_seconds = 0;  ///< median wall time of the profiled passes
  double unattributed_seconds = 0;   ///< profiled pass - sum of layers: dispatch and framework overhead
  /// profiled pass / plain pass - 1, over passes interleaved with the profiled ones
  double profiling_overhead = 0;
  std::map<std::string, std::string> contract;  ///< everything needed to reproduce the figure
  std::vector<std::string> warnings;            ///< facts that distort this measurement
};

/// Throws kInvalidArgument naming the option when `options` cannot work with any backend.
void validate(const ProfileOptions& options);

/// Profiles `base` (model, sizes, threads) on `backend` for every mode and batch of `options`.
std::vector<ProfileRun> profile(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                const ProfileOptions& options);

}  // namespace neuralcost
