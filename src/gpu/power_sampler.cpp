// Power sampling around a timed phase (see power_sampler.hpp).
#include "neuralcost/gpu/power_sampler.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "neuralcost/gpu/nvml.hpp"
#include "neuralcost/gpu/power.hpp"

namespace neuralcost {
namespace {

/// NVML's power reading, and its energy counter where the part has one. NVML's docs: on A100 and
/// later parts nvmlDeviceGetPowerUsage is a one-second average, so the counter is preferred.
class NvmlPowerReader final : public PowerReader {
 public:
  NvmlPowerReader(std::unique_ptr<Nvml> nvml, int index) : nvml_(std::move(nvml)), index_(index) {}
  std::optional<double> watts() override { return nvml_->power_watts(index_); }
  std::optional<double> energy_joules() override { return nvml_->total_energy_joules(index_); }
  std::string description() const override {
    return "NVML nvmlDeviceGetPowerUsage (energy from nvmlDeviceGetTotalEnergyConsumption where the part has it)";
  }
  double period_seconds() const override { return 0.02; }

 private:
  std::unique_ptr<Nvml> nvml_;
  int index_;
};

/// nvidia-smi, one process per reading: slow (tens of ms each), hence its longer period.
class NvidiaSmiPowerReader final : public PowerReader {
 public:
  explicit NvidiaSmiPowerReader(int index)
      : command_(
            fmt::format("nvidia-smi --query-gpu=power.draw --format=csv,noheader,nounits -i {} 2>/dev/null", index)) {}
  std::optional<double> watts() override {
    FILE* p = ::popen(command_.c_str(), "r");
    if (!p) return std::nullopt;
    std::string text;
    char buffer[128];
    while (std::fgets(buffer, sizeof buffer, p)) text += buffer;
    if (::pclose(p) != 0) return std::nullopt;
    return parse_nvidia_smi_power(text);
  }
  std::string description() const override { return "nvidia-smi --query-gpu=power.draw (NVML could not be loaded)"; }
  double period_seconds() const override { return 0.1; }

 private:
  std::string command_;
};

}  // namespace

std::optional<double> parse_nvidia_smi_power(const std::string& text) {
  std::istringstream in(text);
  double w = 0;
  std::string rest;
  if (!(in >> w) || (in >> rest) || w < 0) return std::nullopt;
  return w;
}

std::unique_ptr<PowerReader> open_power_reader(int index, std::string& why) {
  std::string nvml_why;
  if (std::unique_ptr<Nvml> nvml = Nvml::load(nvml_why)) {
    if (index < nvml->device_count()) return std::make_unique<NvmlPowerReader>(std::move(nvml), index);
    nvml_why = fmt::format("NVML sees {} device(s), not cuda:{}", nvml->device_count(), index);
  }
  auto smi = std::make_unique<NvidiaSmiPowerReader>(index);
  if (smi->watts()) return smi;
  why = fmt::format("no GPU power readings: {}; and nvidia-smi did not answer with cuda:{}'s power", nvml_why, index);
  return nullptr;
}

PowerSampler::PowerSampler(std::unique_ptr<PowerReader> reader, int batch, std::shared_ptr<PowerLog> log)
    : reader_(std::move(reader)), batch_(batch), log_(std::move(log)) {}

PowerSampler::~PowerSampler() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
}

double PowerSampler::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

void PowerSampler::loop() {
  const auto period = std::chrono::duration<double>(reader_->period_seconds());
  auto next = std::chrono::steady_clock::now();
  while (running_) {
    const double t = now();
    if (const auto w = reader_->watts()) {
      std::lock_guard lock(mutex_);
      samples_.push_back({t, *w});
    }
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    std::this_thread::sleep_until(next);
  }
}

