// GPU views: the machine's CUDA devices (in `hardware detect` and `backends`) and a GPU
// calibration (`hardware calibrate --device cuda:N`). Sample of the calibration table:
//
//   ceiling     measured      datasheet     ratio   how
//   hbm_copy    4.21 TB/s     4.80 TB/s     87.7%   copy kernel, 2 arrays of 1024 MiB, ...
//   gemm_bf16   702 TFLOP/s   990 TFLOP/s   71.0%   cuBLASLt GEMM 8192x8192x8192 (NN), ...
//
// (an illustration of the layout, not a measurement: no GPU run has been recorded yet). A ratio
// above 100% is marked and repeated in the warnings.
#include <fmt/format.h>

#include "neuralcost/calibrate/gpu_calibration.hpp"
#include "neuralcost/report/views.hpp"
#include "report/gpu_view.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace report {

nlohmann::ordered_json cuda_json(const CudaDevices& cuda) {
  nlohmann::ordered_json j;
  j["available"] = !cuda.unavailable_reason;
  j["unavailable_reason"] = cuda.unavailable_reason ? nlohmann::ordered_json(*cuda.unavailable_reason) : nullptr;
  j["driver_cuda_version"] = cuda.driver_cuda_version;
  j["devices"] = nlohmann::ordered_json::array();
  for (const CudaDeviceInfo& d : cuda.devices) {
    j["devices"].push_back({{"device", fmt::format("cuda:{}", d.index)},
                            {"name", d.name},
                            {"memory_bytes", d.memory_bytes},
                            {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                            {"multiprocessors", d.multiprocessors}});
  }
  return j;
}

std::vector<std::pair<std::string, std::string>> cuda_lines(const CudaDevices& cuda) {
  if (cuda.unavailable_reason) return {{"cuda", "unavailable: " + *cuda.unavailable_reason}};
  std::vector<std::pair<std::string, std::string>> out;
  for (const CudaDeviceInfo& d : cuda.devices) {
    out.emplace_back(fmt::format("cuda:{}", d.index),
                     fmt::format("{}, {}, compute {}.{}, {} SMs (driver supports CUDA {})", d.name,
                                 si(static_cast<double>(d.memory_bytes), "B"), d.compute_major, d.compute_minor,
                                 d.multiprocessors, cuda.driver_cuda_version));
  }
  return out;
}

}  // namespace report

std::string render_gpu_calibration(const GpuCalibration& c, Format format) {
  if (format == Format::kJson) {
    nlohmann::ordered_json j;
    j["schema_version"] = 1;
    j["device"] = c.device;
    j["gpu_name"] = c.gpu_name;
    j["compute_capability"] = c.compute_capability;
    j["spec_id"] = c.spec_id;
    j["quick"] = c.quick;
    j["ceilings"] = nlohmann::ordered_json::array();
    for (const GpuCeiling& g : c.ceilings) {
      j["ceilings"].push_back({{"name", g.name},
                               {"measured", g.measured},
                               {"unit", g.unit},
                               {"datasheet", g.datasheet ? nlohmann::ordered_json(*g.datasheet) : nullptr},
                               {"datasheet_field", g.datasheet_field},
                               {"ratio", g.ratio ? nlohmann::ordered_json(*g.ratio) : nullptr},
                               {"above_datasheet", g.above_datasheet},
                               {"how", g.how}});
    }
    j["counter_checks"] = nlohmann::ordered_json::array();
    for (const CounterCheck& k : c.counter_checks) {
      j["counter_checks"].push_back({{"kernel", k.kernel},
                                     {"quantity", k.quantity},
                                     {"expected", k.expected},
                                     {"measured", k.measured},
                                     {"ratio", k.ratio ? nlohmann::ordered_json(*k.ratio) : nullptr}});
    }
    j["skipped"] = c.skipped;
    j["warnings"] = c.warnings;
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"ceiling", "measured", "datasheet", "ratio", "how"};
  t.raw_headers = {"ceiling", "measured", "datasheet", "ratio", "how"};
  t.right_align = {false, true, true, true, false};
  for (const GpuCeiling& g : c.ceilings) {
    const std::string unit = g.unit == "s" ? "s" : g.unit;
    t.rows.push_back(
        {{g.name, ""},
         {report::si(g.measured, unit), fmt::format("{}", g.measured)},
         {g.datasheet ? report::si(*g.datasheet, unit) : "-", g.datasheet ? fmt::format("{}", *g.datasheet) : ""},
         {g.ratio ? fmt::format("{:.1f}%{}", 100 * *g.ratio, g.above_datasheet ? " (above!)" : "") : "-",
          g.ratio ? fmt::format("{}", *g.ratio) : ""},
         {g.how, ""}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format("{}calibration of {} ({}, compute {}){}, compared with {}\n",
                                format == Format::kMarkdown ? "### " : "", c.device, c.gpu_name, c.compute_capability,
                                c.quick ? ", quick" : "",
                                c.spec_id.empty() ? std::string("no built-in spec") : "the datasheet of " + c.spec_id);
  out += report::render_table(t, format);
  if (!c.counter_checks.empty()) {
    report::Table k;
    k.headers = k.raw_headers = {"kernel", "quantity", "expected", "counters", "ratio"};
    k.right_align = {false, false, true, true, true};
    for (const CounterCheck& r : c.counter_checks) {
      k.rows.push_back(
          {{r.kernel, ""},
           {r.quantity, ""},
           {report::si(r.expected, ""), fmt::format("{}", r.expected)},
           {report::si(r.measured, ""), fmt::format("{}", r.measured)},
           {r.ratio ? fmt::format("{:.2f}%", 100 * *r.ratio) : "-", r.ratio ? fmt::format("{}", *r.ratio) : ""}});
    }
    out += "\nhardware counters (CUPTI range profiler) on kernels of known work:\n" + report::render_table(k, format);
  }
  for (const std::string& s : c.skipped) out += "note: skipped " + s + "\n";
  for (const std::string& w : c.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace neuralcost
