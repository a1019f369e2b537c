// Calibration: measuring what this machine really reaches, the way the Empirical Roofline
// Toolkit and likwid-bench do. Bandwidth at each cache level and at DRAM (read, copy, triad;
// buffers sized from the detected caches, pre-faulted and reused; one pinned thread per core a
// run uses), peak FMA throughput per dtype, and the GEMM ceiling through OpenBLAS and oneDNN.
// Every figure is measured in interleaved rounds until the best two rounds agree, and the load
// of the machine is watched before and during the measurement: a calibration taken while other
// work ran is not cached. The record and its cache are hardware/calibration.hpp; this module
// measures (it sits above measure/).
#pragma once

#include <string>
#include <vector>

#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {

/// The best two rounds of every figure the roof uses (FP32 FMA, each level's triad) agree within
/// this fraction of the best, or the calibration says which did not.
inline constexpr double kRoundTolerance = 0.03;
/// A measured peak more than this fraction above its theoretical ceiling is a finding (the CPU
/// table's clock or FMA units are wrong for this CPU); less is measurement noise.
inline constexpr double kAboveTheoryTolerance = 0.05;
/// Never cached: an FP32 FMA peak below this fraction of the theoretical one (load that
/// /proc/stat did not show, or a table row that is wrong for this CPU).
inline constexpr double kMinFmaOfTheory = 0.5;

struct CalibrationOptions {
  bool quick = false;  ///< fewer runs per round and smaller GEMMs: on an idle 2-vCPU VM about 4 s instead of 6 to 9 s
  /// Threads, one pinned per CPU: the ceilings of a run with this many threads (0: one per CPU
  /// this process may use; more than that is capped, with a warning).
  int threads = 0;
  int min_rounds = 2;                ///< interleaved rounds at least...
  int max_rounds = 0;                ///< ...and at most (0: 4 when quick, 6 when full)
  double idle_check_seconds = 0.25;  ///< how long the machine is watched before measuring
};

/// Runs every microbenchmark. Never changes the machine's settings; restores thread affinity.
Calibration calibrate(const HostDescription& host, const CalibrationOptions& options);

/// What the figures of `calibration` say about the theoretical ceilings of `host`: a measured
/// peak more than kAboveTheoryTolerance above its ceiling (the table's clock or FMA units are
/// wrong for this CPU), one under 90 % of it (with the clock that implies), a GEMM above the FMA
/// peak, a DRAM triad under 0.97x the plain STREAM triad, a level faster than the one before.
/// calibrate() adds them to its warnings.
std::vector<std::string> ceiling_findings(const Calibration& calibration, const HostDescription& host);

/// Why `calibration` must not be cached, each with the fix: its `busy` reasons of load (before or
/// during it) and an FP32 FMA below kMinFmaOfTheory of the theoretical peak. Empty when it may
/// be. Rounds that never agreed within the tolerance on a quiet machine are no reason: the
/// machine's own round-to-round spread is what a recalibration would meet again, so such a
/// calibration is cached with its spread (each figure's `spread` and `round_agreement`) and
/// the status says so (rounds_disagreement), instead of being redone by every run (issue 23).
std::vector<std::string> why_not_cacheable(const Calibration& calibration);
/// The `busy` reason that says the best rounds did not agree, or "" (see why_not_cacheable).
std::string rounds_disagreement(const Calibration& calibration);

/// The calibration `--hardware host` uses for a run of `threads` threads (0: one per CPU): the
/// cache file when load_cached_calibration accepts it; else a new calibration (quick unless
/// `full`), saved atomically unless why_not_cacheable objects. `status` says which, and why a
/// cached file was not used (another CPU, other threads, corrupt) or a new one not saved.
Calibration cached_calibration(const HostDescription& host, int threads, bool full, std::string& status);

/// The spec of a resolve_hardware() result that needs a calibration (kNeedsCalibration):
/// calibrates this machine (quick, with the result's threads), caches the result when it may,
/// and returns the spec. `status` says what was measured and where it was saved ("... measured
/// now ..."), or why not. Any other result is returned as it is.
HardwareSpec calibrate_if_needed(const ResolvedHardware& resolved, std::string& status);

}  // namespace neuralcost