void PowerSampler::start() {
  running_ = false;  // a start without a stop ends the earlier phase's thread first
  if (thread_.joinable()) thread_.join();
  origin_ = std::chrono::steady_clock::now();
  samples_.clear();
  energy_at_start_ = reader_->energy_joules();
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void PowerSampler::summarize_phase(double end, std::optional<double> energy_at_end, int passes, PowerSummary& s) const {
  try {
    s = summarize_power(samples_, 0, end, passes, std::max(1, batch_), reader_->period_seconds());
    if (energy_at_start_ && energy_at_end && *energy_at_end > *energy_at_start_) {
      PowerSummary counter =
          summarize_energy_counter(*energy_at_start_, *energy_at_end, end, passes, std::max(1, batch_));
      counter.peak_watts = s.peak_watts;
      counter.samples_in_phase = s.samples_in_phase;
      s = counter;
    }
    if (s.peak_watts && s.average_watts && *s.peak_watts < *s.average_watts) {
      // seen on an H200: the readings are averages, and their highest can lie below the energy
      // counter's average of the phase; such a "peak" would mislead
      s.problems.push_back(fmt::format(
          "power peak not reported: the highest power reading ({:.0f} W) is below the phase's average from the "
          "energy counter ({:.0f} W); the readings are averages over a second or so",
          *s.peak_watts, *s.average_watts));
      s.peak_watts.reset();
    }
  } catch (const std::exception& e) {
    // a reading the driver should never give: the run stands, its power figures do not
    s = PowerSummary{};
    s.problems.push_back(std::string("power figures dropped: ") + e.what());
  }
}

void PowerSampler::stop(int iterations, double seconds, Counters& out) {
  const double end = now();
  const std::optional<double> energy_at_end = reader_->energy_joules();
  running_ = false;
  if (thread_.joinable()) thread_.join();
  // one reading after the phase, so that its end is interpolated rather than extrapolated
  if (const auto w = reader_->watts()) samples_.push_back({now(), *w});
  (void)seconds;  // the sampler's own clock spans the phase; `seconds` is the sum of the timed passes
  const int passes = std::max(1, iterations);
  PowerSummary s;
  if (end < kMinPowerPhaseSeconds) {
    // seen on an H200: a 0.06 s phase "averaged" 794 W under a 700 W limit by the energy counter
    s.problems.push_back(fmt::format(
        "power not reported: the timed phase lasted {:.3g} s, shorter than the {:.0f} s over which NVML averages "
        "its power readings and updates its energy counter (rounds of {:.0f} s or more: --budget of --rounds "
        "seconds or more, and a --target-ci as small as 0.0001 so that a round spends its share)",
        end, kMinPowerPhaseSeconds, kMinPowerPhaseSeconds));
  } else {
    summarize_phase(end, energy_at_end, passes, s);
  }
  if (s.average_watts) out.push_back({"gpu_power_average_watts", *s.average_watts, "W", Counter::Kind::kTotal});
  if (s.peak_watts) out.push_back({"gpu_power_peak_watts", *s.peak_watts, "W", Counter::Kind::kTotal});
  if (s.energy_per_pass_joules) {
    out.push_back({"gpu_energy_per_pass_joules", *s.energy_per_pass_joules, "J", Counter::Kind::kPerIteration});
  }
  if (s.energy_per_sample_joules && batch_ > 0) {
    out.push_back({"gpu_energy_per_sample_joules", *s.energy_per_sample_joules, "J", Counter::Kind::kPerIteration});
  }
  if (s.samples_per_joule && batch_ > 0)
    out.push_back({"gpu_samples_per_joule", *s.samples_per_joule, "1/J", Counter::Kind::kTotal});
  out.push_back({"gpu_power_samples", static_cast<double>(samples_.size()), "", Counter::Kind::kTotal});
  if (std::getenv("NEURALCOST_GPU_RECORD") != nullptr) {
    static std::atomic<int> phases{0};
    PowerRecord r{fmt::format("recorded by neural-cost's power sampler: {}, every {:.3g} s", reader_->description(),
                              reader_->period_seconds()),
                  "",
                  reader_->period_seconds(),
                  0,
                  end,
                  passes,
                  std::max(1, batch_),
                  samples_};
    record_gpu_file(fmt::format("power_{}_{}.json", ::getpid(), phases++), power_record_json(r));
  }
  if (log_) {
    log_->source = fmt::format("{}, every {:.3g} s", reader_->description(), reader_->period_seconds());
    log_->summary = s;
    log_->samples = samples_;
  }
}

}  // namespace neuralcost
