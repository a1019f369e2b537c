// The CUDA part of a GPU run's timing contract: which GPU, which driver, CUDA and cuDNN, and the
// settings that change its speed (clocks, application clocks, persistence, ECC, MIG). Filled from
// NVML and the CUDA libraries on the machine (query_cuda_contract), or by hand in tests; written
// into the run's contract map and checked for what distorts a measurement.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuralcost {

class Nvml;

struct CudaContract {
  int index = 0;                                              ///< cuda:N
  std::string gpu_name;                                       ///< NVML's (or the driver's) name
  std::string driver_version;                                 ///< "570.124.06" (NVML)
  std::string cuda_driver_version;                            ///< the CUDA version the driver supports, "13.0"
  std::string cuda_runtime_version;                           ///< of the libcudart this process finds, "13.0"
  std::string cudnn_version;                                  ///< of the libcudnn this process finds, "9.10.2"
  std::optional<int> sm_clock_mhz, memory_clock_mhz;          ///< now
  std::optional<int> max_sm_clock_mhz, max_memory_clock_mhz;  ///< the part's maximum
  std::optional<int> application_sm_clock_mhz, application_memory_clock_mhz;  ///< the clocks kernels run at
  std::optional<double> power_limit_watts;
  std::optional<bool> persistence_mode;
  std::optional<bool> ecc_enabled;  ///< empty: the part has no ECC setting (or NVML could not tell)
  std::optional<bool> mig_enabled;  ///< empty: the part has no MIG
  /// What could not be read, and why ("NVML is not available: ...").
  std::vector<std::string> unknown;
};

/// Adds the contract's fields to `contract` under "gpu.*" keys ("gpu.name", "gpu.driver_version",
/// "gpu.sm_clock_mhz", ...); a field nobody could read is "unknown".
void write_cuda_contract(const CudaContract& cuda, std::map<std::string, std::string>& contract);

/// What in the contract distorts a measurement or its roofline: MIG on (a slice of the GPU, not
/// the spec's whole part), application clocks below the maximum, persistence off.
std::vector<std::string> cuda_contract_warnings(const CudaContract& cuda);

/// Reads the contract of cuda:`index` from `nvml` (may be null: then `nvml_missing` is recorded
/// in `unknown`) and from the CUDA runtime and cuDNN libraries found by dlopen.
CudaContract query_cuda_contract(int index, const Nvml* nvml, const std::string& nvml_missing);

/// "9.10.2" from cudnnGetVersion's 91002 (cuDNN 9: major x 10000 + minor x 100 + patch; before
/// 9: major x 1000 + minor x 100 + patch).
std::string cudnn_version_text(long version);

}  // namespace neuralcost
