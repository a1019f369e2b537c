// The CUDA contract (see contract.hpp).
#include "neuralcost/gpu/contract.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/gpu/nvml.hpp"

namespace neuralcost {
namespace {

template <typename T>
std::string or_unknown(const std::optional<T>& v) {
  if (!v) return "unknown";
  if constexpr (std::is_same_v<T, bool>) {
    return *v ? "on" : "off";
  } else {
    return fmt::format("{}", *v);
  }
}

std::string text_or_unknown(const std::string& s) { return s.empty() ? "unknown" : s; }

/// Calls `symbol` (int f(int*), like cudaRuntimeGetVersion) in the first of `libraries` that loads.
std::optional<long> library_version(std::initializer_list<const char*> libraries, const char* symbol,
                                    bool returns_value) {
  for (const char* lib : libraries) {
    void* h = ::dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    void* fn = ::dlsym(h, symbol);
    std::optional<long> out;
    if (fn && returns_value) {
      out = reinterpret_cast<std::size_t (*)()>(fn)();  // cudnnGetVersion returns size_t
    } else if (fn) {
      int v = 0;
      if (reinterpret_cast<int (*)(int*)>(fn)(&v) == 0) out = v;
    }
    ::dlclose(h);
    if (out) return out;
  }
  return std::nullopt;
}

}  // namespace

std::string cudnn_version_text(long v) {
  if (v <= 0) return "unknown";
  if (v >= 90000) return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

void write_cuda_contract(const CudaContract& g, std::map<std::string, std::string>& c) {
  c["gpu.index"] = std::to_string(g.index);
  c["gpu.name"] = text_or_unknown(g.gpu_name);
  c["gpu.driver_version"] = text_or_unknown(g.driver_version);
  c["gpu.cuda_driver_version"] = text_or_unknown(g.cuda_driver_version);
  c["gpu.cuda_runtime_version"] = text_or_unknown(g.cuda_runtime_version);
  c["gpu.cudnn_version"] = text_or_unknown(g.cudnn_version);
  c["gpu.sm_clock_mhz"] = or_unknown(g.sm_clock_mhz);
  c["gpu.memory_clock_mhz"] = or_unknown(g.memory_clock_mhz);
  c["gpu.max_sm_clock_mhz"] = or_unknown(g.max_sm_clock_mhz);
  c["gpu.max_memory_clock_mhz"] = or_unknown(g.max_memory_clock_mhz);
  c["gpu.application_sm_clock_mhz"] = or_unknown(g.application_sm_clock_mhz);
  c["gpu.application_memory_clock_mhz"] = or_unknown(g.application_memory_clock_mhz);
  c["gpu.power_limit_watts"] = or_unknown(g.power_limit_watts);
  c["gpu.persistence_mode"] = or_unknown(g.persistence_mode);
  c["gpu.ecc"] = g.ecc_enabled ? or_unknown(g.ecc_enabled) : "unknown or not supported";
  c["gpu.mig"] = g.mig_enabled ? or_unknown(g.mig_enabled) : "unknown or not supported";
  std::string unknown;
  for (const std::string& u : g.unknown) unknown += (unknown.empty() ? "" : "; ") + u;
  if (!unknown.empty()) c["gpu.unknown"] = unknown;
}

std::vector<std::string> cuda_contract_warnings(const CudaContract& g) {
  std::vector<std::string> w;
  if (g.mig_enabled.value_or(false)) {
    w.push_back(
        fmt::format("cuda:{} is in MIG mode: the run had a slice of the GPU, but the roofline is the whole "
                    "part's (name a spec of the slice with --hardware)",
                    g.index));
  }
  if (g.application_sm_clock_mhz && g.max_sm_clock_mhz && *g.application_sm_clock_mhz < *g.max_sm_clock_mhz) {
    w.push_back(
        fmt::format("cuda:{}'s application SM clock is {} MHz, below its maximum {} MHz: the spec's peaks "
                    "assume the boost clock",
                    g.index, *g.application_sm_clock_mhz, *g.max_sm_clock_mhz));
  }
  if (g.persistence_mode && !*g.persistence_mode) {
    w.push_back(
        fmt::format("cuda:{} has persistence mode off: the driver may tear the GPU's state down between "
                    "processes, so each run pays its initialisation (nvidia-smi -pm 1)",
                    g.index));
  }
  return w;
}

CudaContract query_cuda_contract(int index, const Nvml* nvml, const std::string& nvml_missing) {
  CudaContract g;
  g.index = index;
  const CudaDevices& found = cuda_devices();
  g.cuda_driver_version = found.driver_cuda_version;
  for (const CudaDeviceInfo& d : found.devices) {
    if (d.index == index) g.gpu_name = d.name;
  }
  if (const auto v =
          library_version({"libcudart.so.13", "libcudart.so.12", "libcudart.so"}, "cudaRuntimeGetVersion", false)) {
    g.cuda_runtime_version = cuda_version_text(static_cast<int>(*v));
  } else {
    g.unknown.push_back("CUDA runtime version: no libcudart found by dlopen (the framework may bring its own)");
  }
  if (const auto v = library_version({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, "cudnnGetVersion", true)) {
    g.cudnn_version = cudnn_version_text(*v);
  } else {
    g.unknown.push_back("cuDNN version: no libcudnn found by dlopen (the framework may bring its own)");
  }
  if (!nvml) {
    g.unknown.push_back("clocks, persistence, ECC, MIG, driver version: " + nvml_missing);
    return g;
  }
  // NVML numbers devices by PCI order, CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID: say so when names differ
  if (const auto n = nvml->name(index)) {
    if (!g.gpu_name.empty() && *n != g.gpu_name) {
      g.unknown.push_back(
          fmt::format("NVML's device {} is '{}' but CUDA's is '{}': set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                      "so that both count alike",
                      index, *n, g.gpu_name));
    }
    if (g.gpu_name.empty()) g.gpu_name = *n;
  }
  g.driver_version = nvml->driver_version().value_or("");
  g.sm_clock_mhz = nvml->clock_mhz(index, NvmlClock::kSm);
  g.memory_clock_mhz = nvml->clock_mhz(index, NvmlClock::kMemory);
  g.max_sm_clock_mhz = nvml->max_clock_mhz(index, NvmlClock::kSm);
  g.max_memory_clock_mhz = nvml->max_clock_mhz(index, NvmlClock::kMemory);
  g.application_sm_clock_mhz = nvml->application_clock_mhz(index, NvmlClock::kSm);
  g.application_memory_clock_mhz = nvml->application_clock_mhz(index, NvmlClock::kMemory);
  g.power_limit_watts = nvml->power_limit_watts(index);
  g.persistence_mode = nvml->persistence_mode(index);
  g.ecc_enabled = nvml->ecc_enabled(index);
  g.mig_enabled = nvml->mig_enabled(index);
  return g;
}

}  // namespace neuralcost
