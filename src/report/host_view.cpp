// Views of this machine: what detection found (`hardware detect`) and what calibration measured
// (`hardware calibrate`). Sample of the calibration table:
//
//   level   size      working set   read        copy        triad       spread
//   L1      64 KiB    32 KiB        1.2 TB/s    640 GB/s    700 GB/s    2.1%
//   DRAM    23.5 GiB  384 MiB       31 GB/s     25 GB/s     27 GB/s     3.0%
//
// after a header with the rounds, the clock of the theoretical peaks and the load before and during
// calibration; then the FMA peaks beside the theoretical ones, the GEMM ceilings, the environment
// and warnings.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/hardware/cpu_parts.hpp"
#include "neuralcost/report/views.hpp"
#include "report/gpu_view.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using report::Cell;

Cell number(double value, const char* unit) { return {report::si(value, unit), fmt::format("{}", value)}; }
Cell percent(double fraction) { return {fmt::format("{:.1f}%", fraction * 100), fmt::format("{}", fraction)}; }

}  // namespace

std::string render_host(const HostDescription& h, Format format, const CudaDevices* cuda) {
  nlohmann::ordered_json j;
  j["model"] = h.model;
  j["vendor"] = h.vendor;
  j["architecture"] = h.architecture;
  j["family"] = h.family;
  j["model_number"] = h.model_number;
  j["cpu_part"] = h.cpu_part;
  j["logical_cpus"] = h.logical_cpus;
  j["cores"] = h.cores;
  j["threads_per_core"] = h.threads_per_core;
  j["sockets"] = h.sockets;
  j["isa"] = h.isa;
  j["clock_ghz"] = h.ghz;
  j["clock_source"] = h.ghz_source;
  const PeakClock peak = peak_clock(h, h.cores);
  j["cpu_table_row"] =
      peak.part
          ? (peak.part->name.empty() ? std::string(peak.part->microarchitecture) + " (microarchitecture row)"
                                     : std::string(peak.part->name) + ", " + std::string(peak.part->microarchitecture))
          : std::string("none: not in the CPU table");
  j["peak_clock_ghz"] = peak.ghz;
  j["peak_clock_source"] = peak.source;
  j["caches"] = nlohmann::ordered_json::array();
  for (const HostCache& c : h.caches) {
    j["caches"].push_back({{"level", c.level},
                           {"type", c.type},
                           {"size_bytes", c.size_bytes},
                           {"shared_by_cpus", c.shared_by_cpus},
                           {"instances", c.instances},
                           {"plausible", c.plausible}});
  }
  j["memory_bytes"] = h.memory_bytes;
  j["numa_nodes"] = h.numa_nodes;
  j["virtualized"] = h.virtualized;
  j["hypervisor"] = h.hypervisor;
  j["notes"] = h.notes;
  if (cuda) j["cuda"] = report::cuda_json(*cuda);
  if (format == Format::kJson) return report::json_text(j);
  report::Table t;
  t.headers = t.raw_headers = {"field", "value"};
  for (const auto& [key, value] : j.items()) {
    if (key == "caches" || key == "notes" || key == "cuda") continue;
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (key == "memory_bytes") text = report::si(static_cast<double>(h.memory_bytes), "B");
    if (key == "isa") {
      text.clear();
      for (const auto& e : h.isa) text += (text.empty() ? "" : " ") + e;
    }
    t.rows.push_back({{key, ""}, {text, value.is_string() ? value.get<std::string>() : value.dump()}});
  }
  for (const HostCache& c : h.caches) {
    t.rows.push_back({{fmt::format("L{} {}", c.level, c.type), ""},
                      {fmt::format("{} x {}, each shared by {} CPU(s){}", c.instances,
                                   report::si(static_cast<double>(c.size_bytes), "B"), c.shared_by_cpus,
                                   c.plausible ? "" : " (implausible: not used)"),
                       ""}});
  }
  if (cuda) {
    for (const auto& [key, text] : report::cuda_lines(*cuda)) t.rows.push_back({{key, ""}, {text, ""}});
  }
  std::string out = report::render_table(t, format);
  if (format != Format::kCsv) {
    for (const std::string& n : h.notes)
      out += (n.rfind("warning: ", 0) == 0 ? "" : "note: ") + n + "\n";  // a warning is not a note
  }
  return out;
}

