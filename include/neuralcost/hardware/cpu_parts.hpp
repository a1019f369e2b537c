// The CPU table: per part (or per microarchitecture, when the model name does not name the part)
// its documented clocks, FMA units and vector width, each row with its source. The theoretical
// peak of this machine comes from here, never from a clock measured while other work ran; a CPU
// that is not in the table says so and falls back to the clock Linux reports, named as such.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/hardware/host.hpp"

namespace neuralcost {

/// One row: a part (`name` set) or, with an empty `name`, every part of a microarchitecture
/// whose model name the table does not know (a hypervisor often shows only "AMD EPYC").
struct CpuPart {
  std::string_view vendor;              ///< CPUID vendor: AuthenticAMD, GenuineIntel
  int family = 0;                       ///< CPUID family (0x19 = Zen 4, 0x1A = Zen 5, 6 = Intel Core/Xeon)
  int model_first = 0, model_last = 0;  ///< CPUID model range of the microarchitecture
  /// Matched in /proc/cpuinfo's model name, not followed by a digit ("EPYC 9654" matches "AMD
  /// EPYC 9654 96-Core Processor" and "AMD EPYC 9654P ...", never "EPYC 96540"). Empty: a
  /// microarchitecture row.
  std::string_view name;
  std::string_view microarchitecture;  ///< "Zen 5 (Turin)"
  int cores = 0;                       ///< per socket; 0 when not published (or a microarchitecture row)
  double base_ghz = 0;                 ///< 0: not published
  double all_core_boost_ghz = 0;       ///< the clock every core can hold together; 0: not published
  double max_boost_ghz =
      0;                ///< the highest clock a core reaches; a microarchitecture row: the highest of any of its parts
  int fma_units = 0;    ///< FMA pipes per core
  int vector_bits = 0;  ///< width of each FMA pipe's datapath
  std::string_view source;  ///< where the numbers come from

  /// FP32 FLOPs per cycle per core: FMA units x lanes x 2.
  int fp32_flops_per_cycle() const { return fma_units * (vector_bits / 32) * 2; }
};

/// Every row, parts before the microarchitecture rows.
const std::vector<CpuPart>& cpu_parts();

/// The row of `host`: the part its model name names, else its microarchitecture's row (vendor,
/// family and model range); nullptr when the table has neither.
const CpuPart* find_cpu_part(const HostDescription& host);

/// The clock the theoretical peaks use, and why.
struct PeakClock {
  double ghz = 0;
  std::string source;       ///< which clock, of which row or file
  bool documented = false;  ///< from the CPU table (else Linux's clock, the measured one, or assumed)
  const CpuPart* part = nullptr;
};

/// The peak clock of `cores_used` cores of `host`. A part in the table: its all-core boost when
/// every core of every socket is used and the vendor publishes one, else its max boost (a few
/// busy cores of a large part can each reach it; an upper bound either way). A
/// microarchitecture row: the highest max boost of its parts, an upper bound. Not in the
/// table: the clock Linux reports (host.ghz), else `measured_ghz` when given, else 1 GHz; the
/// source says which and that the CPU is not in the table.
PeakClock peak_clock(const HostDescription& host, int cores_used, double measured_ghz = 0);

}  // namespace neuralcost
