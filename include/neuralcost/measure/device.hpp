// Devices in the run interface. A backend offers devices (Backend::devices: cpu, cuda:0,
// ...), a run names one (RunOptions::device), and the roofline spec follows it unless the user
// names another. What a device contributes to a run beyond its time sits behind RunEnvironment:
// the samplers around the timed phase, how the clock is described, and environment facts and
// warnings. The CPU implements it in full; a GPU device adds its own (CUDA-event timing, clocks,
// counters) there without touching the profile pipeline.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/backend.hpp"
#include "neuralcost/core/counters.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/measure/timing.hpp"

namespace neuralcost {

/// Throws kNotFound when `backend` does not offer `device` on this machine, listing the ones it
/// offers.
void check_device_offered(const Backend& backend, const Device& device);

/// The --hardware of a run on `device` when the user names none: "host" (this machine,
/// calibrated) for cpu; for cuda:N the built-in spec whose device_names (or id, alias or name)
/// hold the GPU's name
/// as the first of `backends` that offers the device reports it. kNotFound asking for
/// --hardware when no backend can tell the name or the database has no such GPU.
std::string default_hardware_for(const std::vector<const Backend*>& backends, const Device& device,
                                 double worker_timeout_seconds);

/// Checks that `spec` is a roofline of `device`'s kind of hardware (its device_type). A spec for
/// another kind (a CPU's for a cuda run, a GPU's for a cpu run) is refused with
/// kInvalidArgument, unless `allow_mismatch`: then the returned warning says what is compared
/// with what. Empty when they match.
std::optional<std::string> check_hardware_matches(const HardwareSpec& spec, const Device& device, bool allow_mismatch);

/// What a device contributes to a run's measurement and contract.
class RunEnvironment {
 public:
  virtual ~RunEnvironment() = default;
  /// Samplers for the timed phase of `model`, whose passes carry `batch` samples each (for the
  /// per-sample figures, e.g. a GPU's energy per sample); they live as long as the run.
  virtual std::vector<std::unique_ptr<Sampler>> samplers(PreparedModel& model, std::int64_t batch) const = 0;
  /// How the samples of `timing` were taken, for the contract's "clock".
  virtual std::string clock(const TimingResult& timing) const = 0;
  /// Adds the device's facts to `contract` (which already holds the backend's environment) and
  /// the warnings about what distorts this measurement; `counters` are what the samplers measured.
  virtual void describe(std::map<std::string, std::string>& contract, const Counters& counters,
                        std::vector<std::string>& warnings) const = 0;
};

/// The run environment of `device`.
std::unique_ptr<RunEnvironment> run_environment(const Device& device);

}  // namespace neuralcost
