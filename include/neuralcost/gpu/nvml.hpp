// NVIDIA's management library (NVML), loaded at run time with dlopen: power, energy, clocks and
// the device settings a GPU measurement's contract records. nvml.h is not needed to build: the
// few functions used are declared in nvml.cpp with their documented C signatures. Where NVML is
// absent (no driver), load() says why and callers fall back (nvidia-smi) or report "unknown".
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace neuralcost {

/// NVML's clock domains (nvmlClockType_t).
enum class NvmlClock { kGraphics = 0, kSm = 1, kMemory = 2 };

class Nvml {
 public:
  /// Loads `library` and calls nvmlInit_v2. Null with `why` set when it cannot be loaded, lacks
  /// NVML's functions, or does not initialise (no driver loaded, no permission).
  static std::unique_ptr<Nvml> load(std::string& why, const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::optional<std::string> driver_version() const;
  int device_count() const;
  std::optional<std::string> name(int index) const;
  /// Power draw in watts (nvmlDeviceGetPowerUsage; on A100-and-later drivers a 1 s average).
  std::optional<double> power_watts(int index) const;
  /// Energy since the driver loaded, in joules (nvmlDeviceGetTotalEnergyConsumption; Volta+).
  std::optional<double> total_energy_joules(int index) const;
  std::optional<double> power_limit_watts(int index) const;
  std::optional<int> clock_mhz(int index, NvmlClock clock) const;
  std::optional<int> max_clock_mhz(int index, NvmlClock clock) const;
  std::optional<int> application_clock_mhz(int index, NvmlClock clock) const;
  std::optional<bool> persistence_mode(int index) const;
  std::optional<bool> ecc_enabled(int index) const;
  std::optional<bool> mig_enabled(int index) const;

  struct Functions;  ///< the loaded entry points (nvml.cpp)

 private:
  Nvml() = default;
  void* device(int index) const;
  void* handle_ = nullptr;
  std::unique_ptr<Functions> f_;
};

}  // namespace neuralcost
