// Calibration runs (see calibrate.hpp): one pinned OpenMP thread per CPU, all running the same
// kernel between barriers; a run's time is the slowest thread's. Buffers are allocated once at
// the DRAM size, first touched by the thread that uses them (so page faults, slow in VMs, are
// never timed) and reused by every smaller level as a prefix.
#include "neuralcost/calibrate/calibrate.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "calibrate/calibration_kernels.hpp"
#include "calibrate/gemm_ceiling.hpp"
#include "calibrate/rates.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/environment.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

/// Runs body(thread) on every thread at once, `runs` times; returns each run's seconds.
std::vector<double> timed_runs(int threads, int runs, const std::function<void(int)>& body) {
  const std::vector<int> cpus = allowed_cpus();
  std::vector<double> seconds(static_cast<std::size_t>(runs));
  Clock::time_point start;
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp master
    team = omp_get_num_threads();
    cpu_set_t saved, pinned;
    const bool pin = sched_getaffinity(0, sizeof(saved), &saved) == 0;
    if (pin) {
      CPU_ZERO(&pinned);
      CPU_SET(cpus[static_cast<std::size_t>(t) % cpus.size()], &pinned);
      sched_setaffinity(0, sizeof(pinned), &pinned);
    }
    for (int r = 0; r < runs; ++r) {
#pragma omp barrier
#pragma omp master
      start = Clock::now();
#pragma omp barrier
      body(t);
#pragma omp barrier
#pragma omp master
      seconds[static_cast<std::size_t>(r)] = std::chrono::duration<double>(Clock::now() - start).count();
    }
    if (pin) sched_setaffinity(0, sizeof(saved), &saved);
  }
  if (team != threads) {
    // every figure assumes `threads` threads moved or computed; fewer would undercount nothing
    // but overstate the rate
    throw Error(ErrorCode::kInternal, fmt::format("calibration: OpenMP ran {} threads where {} were asked for "
                                                  "(OMP_DYNAMIC or OMP_THREAD_LIMIT?)", team, threads));
  }
  return seconds;
}


struct Buffers {
  std::vector<std::unique_ptr<float, decltype(&std::free)>> per_thread;
  std::size_t floats = 0;  ///< per thread
};

/// One 64-byte-aligned buffer per thread, first touched by that thread.
Buffers allocate(int threads, std::size_t bytes_per_thread) {
  Buffers b;
  b.floats = (bytes_per_thread / sizeof(float) + 383) / 384 * 384;  // halves of multiples of 64, thirds of 128
  for (int t = 0; t < threads; ++t) {
    auto* p = static_cast<float*>(std::aligned_alloc(64, b.floats * sizeof(float)));
    if (!p) throw Error(ErrorCode::kInternal, "calibration: out of memory for the bandwidth buffers");
    b.per_thread.emplace_back(p, &std::free);
  }
  timed_runs(threads, 1, [&](int t) { std::fill_n(b.per_thread[static_cast<std::size_t>(t)].get(), b.floats, 1.0f); });
  return b;
}

/// read, copy and triad over the first `bytes` of each thread's buffer.
BandwidthLevel measure_level(const std::string& name, double size, std::size_t bytes, Buffers& buffers, int threads,
                             bool quick) {
  BandwidthLevel level;
  level.name = name;
  level.size_bytes = size;
  // (never past the buffer: on a machine with little memory the DRAM buffer bounds every level)
  const std::size_t n = std::min(buffers.floats, std::max<std::size_t>(384, bytes / sizeof(float) / 384 * 384));
  level.working_set_bytes = static_cast<double>(n * sizeof(float)) * threads;
  // enough passes that one run moves 256 MiB per thread (at least one pass): a run of a cache
  // level then lasts about a millisecond, long against the barrier and the clock
  const std::size_t passes = std::max<std::size_t>(1, (256u << 20) / (n * sizeof(float)));
  const int runs = quick ? 6 : 12;
  const double moved = static_cast<double>(passes * n * sizeof(float)) * threads;
  std::vector<float> sums(static_cast<std::size_t>(threads));
  // every kernel in every width; the fastest width sets the level's figure
  auto fastest = [&](const auto& make_run) {
    RateMeasurement best;
    for (const std::string& width : calibration::bandwidth_widths()) {
      const auto run = make_run(width);  // resolved once: no dispatch inside the timed loop
      std::vector<double> seconds = timed_runs(threads, runs + 1, [&](int t) { run(t); });
      seconds.erase(seconds.begin());  // the first run warms caches, TLB and clock
      RateMeasurement m = rate_measurement(moved, seconds);
      m.kernel = width;
      if (m.best > best.best) best = m;
    }
    return best;
  };
  level.read = fastest([&](const std::string& w) {
    return [&, pass = calibration::read_pass(w)](int t) {
      const float* a = buffers.per_thread[static_cast<std::size_t>(t)].get();
      float sum = 0;
      for (std::size_t p = 0; p < passes; ++p) sum += pass(a, n);
      sums[static_cast<std::size_t>(t)] += sum;
    };
  });
  level.copy = fastest([&](const std::string& w) {
    return [&, pass = calibration::copy_pass(w)](int t) {
      float* a = buffers.per_thread[static_cast<std::size_t>(t)].get();
      for (std::size_t p = 0; p < passes; ++p) pass(a, a + n / 2, n / 2);
    };
  });
  level.triad = fastest([&](const std::string& w) {
    return [&, pass = calibration::triad_pass(w)](int t) {
      float* a = buffers.per_thread[static_cast<std::size_t>(t)].get();
      for (std::size_t p = 0; p < passes; ++p) pass(a, a + n / 3, a + 2 * n / 3, 0.5f, n / 3);
    };
  });
  volatile float keep = sums[0];
  (void)keep;
  return level;
}

