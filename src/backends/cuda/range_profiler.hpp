// Hardware counters per kernel with CUPTI's range profiler (CUDA 12.6+; cupti_range_profiler.h):
// auto ranges (one range per kernel) and kernel replay, so that any number of metrics is
// collected by replaying each kernel as often as the metrics need. Lives in the CUDA plugin (it
// links CUPTI; libneuralcost does not). Not yet run on a GPU: bench/gpu_check.sh is its first test.
#pragma once

#include <cuda.h>

#include <map>
#include <string>
#include <vector>

namespace neuralcost::cuda {

/// The counter study's metrics (docs/gpu.md §4): FP32 and FP64 add/mul/fma thread instructions,
/// DRAM bytes read and written, L2 bytes, elapsed cycles.
const std::vector<std::string>& counter_study_metrics();

/// One profiled range (a kernel, in auto-range mode) and its metric values.
struct RangeValues {
  std::string name;
  std::map<std::string, double> metrics;
};

class RangeProfiler {
 public:
  /// Sets the range profiler up on `ctx` (the context the kernels run in) for `metrics`, for at
  /// most `max_ranges` kernels. Throws CudaFailure; counters not permitted to this user
  /// (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, the driver's ERR_NVGPUCTRPERM) say so by name.
  RangeProfiler(CUcontext ctx, int device, std::vector<std::string> metrics, std::size_t max_ranges);
  ~RangeProfiler();
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;

  /// Starts collecting: every kernel launched until stop() is a range.
  void start();
  /// Stops, decodes and evaluates every range.
  std::vector<RangeValues> stop();

  struct State;  ///< CUPTI's objects and images (range_profiler.cpp)

 private:
  State* s_;
};

}  // namespace neuralcost::cuda
