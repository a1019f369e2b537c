// The provisional host spec (see host.hpp).
#include "neuralcost/hardware/host.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace neuralcost {
namespace {

bool has(const CpuDescription& cpu, const std::string& flag) {
  return std::find(cpu.flags.begin(), cpu.flags.end(), flag) != cpu.flags.end();
}

int local_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

CpuDescription parse_cpuinfo(const std::string& cpuinfo, int logical_cpus, double cpufreq_max_khz) {
  CpuDescription cpu;
  cpu.logical_cpus = std::max(1, logical_cpus);
  std::istringstream in(cpuinfo);
  double mhz = 0;
  std::string physical;
  std::set<std::string> cores;  // (package, core) pairs: SMT siblings share a core's pipes
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && cpu.model == "unknown") cpu.model = value;
    if (key == "physical id") physical = value;
    if (key == "core id") cores.insert(physical + ":" + value);
    if (key == "cpu MHz" && mhz == 0) mhz = std::atof(value.c_str());
    if ((key == "flags" || key == "Features") && cpu.flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) cpu.flags.push_back(w);
    }
  }
  // count cores, not SMT threads, when cpuinfo says which threads share a core (capped at the
  // CPUs this process may use)
  if (!cores.empty()) cpu.logical_cpus = std::min(cpu.logical_cpus, static_cast<int>(cores.size()));
  if (cpufreq_max_khz > 0) {
    cpu.ghz = cpufreq_max_khz / 1e6;
    cpu.ghz_source = "cpufreq cpuinfo_max_freq";
  } else if (mhz > 0) {
    cpu.ghz = mhz / 1e3;
    cpu.ghz_source = "/proc/cpuinfo 'cpu MHz' (no cpufreq: the reported, not the boost, clock)";
  }
  return cpu;
}

HardwareSpec theoretical_host_spec(const CpuDescription& cpu) {
  HardwareSpec s;
  s.id = "host";
  s.name = fmt::format("this machine: {} ({} CPUs)", cpu.model, cpu.logical_cpus);
  s.vendor = "host";
  s.device_type = "cpu";
  s.origin = "detected";
  const int lanes32 = has(cpu, "avx512f") ? 16 : has(cpu, "avx2") || has(cpu, "asimd") ? 8 : 4;
  const int pipes = 2;
  const int flops_per_lane = has(cpu, "fma") || has(cpu, "asimd") || has(cpu, "avx512f") ? 2 : 1;
  const double ghz = cpu.ghz > 0 ? cpu.ghz : 1.0;
  const double fp32 = cpu.logical_cpus * pipes * lanes32 * flops_per_lane * ghz * 1e9;
  const std::string derivation = fmt::format(
      "derived: {} CPUs x {} vector pipes (assumed) x {} fp32 lanes x {} FLOP x {:.3f} GHz ({})", cpu.logical_cpus,
      pipes, lanes32, flops_per_lane, ghz, cpu.ghz > 0 ? cpu.ghz_source : "clock unknown: 1 GHz assumed");
  s.peak_flops_per_second[DType::kFp32] = fp32;
  s.sources["peak_flops_per_second.fp32"] = derivation;
  s.peak_flops_per_second[DType::kFp64] = fp32 / 2;
  s.sources["peak_flops_per_second.fp64"] = "half the fp32 rate (half the lanes)";
  if (has(cpu, "avx512_bf16") || has(cpu, "amx_bf16")) {
    s.peak_flops_per_second[DType::kBf16] = 2 * fp32;
    s.sources["peak_flops_per_second.bf16"] = "twice the fp32 rate (avx512_bf16 dot products; AMX not counted)";
  }
  if (has(cpu, "avx512_vnni") || has(cpu, "avx_vnni")) {
    s.peak_flops_per_second[DType::kInt8] = 4 * fp32;
    s.sources["peak_flops_per_second.int8"] = "four times the fp32 rate (VNNI int8 dot products)";
  }
  s.notes = {"Provisional host spec: peaks are theoretical (two full-width FMA pipes per CPU assumed; "
             "cores that split wide vectors run at half), not measured.",
             "Turbo clocks are not known without cpufreq; a run faster than this roof is flagged, not hidden."};
  if (has(cpu, "hypervisor")) s.notes.push_back("Runs in a virtual machine: other guests share the memory bus.");
  return s;
}

double measure_triad_bandwidth() {
  // each array at least as large as the last-level cache, so the triad streams from memory
  std::size_t llc = 0;
  std::ifstream l3("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string size_text;
  if (l3 >> size_text && !size_text.empty()) {
    llc = std::strtoull(size_text.c_str(), nullptr, 10) * (size_text.back() == 'M' ? 1u << 20 : 1u << 10);
  }
  // (capped at 64 MiB: some VMs report a last-level cache of hundreds of MB)
  const std::size_t bytes_per_array = std::clamp<std::size_t>(llc, 16u << 20, 64u << 20);
  const std::size_t n = bytes_per_array / sizeof(double);
  const int threads = local_cpus();
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  auto triad = [&](double scalar) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t begin = n * t / threads, end = n * (t + 1) / threads;
        for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + scalar * c[i];
      });
    }
    for (auto& th : pool) th.join();
  };
  std::fill(b.get(), b.get() + n, 1.0);  // first touch outside the timed runs
  std::fill(c.get(), c.get() + n, 2.0);
  std::fill(a.get(), a.get() + n, 0.0);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    triad(3.0);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile double sink = a[n / 2];
  (void)sink;
  return 3.0 * sizeof(double) * static_cast<double>(n) / best;
}

HardwareSpec detect_host_spec() {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  text << in.rdbuf();
  double khz = 0;
  std::ifstream freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (freq) freq >> khz;
  HardwareSpec s = theoretical_host_spec(parse_cpuinfo(text.str(), local_cpus(), khz));
  s.memory_bandwidth_bytes_per_second = measure_triad_bandwidth();
  s.sources["memory_bandwidth_bytes_per_second"] =
      "measured: STREAM-style triad, 3 arrays each as large as the last-level cache (16 to 64 MiB), one "
      "thread per CPU, best of 5, 24 bytes per element";
  return s;
}

}  // namespace neuralcost
