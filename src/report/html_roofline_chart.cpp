// The HTML report's roofline chart (report/html_charts.hpp): every run placed by its arithmetic
// intensity and achieved FLOP/s under the roofs of its hardware spec, a chosen run's layers beside it.
#include "report/html_charts.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include "neuralcost/version.hpp"
#include "report/chart_parts.hpp"
#include "report/findings_text.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"

namespace neuralcost::report {

using nlohmann::json;
using namespace chart_parts;  // NOLINT(google-build-using-namespace): the charts' shared parts

namespace {

struct Roof {
  double x, y, x2, y2;
  std::string label, kind;
};

}  // namespace

Chart roofline_chart(const ResultsFile& results, std::vector<std::string>& notes) {
  const std::vector<ResultRun>& runs = results.runs;
  const HardwareSpec* hw = runs.empty() ? nullptr : find_hardware(results, runs.front().hardware_id);
  if (!hw && !results.hardware.empty()) hw = &results.hardware.front();
  Chart c{"chart-roofline", "run_points", 0, base_spec(760, 440)};
  json run_points = json::array(), layer_points = json::array(), ridges = json::array();
  json chosen_options = json::array(), chosen_labels = json::array();
  double xlo = INFINITY, xhi = 0, ylo = INFINITY, yhi = 0;
  auto extend = [&](double x, double y) {
    xlo = std::min(xlo, x);
    xhi = std::max(xhi, x);
    ylo = std::min(ylo, y);
    yhi = std::max(yhi, y);
  };
  std::size_t not_drawn = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ResultRun& r = runs[i];
    if (r.failed()) continue;
    if (!(r.arithmetic_intensity > 0 && r.achieved_flops_per_second > 0)) {
      ++not_drawn;
      continue;
    }
    extend(r.arithmetic_intensity, r.achieved_flops_per_second);
    run_points.push_back({{"i", i},
                          {"x", r.arithmetic_intensity},
                          {"y", r.achieved_flops_per_second},
                          {"backend", r.backend},
                          {"mode", r.mode},
                          {"verdict", r.verdict},
                          {"tooltip", run_tooltip(r)}});
    std::size_t drawn_layers = 0;
    for (const ResultLayer& l : r.layers) {
      if (l.flops == 0 || l.bytes == 0 || !(l.measured_seconds > 0)) continue;
      const double ai = static_cast<double>(l.flops) / static_cast<double>(l.bytes);
      const double rate = static_cast<double>(l.flops) / l.measured_seconds;
      extend(ai, rate);
      ++drawn_layers;
      layer_points.push_back({{"run", i},
                              {"x", ai},
                              {"y", rate},
                              {"tooltip",
                               {{"layer", l.label()},
                                {"kind", l.kind.empty() ? "-" : l.kind},
                                {"FLOPs", si(static_cast<double>(l.flops), "FLOP")},
                                {"bytes", si(static_cast<double>(l.bytes), "B")},
                                {"arithmetic intensity", fmt::format("{:.3g} FLOP/B", ai)},
                                {"time", si(l.measured_seconds, "s")},
                                {"efficiency", report::percent(l.efficiency)},
                                {"limit", l.bound.empty() ? "-" : l.bound}}}});
    }
    if (drawn_layers > 0) {
      chosen_options.push_back(i);
      chosen_labels.push_back(report::run_name(r));
    }
  }
  c.expected = run_points.size();
  if (not_drawn > 0) {
    notes.push_back(
        fmt::format("{} measured run(s) with no FLOPs or no bytes cannot be placed on log axes and are not "
                    "drawn.",
                    not_drawn));
  }
  // the roofs: compute per dtype (peak, and the vector rate where it differs), memory per cache
  // level with a bandwidth and DRAM; a ridge point per dtype against DRAM
  std::vector<std::pair<std::string, double>> peaks, levels;
  if (hw) {
    for (const auto& [d, p] : hw->peak_flops_per_second) peaks.emplace_back(std::string(dtype_name(d)), p);
    for (const auto& [d, p] : hw->vector_flops_per_second) {
      if (hw->peak_flops_per_second.count(d) == 0 || hw->peak_flops_per_second.at(d) != p) {
        peaks.emplace_back(std::string(dtype_name(d)) + " vector", p);
      }
    }
    for (const CacheLevel& l : hw->caches) {
      if (l.bandwidth_bytes_per_second) levels.emplace_back(l.name, *l.bandwidth_bytes_per_second);
    }
    levels.emplace_back("DRAM", hw->memory_bandwidth_bytes_per_second);
  } else {
    notes.push_back("The results name no hardware spec that could be read: the roofs are not drawn.");
  }
  double top = 0, fastest = 0;
  for (const auto& [n, p] : peaks) {
    top = std::max(top, p);
    ridges.push_back({{"x", p / hw->memory_bandwidth_bytes_per_second},
                      {"y", p},
                      {"tooltip",
                       {{"ridge point", n},
                        {"intensity", fmt::format("{:.3g} FLOP/B", p / hw->memory_bandwidth_bytes_per_second)},
                        {"peak", si(p, "FLOP/s")}}}});
    extend(p / hw->memory_bandwidth_bytes_per_second, p);
  }
  for (const auto& [n, bw] : levels) fastest = std::max(fastest, bw);
  if (!std::isfinite(xlo)) {  // nothing measured: a decade around 1 FLOP/B
    xlo = 0.1, xhi = 10, ylo = 1e6, yhi = 1e9;
  }
  xlo /= 4, xhi *= 4, ylo /= 4, yhi *= 2;
  for (const auto& [n, bw] : levels) ylo = std::min(ylo, bw * xlo);
  std::vector<Roof> roofs;
  for (const auto& [n, bw] : levels) {
    const double xe = top > 0 ? std::min(xhi, top / bw) : xhi;
    roofs.push_back(
        {xlo, bw * xlo, xe, bw * xe, fmt::format("{} {}", n, si(bw, "B/s")), n == "DRAM" ? "dram" : "cache"});
  }
  for (const auto& [n, p] : peaks) {
    roofs.push_back({std::min(xhi, p / fastest), p, xhi, p, fmt::format("{} {}", n, si(p, "FLOP/s")), "compute"});
  }
  json roof_data = json::array();
  for (const Roof& r : roofs) {
    roof_data.push_back({{"x", r.x}, {"y", r.y}, {"x2", r.x2}, {"y2", r.y2}, {"label", r.label}, {"kind", r.kind}});
  }
  json& s = c.spec;
  s["data"] = {{{"name", "roofs"}, {"values", roof_data}},
               {{"name", "ridges"}, {"values", ridges}},
               {{"name", "runs"}, {"values", run_points}},
               {{"name", "layers"}, {"values", layer_points}},
               {{"name", "layers_shown"},
                {"source", "layers"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.run === chosen"}}})}}};
  const json first = chosen_options.empty() ? json(-1) : chosen_options.front();
  s["signals"] = json::array();
  if (chosen_options.empty())
    s["signals"].push_back({{"name", "chosen"}, {"value", -1}});
  else
    s["signals"].push_back(select_signal("chosen", first, chosen_options, chosen_labels, "per-layer points of "));
  s["scales"] = {{{"name", "x"}, {"type", "log"}, {"domain", {xlo, xhi}}, {"range", "width"}, {"nice", false}},
                 {{"name", "y"}, {"type", "log"}, {"domain", {ylo, yhi}}, {"range", "height"}, {"nice", false}},
                 color_scale(runs),
                 shape_scale(runs)};
  s["axes"] = {{{"orient", "bottom"},
                {"scale", "x"},
                {"title", "arithmetic intensity (FLOP/byte)"},
                {"grid", true},
                {"format", "~g"},
                {"labelOverlap", true}},
               {{"orient", "left"}, {"scale", "y"}, {"title", "FLOP/s"}, {"grid", true}, {"format", "~s"}}};
  s["legends"] = {{{"fill", "color"}, {"title", "framework"}, {"symbolType", "circle"}},
                  {{"shape", "shape"}, {"title", "mode"}}};
  s["marks"] = {
      {{"type", "rule"},
       {"from", {{"data", "roofs"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "x"}}},
           {"y", {{"scale", "y"}, {"field", "y"}}},
           {"x2", {{"scale", "x"}, {"field", "x2"}}},
           {"y2", {{"scale", "y"}, {"field", "y2"}}},
           {"stroke", {{"signal", "datum.kind === 'compute' ? '#333' : datum.kind === 'dram' ? '#555' : '#999'"}}},
           {"strokeDash", {{"signal", "datum.kind === 'cache' ? [5, 3] : []"}}},
           {"strokeWidth", {{"value", 1.6}}}}}}}},
      {{"type", "text"},
       {"from", {{"data", "roofs"}}},
       {"encode",
        {{"update",
          {{"x", {{"signal", "datum.kind === 'compute' ? scale('x', datum.x2) - 4 : scale('x', datum.x) + 4"}}},
           {"y", {{"signal", "datum.kind === 'compute' ? scale('y', datum.y2) - 4 : scale('y', datum.y) - 6"}}},
           {"align", {{"signal", "datum.kind === 'compute' ? 'right' : 'left'"}}},
           {"text", {{"field", "label"}}},
           {"fontSize", {{"value", 10}}},
           {"fill", {{"value", "#444"}}}}}}}},
      {{"type", "symbol"},
       {"name", "ridge_points"},
       {"from", {{"data", "ridges"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "x"}}},
           {"y", {{"scale", "y"}, {"field", "y"}}},
           {"shape", {{"value", "diamond"}}},
           {"size", {{"value", 45}}},
           {"fill", {{"value", "#333"}}},
           {"tooltip", {{"field", "tooltip"}}}}}}}},
      {{"type", "symbol"},
       {"name", "layer_points"},
       {"from", {{"data", "layers_shown"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "x"}}},
           {"y", {{"scale", "y"}, {"field", "y"}}},
           {"shape", {{"value", "triangle-up"}}},
           {"size", {{"value", 55}}},
           {"fill", {{"value", "#e45756"}}},
           {"fillOpacity", {{"value", 0.75}}},
           {"tooltip", {{"field", "tooltip"}}}}},
         {"hover", {{"fillOpacity", {{"value", 1}}}, {"size", {{"value", 120}}}}}}}},
      {{"type", "symbol"},
       {"name", "run_points"},
       {"from", {{"data", "runs"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "x"}}},
           {"y", {{"scale", "y"}, {"field", "y"}}},
           {"shape", {{"scale", "shape"}, {"field", "mode"}}},
           {"size", {{"value", 110}}},
           {"fill", {{"scale", "color"}, {"field", "backend"}}},
           {"fillOpacity", {{"value", 0.85}}},
           {"stroke",
            {{"signal", "datum.verdict === 'mistrusted' ? '#d62728' : datum.i === chosen ? '#000' : '#fff'"}}},
           {"strokeWidth", {{"signal", "datum.verdict === 'mistrusted' || datum.i === chosen ? 2 : 0.8"}}},
           {"tooltip", {{"field", "tooltip"}}}}}}}}};
  if (hw) {
    notes.push_back(
        fmt::format("Roofs of {} [{}]: compute per dtype, memory per cache level and DRAM; diamonds "
                    "are the ridge points against DRAM.",
                    hw->name, hw->id));
  }
  if (results.hardware.size() > 1) {
    notes.push_back(
        fmt::format("The runs were measured against {} hardware specs; the roofs drawn are the first run's.",
                    results.hardware.size()));
  }
  return c;
}

}  // namespace neuralcost::report
