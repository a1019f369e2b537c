// Table, Markdown and CSV views of analyses (JSON is in json_view.cpp).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "neuralcost/gpu/launch_floor.hpp"

#include "neuralcost/models/reference.hpp"
#include "neuralcost/report/views.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using report::Cell;

Cell num(double value, const std::string& unit) { return {report::si(value, unit), fmt::format("{}", value)}; }
Cell count(std::uint64_t value, const std::string& unit) {
  return {report::si(static_cast<double>(value), unit), std::to_string(value)};
}
Cell text(std::string s) { return {std::move(s), ""}; }

std::string output_shape(const OpRecord& op) {
  return op.outputs.empty() ? "-" : shape_string(op.outputs.front().shape);
}

std::string headline(const Analysis& a) {
  std::string batch = a.batch > 0 ? fmt::format("batch {}, ", a.batch) : "";
  std::string roofs;
  if (a.hardware.peak_flops_per_second.count(a.dtype)) {
    roofs = fmt::format("{} peak {}, ", dtype_name(a.dtype),
                        report::si(a.hardware.peak_flops_per_second.at(a.dtype), "FLOP/s"));
  }
  std::string out;
  if (a.mostly_unmodeled()) {
    // the one thing to read first: these totals are not a result, and what fixes it
    out += fmt::format("warning: {} of {} ops are not modeled, so the totals below mean nothing; {}\n",
                       a.unmodeled.size(), a.ops.size(), terminal_text(a.first_fix()));
  }
  out += fmt::format("{} ({}{}) on {} [{}]\nroofs: {}memory {}, ridge point {} FLOP/B\n", terminal_text(a.model), batch,
                     dtype_name(a.dtype), a.hardware.name, a.hardware.id, roofs,
                     report::si(a.hardware.memory_bandwidth_bytes_per_second, "B/s"), report::fixed1(a.ridge_point));
  // cache levels some op is bound by: their bandwidth and ridge point, so "memory L2" reads
  std::set<std::string> levels;
  for (const OpRoofline& r : a.ops) {
    if (r.bound && *r.bound == Bound::kMemory && r.memory_level != "DRAM") levels.insert(r.memory_level);
  }
  const double peak =
      a.hardware.peak_flops_per_second.count(a.dtype) ? a.hardware.peak_flops_per_second.at(a.dtype) : 0;
  for (const CacheLevel& c : a.hardware.caches) {
    if (!levels.count(c.name) || !c.bandwidth_bytes_per_second) continue;
    out += fmt::format("roof {}: {} ({} working sets), ridge point {} FLOP/B\n", c.name,
                       report::si(*c.bandwidth_bytes_per_second, "B/s"), report::si(c.size_bytes, "B"),
                       peak > 0 ? report::fixed1(peak / *c.bandwidth_bytes_per_second) : std::string("n/a"));
  }
  for (const std::string& n : a.graph.notes()) out += "note: " + terminal_text(n) + "\n";
  return out;
}

