// Calibration runs (see calibrate.hpp): one pinned OpenMP thread per core a run uses, all
// running the same kernel between barriers; a run's time is the slowest thread's. Buffers are
// allocated once at the DRAM size, first touched by the thread that uses them (so page faults,
// slow in VMs, are never timed) and reused by every smaller level as a prefix.
//
// Rounds: a round measures every figure once (the clock, each level's read, copy and triad in
// every kernel variant still in the running, the STREAM triad, each dtype's FMA peak), a few runs
// each; rounds repeat until the best two rounds of every figure the roof uses agree within
// kRoundTolerance, so that a moment when the machine was slow (or fast) shows as a disagreement
// instead of becoming the ceiling. The machine's load is read before (while calibration sleeps)
// and over the whole measurement (measure/load.hpp).
#include "neuralcost/calibrate/calibrate.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "calibrate/calibration_kernels.hpp"
#include "calibrate/gemm_ceiling.hpp"
#include "calibrate/rates.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/cpu_parts.hpp"
#include "neuralcost/measure/environment.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> allowed_cpus() {
  std::vector<int> cpus = affinity_cpus();
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
                                                  "(OMP_DYNAMIC or OMP_THREAD_LIMIT?)",
                                                  team, threads));
  }
  return seconds;
}

/// One figure over the rounds: every run's rate, the best of each round, the best variant.
struct Tracked {
  std::vector<double> runs;
  std::vector<double> round_best;
  std::map<std::string, double> variant_best;
  std::string kernel;
  double best = 0;

  /// Adds the runs of `variant` in round `round` (rates, not seconds).
  void add(int round, const std::string& variant, const std::vector<double>& rates) {
    if (rates.empty()) return;
    while (static_cast<int>(round_best.size()) <= round) round_best.push_back(0);
    const double top = *std::max_element(rates.begin(), rates.end());
    runs.insert(runs.end(), rates.begin(), rates.end());
    round_best[static_cast<std::size_t>(round)] = std::max(round_best[static_cast<std::size_t>(round)], top);
    variant_best[variant] = std::max(variant_best[variant], top);
    if (top > best) best = top, kernel = variant;
  }
  /// The variants worth another round: within 10% of the best one.
  std::vector<std::string> contenders(const std::vector<std::string>& all) const {
    std::vector<std::string> keep;
    for (const std::string& v : all) {
      const auto it = variant_best.find(v);
      if (variant_best.empty() || (it != variant_best.end() && it->second >= 0.9 * best)) keep.push_back(v);
    }
    return keep;
  }
  /// (best round - second-best round) / best round; 0 with fewer than two rounds.
  double agreement() const {
    std::vector<double> r;
    for (double v : round_best) {
      if (v > 0) r.push_back(v);
    }
    if (r.size() < 2) return 0;
    std::sort(r.rbegin(), r.rend());
    return (r[0] - r[1]) / r[0];
  }
  int rounds() const {
    return static_cast<int>(std::count_if(round_best.begin(), round_best.end(), [](double v) { return v > 0; }));
  }
  RateMeasurement measurement(bool with_kernel) const {
    RateMeasurement m = rate_summary(runs);
    if (runs.empty()) return m;
    if (with_kernel) m.kernel = kernel;
    m.rounds = rounds();
    m.round_agreement = agreement();
    return m;
  }
};

std::vector<double> rates(double work, const std::vector<double>& seconds) {
  std::vector<double> r;
  for (double s : seconds) r.push_back(work / std::max(s, 1e-9));
  return r;
}

struct Buffers {
  std::vector<std::unique_ptr<float, decltype(&std::free)>> per_thread;
  std::size_t floats = 0;  ///< per thread
};

/// One 64-byte-aligned buffer per thread, first touched by that thread.
Buffers allocate(int threads, std::size_t bytes_per_thread) {
  Buffers b;
  b.floats = (bytes_per_thread / sizeof(float) + 383) / 384 * 384;  // halves of multiples of 192, thirds of 128
  for (int t = 0; t < threads; ++t) {
    auto* p = static_cast<float*>(std::aligned_alloc(64, b.floats * sizeof(float)));
    if (!p) throw Error(ErrorCode::kInternal, "calibration: out of memory for the bandwidth buffers");
    b.per_thread.emplace_back(p, &std::free);
  }
  timed_runs(threads, 1, [&](int t) { std::fill_n(b.per_thread[static_cast<std::size_t>(t)].get(), b.floats, 1.0f); });
  return b;
}

