// Devices in the run interface (see device.hpp): names, the spec that follows a device, the
// mismatch check, and the run environments of the CPU and of CUDA devices.
#include "neuralcost/measure/device.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/process_memory.hpp"
#include "neuralcost/gpu/contract.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/gpu/nvml.hpp"
#include "neuralcost/gpu/power_sampler.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/environment.hpp"
#include "neuralcost/measure/load.hpp"

namespace neuralcost {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// Page faults per timed iteration in the process that runs the model (PreparedModel::page_faults).
class PageFaultSampler final : public Sampler {
 public:
  explicit PageFaultSampler(PreparedModel& model) : model_(model) {}
  void start() override { before_ = model_.page_faults(); }
  bool counts_own_passes() const override { return true; }
  void stop(int iterations, double, Counters& out) override {
    const std::optional<double> after = model_.page_faults();
    if (!before_ || !after || iterations < 1) return;
    out.push_back({"page_faults", (*after - *before_) / iterations, "faults", Counter::Kind::kPerIteration});
  }

 private:
  PreparedModel& model_;
  std::optional<double> before_;
};

/// Growth of the resident memory of the model's process over its own passes (a retained tensor
/// per pass shows as growth in every round, docs/profiling.md "Memory that grows").
class ResidentGrowthSampler final : public Sampler {
 public:
  explicit ResidentGrowthSampler(PreparedModel& model) : model_(model) {}
  void start() override { before_ = model_.resident_bytes(); }
  bool counts_own_passes() const override { return true; }
  void stop(int, double, Counters& out) override {
    const std::optional<double> after = model_.resident_bytes();
    if (!before_ || !after) return;
    out.push_back({"memory_growth", *after - *before_, "B", Counter::Kind::kTotal});
  }

 private:
  PreparedModel& model_;
  std::optional<double> before_;
};

/// The CPU: this machine's facts, its BLAS and thread pools, page faults of the timed phase, and
/// the load other processes and the hypervisor put on its CPUs meanwhile (measure/load.hpp).
class CpuEnvironment final : public RunEnvironment {
 public:
  std::vector<std::unique_ptr<Sampler>> samplers(PreparedModel& model, std::int64_t) const override {
    std::vector<std::unique_ptr<Sampler>> s;
    s.push_back(std::make_unique<PageFaultSampler>(model));
    s.push_back(std::make_unique<ResidentGrowthSampler>(model));
    s.push_back(make_load_sampler());
    return s;
  }

  std::string clock(const TimingResult& timing) const override {
    if (timing.backend_clock) {
      return "the backend's own clock around each forward pass (a worker: time.perf_counter_ns; LibTorch: "
             "std::chrono::steady_clock on the thread that runs its calls)";
    }
    return fmt::format("std::chrono::steady_clock, resolution {:.3g} s", timing.clock_resolution_seconds);
  }

  void describe(std::map<std::string, std::string>& c, const Counters& counters,
                std::vector<std::string>& warnings) const override {
    EnvironmentFacts env = detect_environment();
    // a backend in another process (a worker) says which BLAS it loaded; else it is this process's
    check_blas(env, c.count("blas_library") ? c["blas_library"] : loaded_blas_library());
    const Counter* faults = find_counter(counters, "page_faults");
    if (faults) check_page_faults(env, faults->value);
    const int intra = c.count("intra_op_threads") ? std::atoi(c["intra_op_threads"].c_str()) : 1;
    const int blas = c.count("openblas_threads") ? std::atoi(c["openblas_threads"].c_str()) : 1;
    check_oversubscription(env, intra, blas);
    for (const auto& [k, v] : env.variables) c[k == "blas_library" ? k : "env." + k] = v;
    c["cpu_model"] = env.cpu_model;
    if (!malloc_tuning().description.empty()) c["malloc"] = malloc_tuning().description;
    c["logical_cpus"] = std::to_string(env.logical_cpus);
    c["virtual_machine"] = env.virtual_machine ? "yes" : "no";
    // what makes rounds disagree (docs/profiling.md §2a, "Machine hygiene")
    c["transparent_hugepages"] = env.transparent_hugepages;
    c["frequency_governor"] = env.frequency_governor;
    c["numa_nodes"] = env.numa_nodes > 0 ? std::to_string(env.numa_nodes) : "unknown";
    c["cpus_pinned"] = env.machine_cpus > 0 ? fmt::format("{} of {}", env.logical_cpus, env.machine_cpus) : "unknown";
    // kept under its old name: the contract is read by scripts
    c["page_faults_per_iteration"] = faults ? fmt::format("{:.1f}", faults->value) : "unknown";
    warnings.insert(warnings.end(), env.warnings.begin(), env.warnings.end());
  }
};

/// A CUDA device reached through a backend that synchronises each pass itself (the torch worker).
/// Its samples are that backend's clock around a synchronised pass. The environment samples the
/// GPU's power during the timed phase (NVML, else nvidia-smi) and writes the CUDA contract (GPU,
/// driver, CUDA, cuDNN, clocks, persistence, ECC, MIG: gpu/contract.hpp).
class CudaEnvironment final : public RunEnvironment {
 public:
  explicit CudaEnvironment(int index) : index_(index), power_(std::make_shared<PowerLog>()) {}
  std::vector<std::unique_ptr<Sampler>> samplers(PreparedModel&, std::int64_t batch) const override {
    std::vector<std::unique_ptr<Sampler>> s;
    std::string why;
    if (std::unique_ptr<PowerReader> reader = open_power_reader(index_, why)) {
      // with the batch: energy per sample and samples per joule beside the energy per pass
      s.push_back(std::make_unique<PowerSampler>(std::move(reader), static_cast<int>(batch), power_));
    } else {
      power_->source = why;
    }
    return s;
  }
  std::string clock(const TimingResult& timing) const override {
    if (timing.backend_clock) {
      return "the backend's own clock around each forward pass, after the device synchronised (a worker: "
             "time.perf_counter_ns)";
    }
    return fmt::format("std::chrono::steady_clock around each synchronised pass, resolution {:.3g} s",
                       timing.clock_resolution_seconds);
  }
  void describe(std::map<std::string, std::string>& c, const Counters&,
                std::vector<std::string>& warnings) const override {
    const EnvironmentFacts env = detect_environment();
    c["host_cpu_model"] = env.cpu_model;
    c["cuda_device_index"] = std::to_string(index_);
    std::string nvml_why;
    const std::unique_ptr<Nvml> nvml = Nvml::load(nvml_why);
    const CudaContract contract = query_cuda_contract(index_, nvml.get(), nvml_why);
    write_cuda_contract(contract, c);
    for (std::string& w : cuda_contract_warnings(contract)) warnings.push_back(std::move(w));
    c["gpu.power_source"] = power_->source.empty() ? "not sampled" : power_->source;
    for (const std::string& p : power_->summary.problems) warnings.push_back("GPU power: " + p);
  }

