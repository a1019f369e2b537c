// A provisional spec of the machine this runs on (`--hardware host`): theoretical peaks from the
// CPU's instruction set, core count and clock, and a quick measured memory bandwidth. Every
// assumption is written into the spec's sources and notes. Calibrated ceilings (cache levels,
// measured FMA and GEMM peaks, a cache file) replace it later.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

struct CpuDescription {
  std::string model = "unknown";
  int logical_cpus = 1;             ///< CPUs counted for the peak: cores when SMT siblings are known
  double ghz = 0;                   ///< base or current clock from sysfs or /proc/cpuinfo
  std::string ghz_source;
  std::vector<std::string> flags;   ///< from /proc/cpuinfo
};

/// Parses /proc/cpuinfo text (and an optional cpufreq max in kHz, 0 when absent).
CpuDescription parse_cpuinfo(const std::string& cpuinfo, int logical_cpus, double cpufreq_max_khz);

/// Theoretical peaks of `cpu` (no bandwidth). Assumes two FMA pipes per core at the widest
/// vector width the flags show, which the notes state.
HardwareSpec theoretical_host_spec(const CpuDescription& cpu);

/// Best-of-5 STREAM-style triad a[i] = b[i] + s*c[i] over 3 arrays each the size of the
/// last-level cache (at least 16 MiB) on every CPU this process may use, counting 24 bytes per
/// element (no write-allocate traffic).
double measure_triad_bandwidth();

/// This machine: theoretical_host_spec of the local CPU plus the measured triad bandwidth.
HardwareSpec detect_host_spec();

}  // namespace neuralcost
