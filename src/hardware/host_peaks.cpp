// Theoretical peaks of the host (see host.hpp): FMA units x vector lanes x 2 FLOPs x cores x
// clock. Neither the FMA units nor the documented clocks are in any file Linux exposes, so they
// come from the CPU table (cpu_parts.hpp; else from the microarchitecture's family and flags, and
// Linux's clock), and the sources say which row was used.
#include <fmt/format.h>

#include <algorithm>

#include "neuralcost/hardware/cpu_parts.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {

int fp32_flops_per_cycle(const HostDescription& h, std::string& why) {
  if (const CpuPart* part = find_cpu_part(h)) {
    why = fmt::format("{}: {} x {}-bit FMA pipes ({})", part->microarchitecture, part->fma_units, part->vector_bits,
                      part->name.empty() ? "the microarchitecture's row of the CPU table"
                                         : fmt::format("the CPU table's row of {}", part->name));
    return part->fp32_flops_per_cycle();
  }
  const bool amd = h.vendor == "AuthenticAMD", intel = h.vendor == "GenuineIntel";
  if (amd && h.family == 0x1A) {
    why = "AMD Zen 5 (family 1Ah): 2 x 512-bit FMA pipes (mobile parts have 256-bit ones: half)";
    return 64;
  }
  if (amd && h.family == 0x19) {
    why = h.has("avx512f") ? "AMD Zen 4 (family 19h with AVX-512): 2 x 256-bit FMA pipes; a 512-bit FMA takes both"
                           : "AMD Zen 3 (family 19h): 2 x 256-bit FMA pipes";
    return 32;
  }
  if (amd && h.family == 0x17) {
    const bool zen2 = h.model_number >= 0x30;
    why = zen2 ? "AMD Zen 2 (family 17h, model >= 30h): 2 x 256-bit FMA pipes"
               : "AMD Zen 1 (family 17h): 2 x 128-bit FMA pipes";
    return zen2 ? 32 : 16;
  }
  if (h.has("avx512f")) {
    why = fmt::format("{}AVX-512: 2 x 512-bit FMA units assumed (some Xeon Silver/Bronze parts have one: half)",
                      intel ? "Intel with " : "");
    return 64;
  }
  if (h.has("avx2") && h.has("fma")) {
    why = "AVX2 with FMA: 2 x 256-bit FMA units assumed";
    return 32;
  }
  if (h.has("asimd")) {
    // Neoverse V1 (0xd40) and V2 (0xd4f), Apple cores: 4 x 128-bit FMA; N1 (0xd0c), N2 (0xd49): 2
    if (h.cpu_part == "0xd40" || h.cpu_part == "0xd4f") {
      why = fmt::format("ARM Neoverse V1/V2 (CPU part {}): 4 x 128-bit FMA pipes", h.cpu_part);
      return 32;
    }
    why = fmt::format("ARM NEON (CPU part {}): 2 x 128-bit FMA pipes assumed",
                      h.cpu_part.empty() ? "unknown" : h.cpu_part);
    return 16;
  }
  why = "no FMA or wide vectors detected: 2 x 128-bit add and multiply pipes assumed";
  return 8;
}

int cores_for_threads(const HostDescription& h, int threads) {
  const int cores = std::max(1, h.cores);
  return threads > 0 ? std::min(threads, cores) : cores;
}

HardwareSpec theoretical_host_spec(const HostDescription& h, int threads, double measured_ghz) {
  HardwareSpec s;
  s.id = "host-spec";
  const int cores = cores_for_threads(h, threads);
  const int used_threads = threads > 0 ? std::min(threads, h.logical_cpus) : h.logical_cpus;
  s.name = fmt::format("this machine (theoretical, {} thread{}): {} ({} of {} cores)", used_threads,
                       used_threads == 1 ? "" : "s", h.model, cores, h.cores);
  s.vendor = "host";
  s.device_type = "cpu";
  s.origin = "detected";
  std::string why;
  const int per_cycle = fp32_flops_per_cycle(h, why);
  const PeakClock clock = peak_clock(h, cores, measured_ghz);
  const double fp32 = cores * per_cycle * clock.ghz * 1e9;
  s.peak_flops_per_second[DType::kFp32] = fp32;
  s.sources["peak_flops_per_second.fp32"] = fmt::format("derived: {} cores x {} FP32 FLOP/cycle ({}) x {:.3f} GHz ({})",
                                                        cores, per_cycle, why, clock.ghz, clock.source);
  s.peak_flops_per_second[DType::kFp64] = fp32 / 2;
  s.sources["peak_flops_per_second.fp64"] = "half the FP32 rate (half the lanes)";
  if (h.has("avx512_bf16") || h.has("amx_bf16") || h.has("bf16")) {
    s.peak_flops_per_second[DType::kBf16] = 2 * fp32;
    s.sources["peak_flops_per_second.bf16"] =
        "twice the FP32 rate (BF16 dot-product instructions: 2 products per FP32 lane; AMX tiles not counted)";
  } else {
    s.peak_flops_per_second[DType::kBf16] = fp32;
    s.sources["peak_flops_per_second.bf16"] =
        "the FP32 rate: no BF16 arithmetic on this CPU (no AVX512-BF16, AMX or Arm BF16), so BF16 values are "
        "widened to FP32 and multiplied by FP32 FMAs";
  }
  if (h.has("avx512_vnni") || h.has("avx_vnni") || h.has("asimddp")) {
    s.peak_flops_per_second[DType::kInt8] = 4 * fp32;
    s.sources["peak_flops_per_second.int8"] = "four times the FP32 rate (int8 dot products: 4 per 32-bit lane)";
  }
  if (h.memory_bytes > 0) {
    s.memory_capacity_bytes = static_cast<double>(h.memory_bytes);
    s.sources["memory_capacity_bytes"] = "/proc/meminfo MemTotal";
  }
  for (const HostCache& c : h.caches) {
    if (!c.plausible) continue;
    CacheLevel level;
    level.name = fmt::format("L{}", c.level);
    level.size_bytes = static_cast<double>(c.size_bytes) * c.instances;
    s.caches.push_back(level);
    s.sources["caches." + level.name + ".size_bytes"] = fmt::format(
        "sysfs: {} instance(s) of {} KiB, each shared by {} CPU(s)", c.instances, c.size_bytes >> 10, c.shared_by_cpus);
  }
  s.notes = {
      fmt::format("Theoretical: the peaks assume each of the {} cores a {}-thread run uses issues full-width "
                  "FMAs every cycle at {:.2f} GHz ({}). `neural-cost hardware calibrate` measures what this "
                  "machine reaches (--hardware host).",
                  cores, used_threads, clock.ghz, clock.documented ? "a documented clock" : "not a documented clock")};
  if (h.virtualized) {
    s.notes.push_back(
        fmt::format("Runs in a virtual machine{}: other guests share the cores' caches and the "
                    "memory bus.",
                    h.hypervisor.empty() ? "" : " (" + h.hypervisor + ")"));
  }
  for (const std::string& n : h.notes) s.notes.push_back(n);
  return s;
}

}  // namespace neuralcost