std::string totals_text(const Analysis& a) {
  const ModelTotals& t = a.totals;
  std::string out = fmt::format(
      "total: {} ({} in contractions), {} moved ({} read, {} written), {} FLOP/B\n",
      report::si(static_cast<double>(t.flops), "FLOP"), report::si(static_cast<double>(t.contraction_flops), "FLOP"),
      report::si(static_cast<double>(t.bytes_read + t.bytes_written), "B"),
      report::si(static_cast<double>(t.bytes_read), "B"), report::si(static_cast<double>(t.bytes_written), "B"),
      report::fixed1(t.arithmetic_intensity));
  out += fmt::format("parameters: {} ({} with buffers)\n", report::grouped(t.parameter_count),
                     report::si(static_cast<double>(t.parameter_bytes), "B"));
  out +=
      fmt::format("lower bound: {} unfused ({}-bound), {} fused ({} moved)\n", report::si(t.lower_bound_seconds, "s"),
                  bound_name(t.bound), report::si(t.fused_lower_bound_seconds, "s"),
                  report::si(static_cast<double>(t.fused_bytes_read + t.fused_bytes_written), "B"));
  if (const std::optional<LaunchFloor> f = launch_floor(a)) {
    // the GPU's per-kernel launch floor, its own term beside the roofline (gpu/launch_floor.hpp)
    out += fmt::format(
        "launch floor: {} per kernel ({}): {} kernels unfused = {}, {} fused = {}; {} ops bound below "
        "it; with the floor the bound is {} unfused, {} fused\n",
        report::si(f->seconds_per_kernel, "s"),
        f->source.rfind("estimate", 0) == 0 ? "an estimate" : "measured or given", f->unfused_kernels,
        report::si(f->unfused_floor_seconds, "s"), f->fused_kernels, report::si(f->fused_floor_seconds, "s"),
        f->ops_below_floor, report::si(f->unfused_bound_seconds, "s"), report::si(f->fused_bound_seconds, "s"));
  }
  if (t.dram_lower_bound_seconds > t.lower_bound_seconds * 1.0001) {
    out += fmt::format(
        "cache-aware: ops whose working set fits a cache level are timed at its bandwidth; with every "
        "byte from DRAM the unfused bound is {}\n",
        report::si(t.dram_lower_bound_seconds, "s"));
  }
  if (a.batch > 0 && t.lower_bound_seconds > 0 && !a.mostly_unmodeled()) {
    out += fmt::format("best case: {} samples/s from the unfused bound, {} from the fused bound{}\n",
                       report::si(static_cast<double>(a.batch) / t.lower_bound_seconds, ""),
                       report::si(static_cast<double>(a.batch) / t.fused_lower_bound_seconds, ""),
                       a.complete() ? "" : fmt::format(" (without the {} ops not modeled)", a.unmodeled.size()));
  }
  return out;
}

std::string unmodeled_text(const Analysis& a) {
  std::string notes;
  for (const std::string& n : a.approximations) notes += "note: approximation: " + terminal_text(n) + "\n";
  if (a.complete()) return notes;
  double bytes = 0;
  for (const UnmodeledOp& u : a.unmodeled) bytes += u.byte_share;
  std::string out =
      fmt::format("warning: {} of {} ops are not modeled ({} of bytes moved); FLOP totals are incomplete\n",
                  a.unmodeled.size(), a.ops.size(), report::percent(bytes));
  for (const UnmodeledOp& u : a.unmodeled) {
    out += fmt::format("note: op '{}': {}\n", terminal_text(a.graph.op(u.op_index).name), terminal_text(u.reason));
  }
  return out + notes;
}

}  // namespace

std::optional<Format> parse_format(std::string_view name) {
  if (name == "table") return Format::kTable;
  if (name == "json") return Format::kJson;
  if (name == "csv") return Format::kCsv;
  if (name == "md" || name == "markdown") return Format::kMarkdown;
  return std::nullopt;
}

std::optional<Format> format_for_path(std::string_view path) {
  const auto dot = path.rfind('.');
  if (dot == std::string_view::npos || path.find('/', dot) != std::string_view::npos) return std::nullopt;
  const std::string_view ext = path.substr(dot + 1);
  if (ext == "json") return Format::kJson;
  if (ext == "csv") return Format::kCsv;
  if (ext == "md" || ext == "markdown") return Format::kMarkdown;
  return std::nullopt;
}