/// One bandwidth level measured over the rounds.
struct Level {
  std::string name;
  double size_bytes = 0;   ///< the level's capacity (all instances)
  std::size_t floats = 0;  ///< per thread
  Tracked read, copy, triad;
  std::string note;  ///< a probed level: how it was found
};

/// The first `bytes` of each thread's buffer, in whole blocks of 384 floats, never past the buffer.
std::size_t floats_for(const Buffers& buffers, std::size_t bytes) {
  return std::min(buffers.floats, std::max<std::size_t>(384, bytes / sizeof(float) / 384 * 384));
}

class Rounds {
 public:
  Rounds(int threads, bool quick) : threads_(threads), runs_(quick ? 3 : 6), sums_(static_cast<std::size_t>(threads)) {}

  /// One round of read, copy and triad over `level`; the first round tries every variant, later
  /// ones only those within 10% of the best. `which`: "rct" (read, copy, triad) or "t".
  void measure(Level& level, Buffers& buffers, int round, const std::string& which = "rct") {
    const std::size_t n = level.floats;
    // enough passes that one run moves 256 MiB per thread (at least one pass): a run of a cache
    // level then lasts about a millisecond, long against the barrier and the clock
    const std::size_t passes = std::max<std::size_t>(1, (256u << 20) / (n * sizeof(float)));
    const double moved = static_cast<double>(passes * n * sizeof(float)) * threads_;
    auto run = [&](Tracked& tracked, const std::vector<std::string>& variants, const auto& make_run) {
      for (const std::string& v : tracked.contenders(variants)) {
        const auto body = make_run(v);  // resolved once: no dispatch inside the timed loop
        std::vector<double> seconds = timed_runs(threads_, runs_ + 1, [&](int t) { body(t); });
        seconds.erase(seconds.begin());  // the first run warms caches, TLB and clock
        tracked.add(round, v, rates(moved, seconds));
      }
    };
    auto buffer = [&](int t) { return buffers.per_thread[static_cast<std::size_t>(t)].get(); };
    if (which.find('r') != std::string::npos) {
      run(level.read, calibration::read_variants(), [&](const std::string& v) {
        return [&, pass = calibration::read_pass(v)](int t) {
          float sum = 0;
          for (std::size_t p = 0; p < passes; ++p) sum += pass(buffer(t), n);
          sums_[static_cast<std::size_t>(t)] += sum;
        };
      });
    }
    if (which.find('c') != std::string::npos) {
      run(level.copy, calibration::copy_variants(), [&](const std::string& v) {
        return [&, pass = calibration::copy_pass(v)](int t) {
          float* a = buffer(t);
          for (std::size_t p = 0; p < passes; ++p) pass(a, a + n / 2, n / 2);
        };
      });
    }
    if (which.find('t') != std::string::npos) {
      run(level.triad, calibration::triad_variants(), [&](const std::string& v) {
        return [&, pass = calibration::triad_pass(v)](int t) {
          float* a = buffer(t);
          for (std::size_t p = 0; p < passes; ++p) pass(a, a + n / 3, a + 2 * n / 3, 0.5f, n / 3);
        };
      });
    }
    volatile float keep = sums_[0];
    (void)keep;
  }

  /// The plain STREAM triad over the DRAM buffers, as doubles.
  void stream(Tracked& tracked, Buffers& buffers, int round) {
    const std::size_t n = buffers.floats / 2 / 3 / 8 * 8;
    tracked.add(round, "",
                rates(static_cast<double>(3 * n * sizeof(double)) * threads_, timed_runs(threads_, runs_, [&](int t) {
                        auto* a = reinterpret_cast<double*>(buffers.per_thread[static_cast<std::size_t>(t)].get());
                        calibration::stream_triad(a, a + n, a + 2 * n, 0.5, n);
                      })));
  }

