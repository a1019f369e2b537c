// NVML through dlopen (see nvml.hpp). Signatures from NVML's API reference; every call's
// nvmlReturn_t is checked and a failure becomes an empty answer, never a guess.
#include "neuralcost/gpu/nvml.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace neuralcost {
namespace {

constexpr int kNvmlSuccess = 0;
using NvmlDevice = void*;  // nvmlDevice_t is an opaque pointer

}  // namespace

struct Nvml::Functions {
  int (*init)() = nullptr;                                   // nvmlInit_v2
  int (*shutdown)() = nullptr;                               // nvmlShutdown
  const char* (*error_string)(int) = nullptr;                // nvmlErrorString
  int (*driver_version)(char*, unsigned) = nullptr;          // nvmlSystemGetDriverVersion
  int (*count)(unsigned*) = nullptr;                         // nvmlDeviceGetCount_v2
  int (*handle)(unsigned, NvmlDevice*) = nullptr;            // nvmlDeviceGetHandleByIndex_v2
  int (*name)(NvmlDevice, char*, unsigned) = nullptr;        // nvmlDeviceGetName
  int (*power)(NvmlDevice, unsigned*) = nullptr;             // nvmlDeviceGetPowerUsage (mW)
  int (*energy)(NvmlDevice, unsigned long long*) = nullptr;  // nvmlDeviceGetTotalEnergyConsumption (mJ)
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;       // nvmlDeviceGetEnforcedPowerLimit (mW)
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;        // nvmlDeviceGetClockInfo
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;    // nvmlDeviceGetMaxClockInfo
  int (*app_clock)(NvmlDevice, int, unsigned*) = nullptr;    // nvmlDeviceGetApplicationsClock
  int (*persistence)(NvmlDevice, int*) = nullptr;            // nvmlDeviceGetPersistenceMode
  int (*ecc)(NvmlDevice, int*, int*) = nullptr;              // nvmlDeviceGetEccMode (current, pending)
  int (*mig)(NvmlDevice, unsigned*, unsigned*) = nullptr;    // nvmlDeviceGetMigMode (current, pending)
};

std::unique_ptr<Nvml> Nvml::load(std::string& why, const std::string& library) {
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    why = fmt::format("NVML is not available: {} cannot be loaded ({}); it comes with the NVIDIA driver", library,
                      e ? e : "dlopen failed");
    return nullptr;
  }
  auto f = std::make_unique<Functions>();
  auto bind = [h](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, symbol));
  };
  bind(f->init, "nvmlInit_v2");
  bind(f->shutdown, "nvmlShutdown");
  bind(f->error_string, "nvmlErrorString");
  bind(f->driver_version, "nvmlSystemGetDriverVersion");
  bind(f->count, "nvmlDeviceGetCount_v2");
  bind(f->handle, "nvmlDeviceGetHandleByIndex_v2");
  bind(f->name, "nvmlDeviceGetName");
  bind(f->power, "nvmlDeviceGetPowerUsage");
  bind(f->energy, "nvmlDeviceGetTotalEnergyConsumption");
  bind(f->power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  bind(f->clock, "nvmlDeviceGetClockInfo");
  bind(f->max_clock, "nvmlDeviceGetMaxClockInfo");
  bind(f->app_clock, "nvmlDeviceGetApplicationsClock");
  bind(f->persistence, "nvmlDeviceGetPersistenceMode");
  bind(f->ecc, "nvmlDeviceGetEccMode");
  bind(f->mig, "nvmlDeviceGetMigMode");
  // the ones without which nothing works; the others are optional per driver version
  if (!f->init || !f->shutdown || !f->count || !f->handle || !f->name) {
    why = fmt::format(
        "NVML is not available: {} lacks nvmlInit_v2 / nvmlDeviceGetHandleByIndex_v2 (not NVML, or "
        "one older than driver 450)",
        library);
    ::dlclose(h);
    return nullptr;
  }
  if (const int rc = f->init(); rc != kNvmlSuccess) {
    const char* e = f->error_string ? f->error_string(rc) : nullptr;
    why = fmt::format("NVML is not available: nvmlInit_v2 failed ({})", e ? e : fmt::format("nvmlReturn_t {}", rc));
    ::dlclose(h);
    return nullptr;
  }
  std::unique_ptr<Nvml> n(new Nvml);
  n->handle_ = h;
  n->f_ = std::move(f);
  return n;
}

