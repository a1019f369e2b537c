// Pieces of the GPU views shared by the host and backends views (gpu_view.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "neuralcost/gpu/cuda_devices.hpp"

namespace neuralcost::report {

/// {"available", "unavailable_reason", "driver_cuda_version", "devices": [{index, name, memory_bytes,
/// compute_capability, multiprocessors}]}
nlohmann::ordered_json cuda_json(const CudaDevices& cuda);
/// One line per device ("cuda:0  NVIDIA H200, 141 GB, compute 9.0, 132 SMs"), or one saying why none.
std::vector<std::pair<std::string, std::string>> cuda_lines(const CudaDevices& cuda);

}  // namespace neuralcost::report
