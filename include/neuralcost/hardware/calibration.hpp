// A calibration record: what this machine really reaches (bandwidth per cache level and DRAM,
// peak FMA throughput per dtype, GEMM ceilings; each the best of repeated runs, with the spread),
// its JSON form, the per-user cache file, and the spec `--hardware host` makes of it. Reading
// and writing only: measuring one is calibrate/calibrate.hpp, a module above measure/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/hardware/host.hpp"
#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

/// Repeated runs of one rate (bytes/s or FLOP/s), over interleaved rounds.
struct RateMeasurement {
  double best = 0;  ///< the highest rate seen
  double median = 0;
  double spread = 0;  ///< (best - worst) / best
  int runs = 0;
  std::string kernel;  ///< the variant that set `best` (bandwidth: avx512, avx512-nt, avx2, sse, scalar)
  int rounds = 0;      ///< rounds it was measured in (0: not measured in rounds)
  /// (best round - second-best round) / best round: how well the best two rounds agree (0 with
  /// fewer than two rounds)
  double round_agreement = 0;
};

/// Above any CPU's clock (the fastest boost at 6.2 GHz): a calibration that measured more is
/// not believed (a chain of add-immediates that the core folded at rename read 12-20 GHz).
inline constexpr double kMaxPlausibleClockGhz = 7.0;

/// What the load of the machine was around a calibration (measure/load.hpp measures it).
struct CalibrationLoad {
  double seconds = 0;          ///< the window
  double other_cpus = 0;       ///< other processes' CPU time, in CPUs averaged over the window
  double steal_fraction = 0;   ///< share of the CPUs' time the hypervisor took
  double other_runnable = -1;  ///< runnable tasks beyond calibration's own, on average (-1: unknown)
};

struct BandwidthLevel {
  std::string name;                   ///< L1, L2, L3, DRAM
  double size_bytes = 0;              ///< the level's capacity (all instances); DRAM: memory size
  double working_set_bytes = 0;       ///< all threads' buffers together in this test
  RateMeasurement read, copy, triad;  ///< bytes/s, STREAM's counting (no write-allocate traffic)
};

struct GemmCeiling {
  std::string library;  ///< "OpenBLAS 0.3.21 (Cooperlake)", "oneDNN 2.6.3"
  std::string dtype;    ///< fp32, fp64
  int n = 0;            ///< square size
  RateMeasurement flops_per_second;
};

struct Calibration {
  std::string fingerprint;  ///< the CPU it was measured on (host_fingerprint)
  std::string created;      ///< UTC, ISO 8601
  std::string tool_version;
  bool quick = false;
  int threads = 1;
  std::string kernel_isa;     ///< avx512, avx2, neon, scalar
  double clock_ghz = 0;       ///< measured with dependent adds on every thread at once (recorded, not used for peaks)
  double peak_clock_ghz = 0;  ///< the clock of the theoretical peaks (cpu_parts.hpp: documented when the CPU is known)
  std::string peak_clock_source;
  int rounds = 0;               ///< interleaved rounds run
  double round_tolerance = 0;   ///< the best two rounds of every key figure agree within this, or it is said why not
  CalibrationLoad load_before;  ///< the machine watched while calibration slept, before measuring
  CalibrationLoad load_during;  ///< over the whole measurement (calibration's own CPU time excluded)
  /// Why this calibration must not be cached (load before or during, rounds that disagree); empty
  /// when it may. calibrate/calibrate.hpp's why_not_cacheable adds checks of the figures.
  std::vector<std::string> busy;
  std::vector<BandwidthLevel> levels;               ///< caches smallest first, DRAM last
  RateMeasurement stream_triad;                     ///< a plain STREAM triad at the DRAM size, same run
  std::map<std::string, RateMeasurement> fma;       ///< peak FLOP/s by dtype (fp32, fp64, bf16)
  std::map<std::string, double> theoretical_flops;  ///< cores x FLOP/cycle x peak clock, by dtype (host-spec's peaks)
  std::vector<GemmCeiling> gemm;
  std::map<std::string, std::string> environment;  ///< facts that change ceilings
  std::vector<std::string> warnings;               ///< figures that cannot be believed, and why
  double seconds = 0;                              ///< how long calibration took
};

/// The spec `--hardware host` uses: measured FMA peaks, DRAM triad bandwidth, and each cache
/// level with its measured triad bandwidth (for the cache-aware roofline); the ceilings of the
/// cores calibration.threads threads use, and the name says so.
HardwareSpec calibrated_spec(const HostDescription& host, const Calibration& calibration);

/// The spec of `which` ("host": calibrated_spec; "host-spec": the theoretical peaks of the same
/// threads' cores with the measured DRAM bandwidth, which no file gives), with "Calibration:
/// <status>" as its first note.
HardwareSpec host_spec_from_calibration(const std::string& which, const HostDescription& host,
                                        const Calibration& calibration, const std::string& status);

/// What identifies the CPU a calibration belongs to (model, family/model, CPUs, ISA).
std::string host_fingerprint(const HostDescription& host);

std::string calibration_to_json(const Calibration& calibration);
/// Throws kDataLoss naming `origin` and the field when the text is not a calibration.
Calibration parse_calibration(std::string_view json_text, const std::string& origin);

/// $NEURALCOST_CACHE_DIR, else $XDG_CACHE_HOME/neural-cost, else ~/.cache/neural-cost; plus
/// "/host-calibration-<threads>t.json": one calibration per thread count, so that a 1-thread
/// run's ceilings and the all-CPU ones are kept side by side.
std::string calibration_cache_path(int threads);

/// The thread count a run of `threads` threads (0: the library's default, one per CPU) is
/// calibrated with: at most one per CPU this process may use.
int calibration_threads(const HostDescription& host, int threads);

/// The cache file's calibration for calibration_threads(host, threads) threads, when it belongs
/// to this CPU and is full when `full` is asked for. Never measures.
struct CachedCalibration {
  std::optional<Calibration> calibration;  ///< empty when none is usable
  std::string status;                      ///< "calibration of <date> (N threads) from <path>", or why none is usable
  bool stale = false;  ///< a file was there but cannot be used (another CPU, other threads, corrupt)
};
CachedCalibration load_cached_calibration(const HostDescription& host, int threads, bool full);

/// Saves a calibration to calibration_cache_path(calibration.threads) (atomically; creates the folder).
void save_calibration(const Calibration& calibration);

/// How long a calibration for the cache waits for another one of the same thread count to finish.
inline constexpr double kCalibrationLockSeconds = 300;

/// An exclusive hold on the cache's calibration of `threads` threads, so that one process
/// measures while the others wait and then use its result (calibrations run side by side take
/// each other's cores and each measure wrong figures): flock on host-calibration-<threads>t.lock
/// in the private cache folder, opened with O_NOFOLLOW, mode 0600. Released when destroyed.
class CalibrationLock {
 public:
  /// Waits at most `timeout_seconds` (a signal ends the wait: Interrupted); held() is false when
  /// that passed or the lock cannot be used, and why_not() says why.
  CalibrationLock(int threads, double timeout_seconds);
  ~CalibrationLock();
  CalibrationLock(const CalibrationLock&) = delete;
  CalibrationLock& operator=(const CalibrationLock&) = delete;
  bool held() const { return fd_ >= 0; }
  double waited_seconds() const { return waited_seconds_; }  ///< 0 when nobody else held it
  const std::string& why_not() const { return why_not_; }

 private:
  int fd_ = -1;
  double waited_seconds_ = 0;
  std::string why_not_;
};

}  // namespace neuralcost
