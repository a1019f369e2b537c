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

/// Repeated runs of one rate (bytes/s or FLOP/s).
struct RateMeasurement {
  double best = 0;    ///< the highest rate seen
  double median = 0;
  double spread = 0;  ///< (best - worst) / best
  int runs = 0;
  std::string kernel; ///< the variant that set `best` (bandwidth: avx512, avx2, scalar)
};

struct BandwidthLevel {
  std::string name;                  ///< L1, L2, L3, DRAM
  double size_bytes = 0;             ///< the level's capacity (all instances); DRAM: memory size
  double working_set_bytes = 0;      ///< all threads' buffers together in this test
  RateMeasurement read, copy, triad; ///< bytes/s, STREAM's counting (no write-allocate traffic)
};

struct GemmCeiling {
  std::string library;  ///< "OpenBLAS 0.3.21 (Cooperlake)", "oneDNN 2.6.3"
  std::string dtype;    ///< fp32, fp64
  int n = 0;            ///< square size
  RateMeasurement flops_per_second;
};

struct Calibration {
  std::string fingerprint;    ///< the CPU it was measured on (host_fingerprint)
  std::string created;        ///< UTC, ISO 8601
  std::string tool_version;
  bool quick = false;
  int threads = 1;
  std::string kernel_isa;     ///< avx512, avx2, neon, scalar
  double clock_ghz = 0;       ///< measured with dependent adds on every thread at once
  std::vector<BandwidthLevel> levels;              ///< caches smallest first, DRAM last
  RateMeasurement stream_triad;                    ///< a plain STREAM triad at the DRAM size, same run
  std::map<std::string, RateMeasurement> fma;      ///< peak FLOP/s by dtype (fp32, fp64, bf16)
  std::map<std::string, double> theoretical_flops; ///< cores x FLOP/cycle x measured clock, by dtype
  std::vector<GemmCeiling> gemm;
  std::map<std::string, std::string> environment;  ///< facts that change ceilings
  std::vector<std::string> warnings;               ///< figures that cannot be believed, and why
  double seconds = 0;                              ///< how long calibration took
};

/// The spec `--hardware host` uses: measured FMA peaks, DRAM triad bandwidth, and each cache
/// level with its measured triad bandwidth (for the cache-aware roofline).
HardwareSpec calibrated_spec(const HostDescription& host, const Calibration& calibration);

/// The spec of `which` ("host": calibrated_spec; "host-spec": the theoretical peaks with the
/// measured DRAM bandwidth, which no file gives), with "Calibration: <status>" as its first note.
HardwareSpec host_spec_from_calibration(const std::string& which, const HostDescription& host,
                                        const Calibration& calibration, const std::string& status);

/// What identifies the CPU a calibration belongs to (model, family/model, CPUs, ISA).
std::string host_fingerprint(const HostDescription& host);

std::string calibration_to_json(const Calibration& calibration);
/// Throws kDataLoss naming `origin` and the field when the text is not a calibration.
Calibration parse_calibration(std::string_view json_text, const std::string& origin);

/// $NEURALCOST_CACHE_DIR, else $XDG_CACHE_HOME/neural-cost, else ~/.cache/neural-cost; plus
/// "/host-calibration.json".
std::string calibration_cache_path();

/// The cache file's calibration, when it belongs to this CPU, used one thread per CPU and is full
/// when `full` is asked for. Never measures.
struct CachedCalibration {
  std::optional<Calibration> calibration;  ///< empty when none is usable
  std::string status;  ///< "calibration of <date> from <path>", or why none is usable
  bool stale = false;  ///< a file was there but cannot be used (another CPU, other threads, corrupt)
};
CachedCalibration load_cached_calibration(const HostDescription& host, bool full);

/// Saves a calibration to calibration_cache_path() (atomically; creates the folder).
void save_calibration(const Calibration& calibration);

}  // namespace neuralcost