 private:
  int index_;
  std::shared_ptr<PowerLog> power_;  // filled by the power sampler at the end of the timed phase
};

}  // namespace

void check_device_offered(const Backend& backend, const Device& device) {
  const std::vector<Device> offered = backend.devices();
  if (std::find(offered.begin(), offered.end(), device) == offered.end()) {
    // a backend that offers no CUDA device at all: the machine's reason, when it has one (a backend
    // that offers some sees GPUs, and the driver's view would only contradict it)
    const bool offers_cuda = std::any_of(offered.begin(), offered.end(), [](const Device& o) { return o.is_cuda(); });
    std::optional<std::string> machine;
    if (device.is_cuda() && !offers_cuda) machine = cuda_device_missing(cuda_devices(), device.index());
    throw Error(ErrorCode::kNotFound,
                fmt::format("backend '{}' has no device '{}' on this machine (devices: {}){}", backend.name(),
                            device.name(), device_names(offered), machine ? ": " + *machine : std::string()));
  }
}

std::string default_hardware_for(const std::vector<const Backend*>& backends, const Device& device,
                                 double worker_timeout_seconds) {
  if (device.is_cpu()) return "host";
  std::optional<std::string> gpu;
  for (const Backend* b : backends) {
    const std::vector<Device> offered = b->devices();
    if (std::find(offered.begin(), offered.end(), device) == offered.end()) continue;
    gpu = b->device_name(device, worker_timeout_seconds);
    break;
  }
  if (!gpu) {
    throw Error(ErrorCode::kNotFound, fmt::format("no backend of --backend can tell which GPU {} is: name its spec "
                                                  "with --hardware (see `neural-cost hardware list`)",
                                                  device.name()));
  }
  const HardwareDatabase& db = HardwareDatabase::builtin();
  if (const HardwareSpec* s = db.find_device_name(*gpu)) return s->id;
  if (const HardwareSpec* s = db.find(*gpu)) return s->id;
  const std::string key = lower(*gpu);
  for (const HardwareSpec& s : db.specs()) {
    if (lower(s.name) == key) return s.id;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("{} is '{}', which the built-in hardware database does not name: "
                                                "choose its spec with --hardware (an id of `neural-cost hardware "
                                                "list` or a spec file)",
                                                device.name(), *gpu));
}

std::optional<std::string> check_hardware_matches(const HardwareSpec& spec, const Device& device, bool allow_mismatch) {
  const std::string_view wanted = device.spec_type();
  if (spec.device_type == wanted) return std::nullopt;
  const std::string what = fmt::format("the hardware spec '{}' is a {} ({}), but the run is on {}, a {}", spec.id,
                                       spec.device_type.empty() ? "device of unknown type" : spec.device_type,
                                       spec.name, device.name(), wanted);
  if (!allow_mismatch) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: its roofline would not be this device's. Omit --hardware to use the device's own "
                            "spec, or add --allow-hardware-mismatch to compare against another device's roofline",
                            what));
  }
  return what + ": the roofline, efficiencies and bounds are that other device's, not this run's";
}

std::unique_ptr<RunEnvironment> run_environment(const Device& device) {
  if (device.is_cpu()) return std::make_unique<CpuEnvironment>();
  return std::make_unique<CudaEnvironment>(device.index());
}

std::optional<double> PreparedModel::resident_bytes() const { return process_resident_bytes(::getpid()); }

std::optional<double> PreparedModel::page_faults() const {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return std::nullopt;
  return static_cast<double>(u.ru_minflt + u.ru_majflt);
}

}  // namespace neuralcost
