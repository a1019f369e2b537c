// Sampling a GPU's power during the timed phase of a run: a thread reads a PowerReader (NVML, or
// nvidia-smi when NVML cannot be loaded) at a stated period, and at the end of the phase the
// samples become counters (average and peak watts, energy per pass) through power.hpp's
// arithmetic. What made the figures doubtful is kept for the run's warnings.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "neuralcost/core/counters.hpp"
#include "neuralcost/gpu/power.hpp"

namespace neuralcost {

/// One source of power readings of one GPU.
class PowerReader {
 public:
  virtual ~PowerReader() = default;
  virtual std::optional<double> watts() = 0;
  /// (optional) A cumulative energy counter in joules; empty when the source has none.
  virtual std::optional<double> energy_joules() { return std::nullopt; }
  /// "NVML nvmlDeviceGetPowerUsage", "nvidia-smi --query-gpu=power.draw", for the contract.
  virtual std::string description() const = 0;
  /// The period to sample at, in seconds (what the source can sustain).
  virtual double period_seconds() const = 0;
};

/// The power reader of cuda:`index`: NVML when it loads, else nvidia-smi when it is on PATH and
/// answers; null with `why` naming both failures.
std::unique_ptr<PowerReader> open_power_reader(int index, std::string& why);

/// nvidia-smi's answer to --query-gpu=power.draw --format=csv,noheader,nounits: "71.42" -> 71.42;
/// "[N/A]", "[Not Supported]" or anything else that is not one number -> empty.
std::optional<double> parse_nvidia_smi_power(const std::string& text);

/// What a power sampler found in the last phase, shared with whoever writes the contract.
struct PowerLog {
  std::string source;  ///< the reader's description and period
  PowerSummary summary;
  std::vector<PowerSample> samples;  ///< the phase's samples (seconds from the phase's start)
};

class PowerSampler final : public Sampler {
 public:
  /// Samples `reader` every reader->period_seconds() from start() to stop(); `batch` for the
  /// per-sample figures (0: unknown, and they are left out).
  PowerSampler(std::unique_ptr<PowerReader> reader, int batch, std::shared_ptr<PowerLog> log);
  ~PowerSampler() override;
  void start() override;
  /// Adds gpu_power_average_watts, gpu_power_peak_watts, gpu_energy_per_pass_joules,
  /// gpu_energy_per_sample_joules and gpu_samples_per_joule (with a batch), and gpu_power_samples
  /// (each when computable; why not is in the log's summary.problems).
  void stop(int iterations, double seconds, Counters& out) override;

  /// A phase shorter than this gets no power figures: NVML's readings are averages over about a
  /// second on A100 and later parts, and its energy counter is updated about as coarsely.
  static constexpr double kMinPowerPhaseSeconds = 1.0;

 private:
  /// Power, energy and peak of a phase of `end` seconds into `s` (the readings and the counter).
  void summarize_phase(double end, std::optional<double> energy_at_end, int passes, PowerSummary& s) const;
  void loop();
  double now() const;
  std::unique_ptr<PowerReader> reader_;
  int batch_;
  std::shared_ptr<PowerLog> log_;
  std::chrono::steady_clock::time_point origin_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::mutex mutex_;
  std::vector<PowerSample> samples_;
  std::optional<double> energy_at_start_;
};

}  // namespace neuralcost