  /// One round of the FMA peak of `dtype` (false when this CPU has no kernel for it).
  bool fma(Tracked& tracked, const std::string& dtype, int round, bool quick) {
    if (calibration::fma_burst(dtype, 1) == 0) return false;
    auto& iterations = fma_iterations_[dtype];
    if (iterations == 0) {
      // size a run to about 5 ms from a short trial: many short runs rather than a few long ones,
      // because the best of them is the peak, and a short run is more often left alone by other
      // work (5 ms is still hundreds of times the barrier's cost)
      const auto trial = timed_runs(threads_, 1, [&](int) { calibration::fma_burst(dtype, 1'000'000); });
      const double per_iteration = std::max(trial[0], 1e-6) / 1e6;
      iterations = static_cast<std::uint64_t>(0.005 / per_iteration) + 1;
    }
    const double flops = calibration::fma_burst(dtype, 1) * static_cast<double>(iterations) * threads_;
    tracked.add(
        round, calibration::kernel_isa(),
        rates(flops, timed_runs(threads_, quick ? 10 : 20, [&](int) { calibration::fma_burst(dtype, iterations); })));
    return true;
  }

  /// The clock, from dependent integer adds on every thread at once: the best of ten short runs.
  double clock_ghz() {
    const std::uint64_t iterations = 2'500'000;  // 20 million cycles: 5 ms at 4 GHz
    const auto seconds = timed_runs(threads_, 10, [&](int) { calibration::add_chain(iterations); });
    const double best = *std::min_element(seconds.begin(), seconds.end());
    return static_cast<double>(iterations) * calibration::kAddsPerIteration / best / 1e9;
  }

 private:
  int threads_;
  int runs_;
  std::vector<float> sums_;
  std::map<std::string, std::uint64_t> fma_iterations_;
};

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

CalibrationLoad record(const LoadFigures& f) { return {f.seconds, f.other_cpus, f.steal_fraction, f.other_runnable}; }

}  // namespace

std::vector<std::string> ceiling_findings(const Calibration& c, const HostDescription& host) {
  std::vector<std::string> findings;
  std::string why;
  fp32_flops_per_cycle(host, why);
  // nothing measured may exceed what the hardware can do, beyond the noise
  for (const auto& [dtype, m] : c.fma) {
    const auto theoretical = c.theoretical_flops.find(dtype);
    if (theoretical == c.theoretical_flops.end()) continue;
    const double ratio = m.best / theoretical->second;
    if (ratio > 1 + kAboveTheoryTolerance) {
      findings.push_back(fmt::format(
          "{} FMA measured {:.1f} GFLOP/s, {:.0f}% of the theoretical {:.1f}: above the ceiling by more than the "
          "{:.0f}% tolerance, so the clock ({:.2f} GHz: {}) or the FMA units ({}) are wrong for this CPU",
          dtype, m.best / 1e9, ratio * 100, theoretical->second / 1e9, 100 * kAboveTheoryTolerance, c.peak_clock_ghz,
          c.peak_clock_source, why));
    } else if (ratio < 0.9) {
      findings.push_back(fmt::format(
          "{} FMA reaches {:.0f}% of the theoretical {:.1f} GFLOP/s ({} at {:.2f} GHz): the cores ran at about {:.2f} "
          "GHz",
          dtype, ratio * 100, theoretical->second / 1e9, why, c.peak_clock_ghz, ratio * c.peak_clock_ghz));
    }
  }
  for (const GemmCeiling& g : c.gemm) {
    const auto f = c.fma.find(g.dtype);
    if (f != c.fma.end() && g.flops_per_second.best > (1 + kAboveTheoryTolerance) * f->second.best) {
      findings.push_back(fmt::format("{} {} GEMM measured above the {} FMA peak: one of the two is wrong", g.library,
                                     g.dtype, g.dtype));
    }
  }
  if (!c.levels.empty() && c.stream_triad.best > 0) {
    const double triad_ratio = c.levels.back().triad.best / c.stream_triad.best;
    if (triad_ratio < 0.97) {
      findings.push_back(
          fmt::format("the DRAM triad kernel reaches {:.0f}% of a plain STREAM triad", triad_ratio * 100));
    }
  }
  for (std::size_t i = 1; i < c.levels.size(); ++i) {
    if (c.levels[i].triad.best > 1.1 * c.levels[i - 1].triad.best) {
      findings.push_back(
          fmt::format("{} is faster than {}: the level sizes may be wrong", c.levels[i].name, c.levels[i - 1].name));
    }
  }
  return findings;
}