static std::string analysis_view(const Analysis& a, Format format) {
  if (format == Format::kJson) return report::json_text(analysis_json(a));
  report::Table t;
  t.headers = {"op", "kind", "output", "FLOPs", "bytes", "FLOP/B", "bound", "lower bound", "share"};
  t.raw_headers = {
      "name", "kind", "output_shape", "flops", "bytes", "arithmetic_intensity", "bound", "lower_bound_seconds",
      "share"};
  t.right_align = {false, false, false, true, true, true, false, true, true};
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    const bool ok = r.cost.modeled;
    const bool view = ok && r.cost.flops == 0 && r.cost.bytes() == 0;  // no work: no roof binds
    t.rows.push_back(
        {text(op.name), text(std::string(op_kind_name(op.kind))), text(output_shape(op)),
         ok ? count(r.cost.flops, "") : text("?"), count(r.cost.bytes(), "B"),
         ok && !view
             ? Cell{report::fixed1(r.cost.arithmetic_intensity()), fmt::format("{}", r.cost.arithmetic_intensity())}
             : text(view ? "-" : "?"),
         text(!ok                                                      ? "unmodeled"
              : view                                                   ? "-"
              : *r.bound == Bound::kMemory && r.memory_level != "DRAM" ? "memory " + r.memory_level
                                                                       : std::string(bound_name(*r.bound))),
         num(r.lower_bound_seconds, "s"), Cell{report::percent(r.share), fmt::format("{}", r.share)}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const ModelTotals& tot = a.totals;
  t.rows.push_back({text("total"), text(""), text(""), count(tot.flops, ""),
                    count(tot.bytes_read + tot.bytes_written, "B"), text(report::fixed1(tot.arithmetic_intensity)),
                    text(std::string(bound_name(tot.bound))), num(tot.lower_bound_seconds, "s"),
                    text(report::percent(1.0))});
  std::string out = format == Format::kMarkdown ? "### " : "";
  out += headline(a) + "\n" + report::render_table(t, format) + "\n" + totals_text(a) + unmodeled_text(a);
  return out;
}

static std::string summary_view(const std::vector<Analysis>& analyses, Format format) {
  if (format == Format::kJson) {
    nlohmann::json j{{"schema_version", 1}, {"analyses", nlohmann::json::array()}};
    for (const Analysis& a : analyses) j["analyses"].push_back(analysis_json(a));
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"model", "batch",       "params",      "FLOPs",           "bytes",   "FLOP/B",
               "bound", "lower bound", "fused bound", "samples/s (max)", "complete"};
  t.raw_headers = {"model",
                   "batch",
                   "parameter_count",
                   "flops",
                   "bytes",
                   "arithmetic_intensity",
                   "bound",
                   "lower_bound_seconds",
                   "fused_lower_bound_seconds",
                   "max_samples_per_second",
                   "complete"};
  t.right_align = {false, true, true, true, true, true, false, true, true, true, false};
  for (const Analysis& a : analyses) {
    const ModelTotals& tot = a.totals;
    const double rate = tot.lower_bound_seconds > 0 ? a.batch / tot.lower_bound_seconds : 0;
    t.rows.push_back({text(a.model), text(std::to_string(a.batch)), count(tot.parameter_count, ""),
                      count(tot.flops, ""), count(tot.bytes_read + tot.bytes_written, "B"),
                      Cell{report::fixed1(tot.arithmetic_intensity), fmt::format("{}", tot.arithmetic_intensity)},
                      text(std::string(bound_name(tot.bound))), num(tot.lower_bound_seconds, "s"),
                      num(tot.fused_lower_bound_seconds, "s"), num(rate, ""), text(a.complete() ? "yes" : "NO")});
  }
  if (format == Format::kCsv || analyses.empty()) return report::render_table(t, format);
  const Analysis& first = analyses.front();
  bool references = true;
  const std::vector<std::string>& names = reference_model_names();
  for (const Analysis& a : analyses)
    references = references && std::find(names.begin(), names.end(), a.model) != names.end();
  std::string out =
      fmt::format("{}{} on {} [{}], {}: peak {}, memory {}\n\n", format == Format::kMarkdown ? "### " : "",
                  references ? "reference networks" : fmt::format("{} analyses", analyses.size()), first.hardware.name,
                  first.hardware.id, dtype_name(first.dtype),
                  first.hardware.peak_flops_per_second.count(first.dtype)
                      ? report::si(first.hardware.peak_flops_per_second.at(first.dtype), "FLOP/s")
                      : "n/a",
                  report::si(first.hardware.memory_bandwidth_bytes_per_second, "B/s"));
  out += report::render_table(t, format);
  out +=
      "\nlower bound = sum over ops of max(FLOPs / peak, bytes / bandwidth); fused keeps "
      "elementwise and normalisation chains on chip (docs/counting.md); samples/s (max) is from the unfused "
      "bound\n";
  for (const Analysis& a : analyses) {
    for (const std::string& n : a.graph.notes())
      out += fmt::format("note: {}: {}\n", terminal_text(a.model), terminal_text(n));
  }
  return out;
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_analysis(const Analysis& a, Format format) {
  return report::noting_invalid_utf8(format, [&] { return analysis_view(a, format); });
}

std::string render_summary(const std::vector<Analysis>& analyses, Format format) {
  return report::noting_invalid_utf8(format, [&] { return summary_view(analyses, format); });
}

}  // namespace neuralcost
