// Views of the hardware database: a list of parts and one part with its sources.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/report/views.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using report::Cell;

Cell rate(const std::map<DType, double>& peaks, DType d, const char* unit) {
  auto it = peaks.find(d);
  if (it == peaks.end()) return {"-", ""};
  return {report::si(it->second, unit), fmt::format("{}", it->second)};
}

std::string source_of(const HardwareSpec& s, const std::string& field) {
  auto it = s.sources.find(field);
  return it == s.sources.end() ? "(no source given)" : it->second;
}

}  // namespace

std::string render_hardware_list(const std::vector<HardwareSpec>& specs, Format format) {
  if (format == Format::kJson) {
    nlohmann::json j = nlohmann::json::array();
    for (const HardwareSpec& s : specs) j.push_back(hardware_json(s));
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"id", "name", "type", "fp32", "fp16", "bf16", "memory BW", "ridge fp32", "aliases"};
  t.raw_headers = {"id",
                   "name",
                   "device_type",
                   "fp32_flops_per_second",
                   "fp16_flops_per_second",
                   "bf16_flops_per_second",
                   "memory_bandwidth_bytes_per_second",
                   "ridge_point_fp32_flops_per_byte",
                   "aliases"};
  t.right_align = {false, false, false, true, true, true, true, true, false};
  for (const HardwareSpec& s : specs) {
    const bool fp32 = s.peak_flops_per_second.count(DType::kFp32) != 0;
    std::string aliases;
    for (const std::string& a : s.aliases) aliases += (aliases.empty() ? "" : " ") + a;
    t.rows.push_back(
        {{s.id, ""},
         {s.name, ""},
         {s.device_type, ""},
         rate(s.peak_flops_per_second, DType::kFp32, "FLOP/s"),
         rate(s.peak_flops_per_second, DType::kFp16, "FLOP/s"),
         rate(s.peak_flops_per_second, DType::kBf16, "FLOP/s"),
         {report::si(s.memory_bandwidth_bytes_per_second, "B/s"),
          fmt::format("{}", s.memory_bandwidth_bytes_per_second)},
         fp32 ? Cell{report::fixed1(s.ridge_point(DType::kFp32)), fmt::format("{}", s.ridge_point(DType::kFp32))}
              : Cell{"-", ""},
         {aliases, ""}});
  }
  return report::render_table(t, format);
}

std::string render_hardware(const HardwareSpec& s, Format format) {
  if (format == Format::kJson) return report::json_text(hardware_json(s));
  report::Table t;
  t.headers = {"field", "value", "source"};
  t.raw_headers = {"field", "value", "source"};
  auto add = [&](const std::string& field, double value, const std::string& unit) {
    t.rows.push_back({{field, ""}, {report::si(value, unit), fmt::format("{}", value)}, {source_of(s, field), ""}});
  };
  for (const auto& [d, v] : s.peak_flops_per_second) {
    add("peak_flops_per_second." + std::string(dtype_name(d)), v, "FLOP/s");
  }
  for (const auto& [d, v] : s.vector_flops_per_second) {
    add("vector_flops_per_second." + std::string(dtype_name(d)), v, "FLOP/s");
  }
  add("memory_bandwidth_bytes_per_second", s.memory_bandwidth_bytes_per_second, "B/s");
  if (s.memory_capacity_bytes) add("memory_capacity_bytes", *s.memory_capacity_bytes, "B");
  if (s.kernel_launch_seconds) add("kernel_launch_seconds", *s.kernel_launch_seconds, "s");
  for (const CacheLevel& c : s.caches) {
    add("caches." + c.name + ".size_bytes", c.size_bytes, "B");
    if (c.bandwidth_bytes_per_second) {
      add("caches." + c.name + ".bandwidth_bytes_per_second", *c.bandwidth_bytes_per_second, "B/s");
    }
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format("{}{} [{}]\nvendor: {}, type: {}, aliases: {}, origin: {}\n\n",
                                format == Format::kMarkdown ? "### " : "", s.name, s.id, s.vendor, s.device_type,
                                s.aliases.empty() ? "none" : fmt::format("{}", fmt::join(s.aliases, ", ")), s.origin);
  out += report::render_table(t, format);
  if (s.peak_flops_per_second.count(DType::kFp32)) {
    out += fmt::format("\nridge point (fp32): {} FLOP/B\n", report::fixed1(s.ridge_point(DType::kFp32)));
  }
  for (const std::string& n : s.notes)
    out += (n.rfind("warning: ", 0) == 0 ? "" : "note: ") + n + "\n";  // a warning is not a note
  return out;
}

}  // namespace neuralcost
