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
  std::string type;                ///< Data, Unified (instruction caches are left out)
  std::uint64_t size_bytes = 0;    ///< one instance
  int shared_by_cpus = 1;          ///< logical CPUs sharing one instance
  int instances = 1;
  bool plausible = true;           ///< false when the size cannot be true (see notes)
};

struct HostDescription {
  std::string architecture;        ///< x86_64, aarch64, ...
  std::string vendor;              ///< AuthenticAMD, GenuineIntel, ARM implementer 0x41, ...
  std::string model = "unknown";   ///< model name
  int family = -1, model_number = -1;  ///< x86 CPUID family and model
  std::string cpu_part;            ///< ARM "CPU part" (0xd40 = Neoverse V1, ...)
  int logical_cpus = 1;            ///< CPUs this process may run on
  int cores = 1;                   ///< physical cores among them (SMT siblings counted once)
  int threads_per_core = 1;
  int sockets = 1;
  std::vector<std::string> flags;  ///< /proc/cpuinfo flags (x86) or Features (ARM)
  std::vector<std::string> isa;    ///< the extensions that change peaks: avx2, avx512f, avx512_bf16, amx_tile, sve, ...
  double ghz = 0;                  ///< the clock the peaks use (see ghz_source)
  std::string ghz_source;
  std::vector<HostCache> caches;   ///< data and unified caches, smallest first
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

/// FP32 FLOPs per cycle per core from the microarchitecture (FMA units x vector lanes x 2),
/// and the assumption behind it in `why`.
int fp32_flops_per_cycle(const HostDescription& host, std::string& why);

/// Theoretical peaks (no bandwidth) at `host.ghz`, every factor named in the sources.
HardwareSpec theoretical_host_spec(const HostDescription& host);

}  // namespace neuralcost