double measure_clock_ghz(int threads) {
  const std::uint64_t iterations = 20'000'000;
  const auto seconds = timed_runs(threads, 5, [&](int) { calibration::add_chain(iterations); });
  const double best = *std::min_element(seconds.begin(), seconds.end());
  return static_cast<double>(iterations) * calibration::kAddsPerIteration / best / 1e9;
}

RateMeasurement measure_fma(const std::string& dtype, int threads, bool quick) {
  if (calibration::fma_burst(dtype, 1) == 0) return {};
  // size a run to about 50 ms (20 ms when quick) from a short trial
  const auto trial = timed_runs(threads, 1, [&](int) { calibration::fma_burst(dtype, 1'000'000); });
  const double per_iteration = std::max(trial[0], 1e-6) / 1e6;
  const auto iterations = static_cast<std::uint64_t>((quick ? 0.02 : 0.05) / per_iteration) + 1;
  const double flops = calibration::fma_burst(dtype, 1) * static_cast<double>(iterations) * threads;
  return rate_measurement(flops, timed_runs(threads, quick ? 4 : 10, [&](int) { calibration::fma_burst(dtype, iterations); }));
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Calibration calibrate(const HostDescription& host, const CalibrationOptions& options) {
  const auto began = Clock::now();
  Calibration c;
  c.fingerprint = host_fingerprint(host);
  c.created = now_utc();
  c.tool_version = std::string(kVersion);
  c.quick = options.quick;
  c.threads = options.threads > 0 ? options.threads : static_cast<int>(allowed_cpus().size());
  if (c.threads > static_cast<int>(allowed_cpus().size())) {
    c.warnings.push_back(fmt::format("{} threads on {} CPUs: threads share CPUs, so per-CPU ceilings are not "
                                     "what this measures", c.threads, allowed_cpus().size()));
  }
  c.kernel_isa = calibration::kernel_isa();
  c.clock_ghz = measure_clock_ghz(c.threads);

  // buffers: STREAM's rule (each triad array 4x all last-level caches), at least 384 MiB in all
  // (the rule for a 32 MiB cache, when the last level's size is not believed), at most an eighth
  // of memory
  double llc = 0;
  for (const HostCache& cache : host.caches) {
    if (cache.plausible) llc = std::max(llc, static_cast<double>(cache.size_bytes) * cache.instances);
  }
  double dram_total = std::max(12 * llc, 384.0 * (1 << 20));
  if (host.memory_bytes > 0) dram_total = std::min(dram_total, static_cast<double>(host.memory_bytes) / 8);
  const auto dram_per_thread = static_cast<std::size_t>(dram_total / c.threads);
  Buffers buffers = allocate(c.threads, dram_per_thread);
  for (const HostCache& cache : host.caches) {
    if (!cache.plausible) continue;
    // half of each thread's share of one instance, so the working set surely fits
    const int sharing = std::max(1, std::min(cache.shared_by_cpus, c.threads));
    const auto bytes = static_cast<std::size_t>(cache.size_bytes / static_cast<std::uint64_t>(sharing) / 2);
    c.levels.push_back(measure_level(fmt::format("L{}", cache.level),
                                     static_cast<double>(cache.size_bytes) * cache.instances, bytes, buffers,
                                     c.threads, options.quick));
  }
  c.levels.push_back(measure_level("DRAM", static_cast<double>(host.memory_bytes), dram_per_thread, buffers, c.threads,
                                   options.quick));
  // a cache whose reported size cannot be true (a VM passing the host's L3 through): find where
  // bandwidth really falls to DRAM speed, doubling the working set from the last plausible level
  for (const HostCache& cache : host.caches) {
    if (cache.plausible) continue;
    const double dram = c.levels.back().triad.best;
    double last_fast = 0;
    BandwidthLevel found;
    std::size_t start = 1u << 20;
    for (const BandwidthLevel& l : c.levels) {
      if (l.name != "DRAM") start = std::max(start, static_cast<std::size_t>(l.working_set_bytes / c.threads) * 2);
    }
    for (std::size_t bytes = start; bytes <= dram_per_thread / 2; bytes *= 2) {
      BandwidthLevel probe = measure_level(fmt::format("L{}", cache.level), 0, bytes, buffers, c.threads, true);
      if (probe.triad.best < 1.5 * dram) break;
      last_fast = probe.working_set_bytes;
      found = probe;
    }
    if (last_fast > 0) {
      found.size_bytes = last_fast;
      c.warnings.push_back(fmt::format(
          "L{} reports {} MiB; bandwidth stays above 1.5x DRAM's up to a {:.0f} MiB working set (and falls below it "
          "at twice that), so the level is taken as {:.0f} MiB", cache.level,
          (cache.size_bytes * static_cast<std::uint64_t>(cache.instances)) >> 20, last_fast / (1 << 20),
          found.size_bytes / (1 << 20)));
      c.levels.insert(c.levels.end() - 1, found);
    } else {
      c.warnings.push_back(fmt::format("L{}'s reported size is implausible and no working set above the last cache "
                                       "ran faster than DRAM: the level is left out", cache.level));
    }
  }
  // the plain STREAM triad over the same bytes, as doubles, for comparison
  {
    const std::size_t n = buffers.floats / 2 / 3 / 8 * 8;
    c.stream_triad = rate_measurement(static_cast<double>(3 * n * sizeof(double)) * c.threads,
                           timed_runs(c.threads, options.quick ? 4 : 12, [&](int t) {
                             auto* a = reinterpret_cast<double*>(buffers.per_thread[static_cast<std::size_t>(t)].get());
                             calibration::stream_triad(a, a + n, a + 2 * n, 0.5, n);
                           }));
  }
  buffers.per_thread.clear();

  std::string why;
  const double fp32_theory = host.cores * fp32_flops_per_cycle(host, why) * c.clock_ghz * 1e9;
  c.theoretical_flops = {{"fp32", fp32_theory}, {"fp64", fp32_theory / 2}};
  if (host.has("avx512_bf16")) c.theoretical_flops["bf16"] = 2 * fp32_theory;
  for (const char* dtype : {"fp32", "fp64", "bf16"}) {
    const RateMeasurement m = measure_fma(dtype, c.threads, options.quick);
    if (m.runs > 0) c.fma[dtype] = m;
  }
  c.gemm = measure_gemm(c.threads, options.quick);

  // environment facts that change ceilings
  const EnvironmentFacts env = detect_environment();
  for (const auto& [name, value] : env.variables) {
    if (!value.empty()) c.environment[name] = value;
  }
  c.environment["threads"] = std::to_string(c.threads);
  c.environment["virtual_machine"] = host.virtualized ? "yes" : "no";
  const std::string governor = read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  c.environment["cpufreq_governor"] = governor.empty() ? "not exposed (no cpufreq)" : governor;
  c.environment["clock_ghz_measured"] = fmt::format("{:.3f}", c.clock_ghz);
  if (host.ghz > 0) c.environment["clock_ghz_reported"] = fmt::format("{:.3f} ({})", host.ghz, host.ghz_source);
  for (const auto& [name, value] : gemm_environment()) c.environment[name] = value;
  for (const std::string& w : env.warnings) c.warnings.push_back(w);
  for (const std::string& n : host.notes) c.warnings.push_back(n);

  // believability: nothing measured may exceed what the hardware can do
  for (const auto& [dtype, m] : c.fma) {
    const auto theory = c.theoretical_flops.find(dtype);
    if (theory == c.theoretical_flops.end()) continue;
    const double ratio = m.best / theory->second;
    if (ratio > 1.02) {
      c.warnings.push_back(fmt::format("{} FMA measured {:.1f} GFLOP/s, {:.0f}% of the theoretical {:.1f}: above the "
                                       "ceiling, so the FMA-unit assumption ({}) is wrong for this CPU",
                                       dtype, m.best / 1e9, ratio * 100, theory->second / 1e9, why));
    } else if (ratio < 0.9) {
      c.warnings.push_back(fmt::format("{} FMA reaches {:.0f}% of the theoretical {:.1f} GFLOP/s ({})", dtype,
                                       ratio * 100, theory->second / 1e9, why));
    }
  }
  for (const GemmCeiling& g : c.gemm) {
    const auto fma = c.fma.find(g.dtype);
    if (fma != c.fma.end() && g.flops_per_second.best > 1.02 * fma->second.best) {
      c.warnings.push_back(fmt::format("{} {} GEMM measured above the {} FMA peak: one of the two is wrong", g.library,
                                       g.dtype, g.dtype));
    }
  }
  const double triad_ratio = c.levels.back().triad.best / c.stream_triad.best;
  if (triad_ratio < 0.97) {
    c.warnings.push_back(fmt::format("the DRAM triad kernel reaches {:.0f}% of a plain STREAM triad", triad_ratio * 100));
  }
  for (std::size_t i = 1; i < c.levels.size(); ++i) {
    if (c.levels[i].triad.best > 1.1 * c.levels[i - 1].triad.best) {
      c.warnings.push_back(fmt::format("{} is faster than {}: the level sizes may be wrong", c.levels[i].name,
                                       c.levels[i - 1].name));
    }
  }
  c.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  return c;
}

}  // namespace neuralcost
