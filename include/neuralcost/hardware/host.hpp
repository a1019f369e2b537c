// The machine this runs on: what Linux says about it (/proc/cpuinfo, /proc/meminfo, sysfs),
// checked for values that cannot be true, and its theoretical peaks from the instruction set,
// FMA units and clock, with every assumption written into the spec's sources and notes.
// Measured ceilings come from calibration.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

struct HostCache {
  int level = 0;
  std::string type;              ///< Data, Unified (instruction caches are left out)
  std::uint64_t size_bytes = 0;  ///< one instance
  int shared_by_cpus = 1;        ///< logical CPUs sharing one instance
  int instances = 1;
  bool plausible = true;  ///< false when the size cannot be true (see notes)
};

struct HostDescription {
  std::string architecture;            ///< x86_64, aarch64, ...
  std::string vendor;                  ///< AuthenticAMD, GenuineIntel, ARM implementer 0x41, ...
  std::string model = "unknown";       ///< model name
  int family = -1, model_number = -1;  ///< x86 CPUID family and model
  std::string cpu_part;                ///< ARM "CPU part" (0xd40 = Neoverse V1, ...)
  int logical_cpus = 1;                ///< CPUs this process may run on
  int cores = 1;                       ///< physical cores among them (SMT siblings counted once)
  int threads_per_core = 1;
  int sockets = 1;
  std::vector<std::string> flags;  ///< /proc/cpuinfo flags (x86) or Features (ARM)
  std::vector<std::string> isa;    ///< the extensions that change peaks: avx2, avx512f, avx512_bf16, amx_tile, sve, ...
  /// The clock Linux reports (cpufreq's maximum, else 'cpu MHz'; see ghz_source). The peaks use
  /// the CPU table's documented clock instead when the part is in it (cpu_parts.hpp).
  double ghz = 0;
  std::string ghz_source;
  std::vector<HostCache> caches;  ///< data and unified caches, smallest first
  std::uint64_t memory_bytes = 0;
  int numa_nodes = 1;
  bool virtualized = false;
  std::string hypervisor;          ///< when known
  std::vector<std::string> notes;  ///< values distrusted or missing, and why

  bool has(const std::string& flag) const;
};

/// Reads the description from the files under `root` ("/" for this machine; tests pass a
/// canned tree with proc/cpuinfo, proc/meminfo and sys/devices/system/...). For this machine
/// the CPU count is the process's affinity mask; for a canned tree, the processors listed.
HostDescription describe_host(const std::string& root = "/");

/// FP32 FLOPs per cycle per core (FMA units x vector lanes x 2): the CPU table's row when it has
/// one, else from the microarchitecture's family and flags; the assumption behind it in `why`.
int fp32_flops_per_cycle(const HostDescription& host, std::string& why);

/// The cores a run of `threads` threads uses (0: one per CPU this process may use): never more
/// than the cores there are.
int cores_for_threads(const HostDescription& host, int threads);

/// Theoretical peaks (no bandwidth) of the cores `threads` threads use (0: all of them), at the
/// peak clock of cpu_parts.hpp (`measured_ghz` only when the CPU is not in the table and Linux
/// reports no clock); every factor named in the sources.
HardwareSpec theoretical_host_spec(const HostDescription& host, int threads = 0, double measured_ghz = 0);

}  // namespace neuralcost