Nvml::~Nvml() {
  if (f_ && f_->shutdown) f_->shutdown();
  // the library stays mapped: NVML's own threads may outlive shutdown on some drivers
}

void* Nvml::device(int index) const {
  NvmlDevice d = nullptr;
  if (index < 0 || f_->handle(static_cast<unsigned>(index), &d) != kNvmlSuccess) return nullptr;
  return d;
}

std::optional<std::string> Nvml::driver_version() const {
  char buffer[96] = {};
  if (!f_->driver_version || f_->driver_version(buffer, sizeof buffer) != kNvmlSuccess) return std::nullopt;
  return std::string(buffer);
}

int Nvml::device_count() const {
  unsigned n = 0;
  return f_->count(&n) == kNvmlSuccess ? static_cast<int>(n) : 0;
}

std::optional<std::string> Nvml::name(int index) const {
  void* d = device(index);
  char buffer[96] = {};
  if (!d || f_->name(d, buffer, sizeof buffer) != kNvmlSuccess) return std::nullopt;
  return std::string(buffer);
}

std::optional<double> Nvml::power_watts(int index) const {
  void* d = device(index);
  unsigned mw = 0;
  if (!d || !f_->power || f_->power(d, &mw) != kNvmlSuccess) return std::nullopt;
  return mw / 1000.0;
}

std::optional<double> Nvml::total_energy_joules(int index) const {
  void* d = device(index);
  unsigned long long mj = 0;
  if (!d || !f_->energy || f_->energy(d, &mj) != kNvmlSuccess) return std::nullopt;
  return static_cast<double>(mj) / 1000.0;
}

std::optional<double> Nvml::power_limit_watts(int index) const {
  void* d = device(index);
  unsigned mw = 0;
  if (!d || !f_->power_limit || f_->power_limit(d, &mw) != kNvmlSuccess) return std::nullopt;
  return mw / 1000.0;
}

namespace {
std::optional<int> clock_of(int (*fn)(NvmlDevice, int, unsigned*), void* d, NvmlClock c) {
  unsigned mhz = 0;
  if (!d || !fn || fn(d, static_cast<int>(c), &mhz) != kNvmlSuccess) return std::nullopt;
  return static_cast<int>(mhz);
}
}  // namespace

std::optional<int> Nvml::clock_mhz(int index, NvmlClock c) const { return clock_of(f_->clock, device(index), c); }
std::optional<int> Nvml::max_clock_mhz(int index, NvmlClock c) const {
  return clock_of(f_->max_clock, device(index), c);
}
std::optional<int> Nvml::application_clock_mhz(int index, NvmlClock c) const {
  return clock_of(f_->app_clock, device(index), c);
}

std::optional<bool> Nvml::persistence_mode(int index) const {
  void* d = device(index);
  int on = 0;
  if (!d || !f_->persistence || f_->persistence(d, &on) != kNvmlSuccess) return std::nullopt;
  return on != 0;
}

std::optional<bool> Nvml::ecc_enabled(int index) const {
  void* d = device(index);
  int current = 0, pending = 0;
  if (!d || !f_->ecc || f_->ecc(d, &current, &pending) != kNvmlSuccess) return std::nullopt;  // NOT_SUPPORTED: no ECC
  return current != 0;
}

std::optional<bool> Nvml::mig_enabled(int index) const {
  void* d = device(index);
  unsigned current = 0, pending = 0;
  if (!d || !f_->mig || f_->mig(d, &current, &pending) != kNvmlSuccess) return std::nullopt;
  return current != 0;
}

}  // namespace neuralcost
