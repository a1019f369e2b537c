// A hardware spec from a calibration record (see calibration.hpp): what `--hardware host`
// uses. Measuring is in src/calibrate/; this file only reads the record.
#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/hardware/calibration.hpp"

namespace neuralcost {

std::string host_fingerprint(const HostDescription& h) {
  std::string isa;
  for (const auto& e : h.isa) isa += (isa.empty() ? "" : ",") + e;
  return fmt::format("{} | family {} model {} part {} | {} CPUs | {}", h.model, h.family, h.model_number,
                     h.cpu_part.empty() ? "-" : h.cpu_part, h.logical_cpus, isa);
}

HardwareSpec calibrated_spec(const HostDescription& host, const Calibration& c) {
  HardwareSpec s = theoretical_host_spec(host, c.threads, c.clock_ghz);
  s.id = "host";
  const int cores = cores_for_threads(host, c.threads);
  s.name = fmt::format("this machine (calibrated, {} thread{}): {} ({} of {} cores)", c.threads,
                       c.threads == 1 ? "" : "s", host.model, cores, host.cores);
  s.origin = "calibrated";
  s.peak_flops_per_second.clear();
  for (auto it = s.sources.begin(); it != s.sources.end();) {
    it = it->first.rfind("peak_flops_per_second.", 0) == 0 ? s.sources.erase(it) : std::next(it);
  }
  s.notes.clear();
  const std::map<std::string, DType> dtypes = {{"fp32", DType::kFp32}, {"fp64", DType::kFp64}, {"bf16", DType::kBf16}};
  for (const auto& [name, m] : c.fma) {
    s.peak_flops_per_second[dtypes.at(name)] = m.best;
    s.sources["peak_flops_per_second." + name] =
        fmt::format("measured {}: {} threads of independent {} FMAs ({}), best of {} runs (spread {:.1f}%)", c.created,
                    c.threads, name, c.kernel_isa, m.runs, m.spread * 100);
  }
  const bool bf16_arithmetic = host.has("avx512_bf16") || host.has("amx_bf16") || host.has("bf16");
  if (!bf16_arithmetic && !c.fma.count("bf16") && c.fma.count("fp32")) {
    s.peak_flops_per_second[DType::kBf16] = c.fma.at("fp32").best;
    s.sources["peak_flops_per_second.bf16"] =
        "the measured FP32 peak: no BF16 arithmetic on this CPU (no AVX512-BF16, AMX or Arm BF16), so BF16 values "
        "are widened to FP32 and multiplied by FP32 FMAs";
  }
  if (host.has("avx512_vnni") && c.fma.count("fp32")) {
    s.peak_flops_per_second[DType::kInt8] = 4 * c.fma.at("fp32").best;
    s.sources["peak_flops_per_second.int8"] =
        "four times the measured FP32 peak (VNNI int8 dot products; not measured)";
  }
  const BandwidthLevel& dram = c.levels.back();
  s.memory_bandwidth_bytes_per_second = dram.triad.best;
  s.roof_uncertainty = dram.triad.round_agreement;
  for (const auto& [name, m] : c.fma) s.roof_uncertainty = std::max(s.roof_uncertainty, m.round_agreement);
  s.sources["memory_bandwidth_bytes_per_second"] = fmt::format(
      "measured {}: triad over {:.0f} MiB on {} threads, best of {} runs (spread {:.1f}%; plain STREAM triad {:.1f} "
      "GB/s)",
      c.created, dram.working_set_bytes / (1 << 20), c.threads, dram.triad.runs, dram.triad.spread * 100,
      c.stream_triad.best / 1e9);
  s.caches.clear();
  for (const BandwidthLevel& level : c.levels) {
    if (level.name == "DRAM") continue;
    s.caches.push_back({level.name, level.size_bytes, level.triad.best});
    s.sources["caches." + level.name + ".bandwidth_bytes_per_second"] = fmt::format(
        "measured: triad over {:.0f} KiB in all, best of {}", level.working_set_bytes / 1024, level.triad.runs);
  }
  for (const GemmCeiling& g : c.gemm) {
    s.notes.push_back(
        fmt::format("GEMM ceiling {} {} n={}: {:.1f} GFLOP/s", g.library, g.dtype, g.n, g.flops_per_second.best / 1e9));
  }
  s.notes.insert(
      s.notes.begin(),
      fmt::format("Calibrated {} ({}, {} thread{}, {} round{}, clock {:.2f} GHz measured beside the "
                  "{:.2f} GHz of the theoretical peaks): the measured ceilings of the {} core{} a {}-thread "
                  "run uses; `--hardware host-spec` gives the theoretical ones.",
                  c.created, c.quick ? "quick" : "full", c.threads, c.threads == 1 ? "" : "s", c.rounds,
                  c.rounds == 1 ? "" : "s", c.clock_ghz, c.peak_clock_ghz, cores, cores == 1 ? "" : "s", c.threads));
  for (const std::string& w : c.warnings) s.notes.push_back("warning: " + w);
  return s;
}

HardwareSpec host_spec_from_calibration(const std::string& which, const HostDescription& host,
                                        const Calibration& calibration, const std::string& status) {
  const HardwareSpec measured = calibrated_spec(host, calibration);
  HardwareSpec s = which == "host" ? measured : theoretical_host_spec(host, calibration.threads, calibration.clock_ghz);
  if (which != "host") {
    s.memory_bandwidth_bytes_per_second = measured.memory_bandwidth_bytes_per_second;
    s.sources["memory_bandwidth_bytes_per_second"] = measured.sources.at("memory_bandwidth_bytes_per_second");
  }
  s.notes.insert(s.notes.begin(), "Calibration: " + status);
  return s;
}

}  // namespace neuralcost