std::string render_calibration(const Calibration& c, Format format) {
  if (format == Format::kJson) return calibration_to_json(c);
  report::Table levels;
  levels.headers = {"level", "size", "working set", "read", "copy", "triad", "triad spread"};
  levels.raw_headers = {"level",
                        "size_bytes",
                        "working_set_bytes",
                        "read_bytes_per_second",
                        "copy_bytes_per_second",
                        "triad_bytes_per_second",
                        "triad_spread"};
  levels.right_align = {false, true, true, true, true, true, true};
  for (const BandwidthLevel& l : c.levels) {
    auto rate = [](const RateMeasurement& m) {
      return Cell{fmt::format("{} ({})", report::si(m.best, "B/s"), m.kernel), fmt::format("{}", m.best)};
    };
    levels.rows.push_back({{l.name, ""},
                           number(l.size_bytes, "B"),
                           number(l.working_set_bytes, "B"),
                           rate(l.read),
                           rate(l.copy),
                           rate(l.triad),
                           percent(l.triad.spread)});
  }
  if (format == Format::kCsv) return report::render_table(levels, format);
  std::string out = fmt::format(
      "{}calibration of {}\n{} ({} thread{}, {} kernels, {} round{} (best two within "
      "{:.0f}%), clock {:.3f} GHz measured, {:.1f} s{})\n",
      format == Format::kMarkdown ? "### " : "", c.fingerprint, c.created, c.threads, c.threads == 1 ? "" : "s",
      c.kernel_isa, c.rounds, c.rounds == 1 ? "" : "s", 100 * c.round_tolerance, c.clock_ghz, c.seconds,
      c.quick ? ", quick" : "");
  out += fmt::format("theoretical peaks at {:.3f} GHz: {}\n", c.peak_clock_ghz, c.peak_clock_source);
  auto load = [](const CalibrationLoad& l) {
    return fmt::format(
        "other processes {:.0f}% of a CPU, steal {:.1f}%{} over {:.2f} s", 100 * l.other_cpus, 100 * l.steal_fraction,
        l.other_runnable >= 0 ? fmt::format(", {:.1f} other runnable tasks", l.other_runnable) : "", l.seconds);
  };
  out += fmt::format("load before: {}; during: {}\n", load(c.load_before), load(c.load_during));
  for (const std::string& b : c.busy) out += "busy: " + b + "\n";
  out += "\n";
  out += report::render_table(levels, format);
  out += fmt::format("plain STREAM triad at the DRAM size: {} (the triad kernel: {:.1f}% of it)\n\n",
                     report::si(c.stream_triad.best, "B/s"), 100 * c.levels.back().triad.best / c.stream_triad.best);
  report::Table peaks;
  peaks.headers = peaks.raw_headers = {"compute", "measured", "theoretical", "of theoretical", "spread"};
  peaks.right_align = {false, true, true, true, true};
  for (const auto& [dtype, m] : c.fma) {
    const auto theory = c.theoretical_flops.find(dtype);
    const bool known = theory != c.theoretical_flops.end();
    peaks.rows.push_back({{dtype + " FMA", ""},
                          number(m.best, "FLOP/s"),
                          known ? number(theory->second, "FLOP/s") : Cell{"-", ""},
                          known ? percent(m.best / theory->second) : Cell{"-", ""},
                          percent(m.spread)});
  }
  for (const GemmCeiling& g : c.gemm) {
    const auto fma = c.fma.find(g.dtype);
    peaks.rows.push_back(
        {{fmt::format("{} {} GEMM n={}", g.library, g.dtype, g.n), ""},
         number(g.flops_per_second.best, "FLOP/s"),
         {"-", ""},
         fma != c.fma.end()
             ? Cell{fmt::format("{:.1f}% of {} FMA", 100 * g.flops_per_second.best / fma->second.best, g.dtype), ""}
             : Cell{"-", ""},
         percent(g.flops_per_second.spread)});
  }
  out += report::render_table(peaks, format);
  out += "\n";
  for (const auto& [key, value] : c.environment) out += fmt::format("environment: {} = {}\n", key, value);
  for (const std::string& w : c.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace neuralcost
