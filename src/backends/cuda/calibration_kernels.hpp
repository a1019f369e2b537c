// The CUDA plugin's measurements: our own kernels (calibration_kernels.cu) and cuBLASLt GEMMs
// (gemm_peaks.cpp). Each returns the ceilings it measured; what a part cannot do is skipped with
// the reason.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.hpp"

namespace neuralcost::cuda {

/// HBM copy and triad, L2 read, FP32 and FP64 FMA, launch floor on `device`.
std::vector<Ceiling> measure_kernel_ceilings(int device, bool quick);

/// cuBLASLt GEMM peaks for tf32, bf16, fp16 and fp8 (fp8 from compute capability 8.9); `skipped`
/// gets (name, why) for each dtype the part or the library cannot run.
std::vector<Ceiling> measure_gemm_ceilings(int device, bool quick,
                                           std::vector<std::pair<std::string, std::string>>& skipped);

/// Fills `n` elements of `type` (fp32, bf16, fp16, fp8 e4m3) at `p` with uniform values in [-1, 1)
/// from a hash of (seed, index), on `stream`: GEMM inputs as a real model's, not a constant.
void fill_uniform(void* p, size_t n, cudaDataType_t type, unsigned long long seed, cudaStream_t stream);

/// Work whose FLOPs and DRAM bytes are known by construction, for checking the counters.
struct KnownWork {
  std::string kernel;  ///< copy, triad, fp32_fma (launched in this order)
  double fp32_flops = 0;
  double dram_bytes = 0;  ///< compulsory bytes read + written (0: not a memory kernel)
};

/// Launches the copy, triad and FP32 FMA kernels once each on the default stream of `device`,
/// synchronised; returns what each must do.
std::vector<KnownWork> launch_known_kernels(int device);

}  // namespace neuralcost::cuda