Calibration calibrate(const HostDescription& host, const CalibrationOptions& options) {
  const auto began = Clock::now();
  Calibration c;
  c.fingerprint = host_fingerprint(host);
  c.created = now_utc();
  c.tool_version = std::string(kVersion);
  c.quick = options.quick;
  const int cpus = static_cast<int>(allowed_cpus().size());
  c.threads = options.threads > 0 ? std::min(options.threads, cpus) : cpus;
  if (options.threads > cpus) {
    c.warnings.push_back(
        fmt::format("{} threads asked for on {} CPUs: calibrated with {}, one per CPU (more would "
                    "share CPUs, and a run of more threads is held to the same ceilings)",
                    options.threads, cpus, c.threads));
  }
  c.kernel_isa = calibration::kernel_isa();
  c.round_tolerance = kRoundTolerance;
  const int min_rounds = std::max(1, options.min_rounds);
  const int max_rounds = std::max(min_rounds, options.max_rounds > 0 ? options.max_rounds : options.quick ? 4 : 6);

  // the machine before measuring: what runs while calibration sleeps
  const LoadFigures before = idle_load(options.idle_check_seconds);
  c.load_before = record(before);
  for (const std::string& why : load_reasons(before, "the idle check before calibration")) c.busy.push_back(why);
  const LoadReading start = read_load();

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
  std::vector<Level> levels;
  for (const HostCache& cache : host.caches) {
    if (!cache.plausible) continue;
    // half of each thread's share of one instance, so the working set surely fits
    const int sharing = std::max(1, std::min(cache.shared_by_cpus, c.threads));
    const auto bytes = static_cast<std::size_t>(cache.size_bytes / static_cast<std::uint64_t>(sharing) / 2);
    Level level;
    level.name = fmt::format("L{}", cache.level);
    level.size_bytes = static_cast<double>(cache.size_bytes) * cache.instances;
    level.floats = floats_for(buffers, bytes);
    levels.push_back(level);
  }
  Level dram;
  dram.name = "DRAM";
  dram.size_bytes = static_cast<double>(host.memory_bytes);
  dram.floats = floats_for(buffers, dram_per_thread);
  levels.push_back(dram);

  Rounds rounds(c.threads, options.quick);
  Tracked stream;
  std::map<std::string, Tracked> fma;
  std::vector<std::string> disagree;
  for (int round = 0; round < max_rounds; ++round) {
    c.clock_ghz = std::max(c.clock_ghz, rounds.clock_ghz());
    for (Level& level : levels) rounds.measure(level, buffers, round);
    rounds.stream(stream, buffers, round);
    for (const char* dtype : {"fp32", "fp64", "bf16"}) rounds.fma(fma[dtype], dtype, round, options.quick);
    c.rounds = round + 1;
    if (round == 0) {
      // a cache whose reported size cannot be true (a VM passing the host's L3 through): find
      // where the triad falls to DRAM speed, doubling the working set from the last plausible
      // level; the probe that found it is the new level's first triad round
      for (const HostCache& cache : host.caches) {
        if (cache.plausible) continue;
        const double dram_triad = levels.back().triad.best;
        std::size_t start_bytes = 1u << 20;
        for (const Level& l : levels) {
          if (l.name != "DRAM") start_bytes = std::max(start_bytes, l.floats * sizeof(float) * 2);
        }
        std::optional<Level> found;
        for (std::size_t bytes = start_bytes; bytes <= dram_per_thread / 2; bytes *= 2) {
          Level probe;
          probe.name = fmt::format("L{}", cache.level);
          probe.floats = floats_for(buffers, bytes);
          rounds.measure(probe, buffers, 0, "t");
          if (probe.triad.best < 1.5 * dram_triad) break;
          found = probe;
        }
        if (found) {
          found->size_bytes = static_cast<double>(found->floats * sizeof(float)) * c.threads;
          c.warnings.push_back(fmt::format(
              "L{} reports {} MiB; bandwidth stays above 1.5x DRAM's up to a {:.0f} MiB working set (and falls "
              "below it at twice that), so the level is taken as {:.0f} MiB",
              cache.level, (cache.size_bytes * static_cast<std::uint64_t>(cache.instances)) >> 20,
              found->size_bytes / (1 << 20), found->size_bytes / (1 << 20)));
          levels.insert(levels.end() - 1, *found);
        } else {
          c.warnings.push_back(
              fmt::format("L{}'s reported size is implausible and no working set above the last "
                          "cache ran faster than DRAM: the level is left out",
                          cache.level));
        }
      }
    }
    if (round + 1 < min_rounds) continue;
    // on a busy machine the rounds cannot agree, and the result will not be cached: the minimum
    // number of rounds gives the figures this run uses
    const bool busy = !c.busy.empty() || !load_reasons(load_since(start), "calibration").empty();
    // the figures the roof uses: FP32 FMA and each level's triad
    disagree.clear();
    auto check = [&](const std::string& what, const Tracked& t) {
      if (t.rounds() < 2) {
        disagree.push_back(fmt::format("{} was measured in {} round only", what, t.rounds()));
      } else if (t.agreement() > kRoundTolerance) {
        disagree.push_back(fmt::format("{}'s best two rounds differ by {:.1f}%", what, 100 * t.agreement()));
      }
    };
    if (fma.count("fp32") && !fma["fp32"].runs.empty()) check("the FP32 FMA peak", fma["fp32"]);
    for (const Level& l : levels) check(l.name + " triad", l.triad);
    if (disagree.empty() || busy) break;
  }
  if (!disagree.empty() && min_rounds >= 2 && c.rounds == max_rounds) {
    std::string list;
    for (const std::string& d : disagree) list += (list.empty() ? "" : "; ") + d;
    c.busy.push_back(
        fmt::format("the best rounds do not agree within {:.0f}% after {} rounds ({}): the machine's "
                    "speed changed while calibrating; rerun on an idle machine",
                    100 * kRoundTolerance, c.rounds, list));
  }
  for (Level& l : levels) {
    BandwidthLevel b;
    b.name = l.name;
    b.size_bytes = l.size_bytes;
    b.working_set_bytes = static_cast<double>(l.floats * sizeof(float)) * c.threads;
    b.read = l.read.measurement(true);
    b.copy = l.copy.measurement(true);
    b.triad = l.triad.measurement(true);
    c.levels.push_back(b);
  }
  c.stream_triad = stream.measurement(false);
  for (const auto& [dtype, t] : fma) {
    if (!t.runs.empty()) c.fma[dtype] = t.measurement(false);
  }
  buffers.per_thread.clear();
  c.gemm = measure_gemm(c.threads, options.quick);

  // the load over the whole measurement, calibration's own CPU time excluded
  const LoadFigures during = load_since(start);
  c.load_during = record(during);
  for (const std::string& why : load_reasons(during, "calibration")) c.busy.push_back(why);

  // the theoretical peaks of the cores these threads use, at the documented clock (host-spec's)
  const HardwareSpec theory = theoretical_host_spec(host, c.threads, c.clock_ghz);
  const PeakClock clock = peak_clock(host, cores_for_threads(host, c.threads), c.clock_ghz);
  c.peak_clock_ghz = clock.ghz;
  c.peak_clock_source = clock.source;
  const std::map<DType, std::string> names = {{DType::kFp32, "fp32"}, {DType::kFp64, "fp64"}, {DType::kBf16, "bf16"}};
  for (const auto& [dtype, name] : names) {
    const auto peak = theory.peak_flops_per_second.find(dtype);
    if (peak != theory.peak_flops_per_second.end()) c.theoretical_flops[name] = peak->second;
  }

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
  c.environment["clock_ghz_peak"] = fmt::format("{:.3f} ({})", clock.ghz, clock.source);
  if (host.ghz > 0) c.environment["clock_ghz_reported"] = fmt::format("{:.3f} ({})", host.ghz, host.ghz_source);
  for (const auto& [name, value] : gemm_environment()) c.environment[name] = value;
  for (const std::string& w : env.warnings) c.warnings.push_back(w);
  for (const std::string& n : host.notes) c.warnings.push_back(n);

  for (std::string& w : ceiling_findings(c, host)) c.warnings.push_back(std::move(w));
  c.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  return c;
}

}  // namespace neuralcost
