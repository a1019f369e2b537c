// Error checks of the CUDA plugin: a failing CUDA or cuBLASLt call throws with the call, its
// code and its name, and the plugin's C entry point turns the exception into its error text.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace neuralcost::cuda {

struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    throw CudaFailure(std::string(what) + ": " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
  }
}

/// Times `reps` calls of `launch` on `stream` with CUDA events; seconds per call, the best of `rounds`.
template <typename Launch>
double best_seconds_per_call(cudaStream_t stream, int rounds, int reps, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    const double s = ms * 1e-3 / reps;
    if (s < best) best = s;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

/// One measured ceiling, as the plugin reports it (docs/gpu.md §3).
struct Ceiling {
  std::string name;  ///< hbm_copy, hbm_triad, l2_read, fp32_fma, fp64_fma, gemm_bf16, ..., launch_floor
  double value = 0;
  std::string unit;  ///< B/s, FLOP/s, s
  std::string how;   ///< the kernel and its size
};

}  // namespace neuralcost::cuda
