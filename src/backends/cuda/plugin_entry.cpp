// The CUDA plugin's C entry points (neuralcost_cuda.so), loaded by src/gpu/gpu_calibration.cpp
// with dlopen only when a CUDA device exists: the library itself never links the CUDA runtime.
// A plain C interface with JSON text in and out, so that no C++ type crosses the boundary.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include <cuda.h>

#include "backends/cuda/calibration_kernels.hpp"
#include "backends/cuda/range_profiler.hpp"

namespace {

char* copy_out(const std::string& text) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p) std::memcpy(p, text.c_str(), text.size() + 1);
  return p;
}

}  // namespace

extern "C" {

/// The version of this C interface; the loader refuses another.
__attribute__((visibility("default"))) int neuralcost_cuda_plugin_version() { return 1; }

/// Measures the ceilings of CUDA device `device`. Returns 0 and sets *json (docs/gpu.md §3), or
/// non-zero and sets *error; free either with neuralcost_cuda_free.
__attribute__((visibility("default"))) int neuralcost_cuda_calibrate(int device, int quick, char** json, char** error) {
  try {
    cudaDeviceProp prop{};
    neuralcost::cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::vector<std::pair<std::string, std::string>> skipped;
    std::vector<neuralcost::cuda::Ceiling> all = neuralcost::cuda::measure_kernel_ceilings(device, quick != 0);
    for (auto& c : neuralcost::cuda::measure_gemm_ceilings(device, quick != 0, skipped)) all.push_back(std::move(c));
    nlohmann::json doc;
    doc["device_name"] = prop.name;
    doc["compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    doc["multiprocessors"] = prop.multiProcessorCount;
    doc["l2_bytes"] = prop.l2CacheSize;
    doc["cuda_runtime_version"] = runtime;
    doc["ceilings"] = nlohmann::json::array();
    for (const auto& c : all)
      doc["ceilings"].push_back({{"name", c.name}, {"value", c.value}, {"unit", c.unit}, {"how", c.how}});
    doc["skipped"] = nlohmann::json::array();
    for (const auto& [name, why] : skipped) doc["skipped"].push_back({{"name", name}, {"why", why}});
    *json = copy_out(doc.dump());
    return 0;
  } catch (const std::exception& e) {
    *error = copy_out(e.what());
    return 1;
  }
}

/// Runs kernels of known FLOPs and bytes (copy, triad, FP32 FMA) under CUPTI's range profiler with
/// the counter study's metrics; *json gets per kernel the metrics and the expected figures.
__attribute__((visibility("default"))) int neuralcost_cuda_counter_check(int device, char** json, char** error) {
  try {
    neuralcost::cuda::check(cudaSetDevice(device), "cudaSetDevice");
    neuralcost::cuda::check(cudaFree(nullptr), "cudaFree (creating the context)");
    CUcontext ctx = nullptr;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
      throw neuralcost::cuda::CudaFailure("cuCtxGetCurrent: no context");
    neuralcost::cuda::RangeProfiler profiler(ctx, device, neuralcost::cuda::counter_study_metrics(), 16);
    profiler.start();
    const std::vector<neuralcost::cuda::KnownWork> work = neuralcost::cuda::launch_known_kernels(device);
    const std::vector<neuralcost::cuda::RangeValues> ranges = profiler.stop();
    nlohmann::json doc;
    doc["metrics"] = neuralcost::cuda::counter_study_metrics();
    doc["kernels"] = nlohmann::json::array();
    for (std::size_t i = 0; i < work.size(); ++i) {
      nlohmann::json k{{"kernel", work[i].kernel},
                       {"expected_fp32_flops", work[i].fp32_flops},
                       {"expected_dram_bytes", work[i].dram_bytes}};
      // auto ranges come in launch order; the setup's memsets are not kernels of ours
      const std::size_t r = ranges.size() >= work.size() ? ranges.size() - work.size() + i : i;
      if (r < ranges.size()) {
        k["range"] = ranges[r].name;
        k["metrics"] = ranges[r].metrics;
      }
      doc["kernels"].push_back(k);
    }
    doc["ranges"] = ranges.size();
    *json = copy_out(doc.dump());
    return 0;
  } catch (const std::exception& e) {
    *error = copy_out(e.what());
    return 1;
  }
}

__attribute__((visibility("default"))) void neuralcost_cuda_free(char* p) { std::free(p); }

}  // extern "C"
