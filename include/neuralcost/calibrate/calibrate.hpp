// Calibration: measuring what this machine really reaches, the way the Empirical Roofline
// Toolkit and likwid-bench do. Bandwidth at each cache level and at DRAM (read, copy, triad;
// buffers sized from the detected caches, pre-faulted and reused; one pinned thread per CPU),
// peak FMA throughput per dtype, and the GEMM ceiling through OpenBLAS and oneDNN. The record and
// its cache are hardware/calibration.hpp; this module measures (it sits above measure/).
#pragma once

#include <string>

#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {

struct CalibrationOptions {
  bool quick = false;  ///< fewer repetitions and smaller GEMMs: under 10 s instead of under 60 s
  int threads = 0;     ///< 0: one per CPU this process may use
};

/// Runs every microbenchmark. Never changes the machine's settings; restores thread affinity.
Calibration calibrate(const HostDescription& host, const CalibrationOptions& options);

/// The calibration `--hardware host` uses: the cache file when load_cached_calibration accepts
/// it; else a new calibration (quick unless `full`), saved atomically when believable (its FP32
/// FMA within 15% of the theoretical peak). `status` says which, and why a cached file was not
/// used (another CPU, other threads, corrupt).
Calibration cached_calibration(const HostDescription& host, bool full, std::string& status);

/// The spec of a resolve_hardware() result that needs a calibration (kNeedsCalibration):
/// calibrates this machine (quick), caches the result when believable, and returns the spec.
/// `status` says what was measured and where it was saved ("... measured now ..."). Any other
/// result is returned as it is.
HardwareSpec calibrate_if_needed(const ResolvedHardware& resolved, std::string& status);

}  // namespace neuralcost
