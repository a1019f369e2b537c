// Internal to calibration: the GEMM ceiling through the BLAS libraries frameworks use
// (OpenBLAS, oneDNN), square matrices, best of repeated runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "neuralcost/hardware/calibration.hpp"

namespace neuralcost {

/// OpenBLAS sgemm and dgemm, oneDNN sgemm, at n = 2048 (1536 when quick) on `threads` threads.
std::vector<GemmCeiling> measure_gemm(int threads, bool quick);

/// The libraries' versions and the kernels they chose (OpenBLAS core name, oneDNN ISA).
std::map<std::string, std::string> gemm_environment();

}  // namespace neuralcost
