// The HTML report (see report_views.hpp): one self-contained page. Text is HTML-escaped here;
// the charts are Vega specs built here with their data inline, embedded as JSON that no string
// can break out of, and drawn by Vega's SVG renderer (text as text nodes, tooltips as title
// attributes), so no name from a model file ever becomes markup or script.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "neuralcost/report/report_views.hpp"
#include "neuralcost/version.hpp"
#include "report/findings_text.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::html_text;
using report::si;

// ---------------------------------------------------------------------------------------------
// Chart specs (Vega 5). Every chart names the mark whose items are its data points, and says how
// many it should draw with the defaults: the page's check compares that with what was drawn.

struct Chart {
  std::string id;      ///< element id, "chart-roofline"
  std::string mark;    ///< the mark whose items are counted
  std::size_t expected = 0;
  json spec;
};

const json kConfig = {
    {"font", "system-ui, -apple-system, 'Segoe UI', sans-serif"},
    {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}, {"gridColor", "#ececec"}, {"domainColor", "#888"}}},
    {"legend", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
    {"title", {{"fontSize", 13}}}};

const std::vector<std::string> kShapes = {"circle", "diamond", "triangle-up", "square", "cross", "triangle-down"};

json base_spec(double width, double height) {
  return {{"$schema", "https://vega.github.io/schema/vega/v5.json"},
          {"width", width},
          {"height", height},
          {"padding", 8},
          {"config", kConfig}};
}

/// A select input bound to a signal: `options` with their `labels`.
json select_signal(const std::string& name, const json& value, const json& options, const json& labels,
                   const std::string& label) {
  return {{"name", name},
          {"value", value},
          {"bind", {{"input", "select"}, {"options", options}, {"labels", labels}, {"name", label}}}};
}

std::string label_of(const ResultRun& r) { return fmt::format("{} · {} {}", r.model, r.backend, r.mode); }

std::vector<std::string> distinct(const std::vector<ResultRun>& runs, std::string ResultRun::*field, bool measured_only) {
  std::vector<std::string> out;
  for (const ResultRun& r : runs) {
    if (measured_only && r.failed()) continue;
    if (std::find(out.begin(), out.end(), r.*field) == out.end()) out.push_back(r.*field);
  }
  return out;
}

json color_scale(const std::vector<ResultRun>& runs) {
  return {{"name", "color"}, {"type", "ordinal"}, {"domain", distinct(runs, &ResultRun::backend, false)},
          {"range", {{"scheme", "tableau10"}}}};
}

json shape_scale(const std::vector<ResultRun>& runs) {
  std::vector<std::string> modes = distinct(runs, &ResultRun::mode, false);
  json range = json::array();
  for (std::size_t i = 0; i < modes.size(); ++i) range.push_back(kShapes[i % kShapes.size()]);
  return {{"name", "shape"}, {"type", "ordinal"}, {"domain", modes}, {"range", range}};
}

json run_tooltip(const ResultRun& r) {
  return {{"run", report::run_name(r)},
          {"median", si(r.median_seconds, "s")},
          {"95% CI", fmt::format("{} - {}", si(r.ci95_low_seconds, "s"), si(r.ci95_high_seconds, "s"))},
          {"arithmetic intensity", fmt::format("{:.3g} FLOP/B", r.arithmetic_intensity)},
          {"achieved", si(r.achieved_flops_per_second, "FLOP/s")},
          {"efficiency", report::percent(r.efficiency)},
          {"limit", r.bound},
          {"verdict", r.verdict}};
}

/// The largest batch of the measured runs (the default of the batch selectors).
std::int64_t largest_batch(const std::vector<ResultRun>& runs) {
  std::int64_t b = 0;
  for (const ResultRun& r : runs) {
    if (!r.failed()) b = std::max(b, r.batch);
  }
  return b;
}

json batch_selector(const std::set<std::int64_t>& batches, std::int64_t value) {
  json options = json::array(), labels = json::array();
  for (std::int64_t b : batches) {
    options.push_back(b);
    labels.push_back(std::to_string(b));
  }
  return select_signal("batch", value, options, labels, "batch ");
}

struct Roof {
  double x, y, x2, y2;
  std::string label, kind;
};

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
    run_points.push_back({{"i", i}, {"x", r.arithmetic_intensity}, {"y", r.achieved_flops_per_second},
                          {"backend", r.backend}, {"mode", r.mode}, {"verdict", r.verdict}, {"tooltip", run_tooltip(r)}});
    std::size_t drawn_layers = 0;
    for (const ResultLayer& l : r.layers) {
      if (l.flops == 0 || l.bytes == 0 || !(l.measured_seconds > 0)) continue;
      const double ai = static_cast<double>(l.flops) / static_cast<double>(l.bytes);
      const double rate = static_cast<double>(l.flops) / l.measured_seconds;
      extend(ai, rate);
      ++drawn_layers;
      layer_points.push_back(
          {{"run", i}, {"x", ai}, {"y", rate},
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
    notes.push_back(fmt::format("{} measured run(s) with no FLOPs or no bytes cannot be placed on log axes and are not "
                                "drawn.", not_drawn));
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
    ridges.push_back({{"x", p / hw->memory_bandwidth_bytes_per_second}, {"y", p},
                      {"tooltip", {{"ridge point", n},
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
    roofs.push_back({xlo, bw * xlo, xe, bw * xe, fmt::format("{} {}", n, si(bw, "B/s")), n == "DRAM" ? "dram" : "cache"});
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
  if (chosen_options.empty()) s["signals"].push_back({{"name", "chosen"}, {"value", -1}});
  else s["signals"].push_back(select_signal("chosen", first, chosen_options, chosen_labels, "per-layer points of "));
  s["scales"] = {{{"name", "x"}, {"type", "log"}, {"domain", {xlo, xhi}}, {"range", "width"}, {"nice", false}},
                 {{"name", "y"}, {"type", "log"}, {"domain", {ylo, yhi}}, {"range", "height"}, {"nice", false}},
                 color_scale(runs),
                 shape_scale(runs)};
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"title", "arithmetic intensity (FLOP/byte)"}, {"grid", true},
                {"format", "~g"}, {"labelOverlap", true}},
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
           {"stroke", {{"signal", "datum.verdict === 'mistrusted' ? '#d62728' : datum.i === chosen ? '#000' : '#fff'"}}},
           {"strokeWidth", {{"signal", "datum.verdict === 'mistrusted' || datum.i === chosen ? 2 : 0.8"}}},
           {"tooltip", {{"field", "tooltip"}}}}}}}}};
  if (hw) {
    notes.push_back(fmt::format("Roofs of {} [{}]: compute per dtype, memory per cache level and DRAM; diamonds "
                                "are the ridge points against DRAM.",
                                hw->name, hw->id));
  }
  if (results.hardware.size() > 1) {
    notes.push_back(fmt::format("The runs were measured against {} hardware specs; the roofs drawn are the first run's.",
                                results.hardware.size()));
  }
  return c;
}

Chart latency_chart(const ResultsFile& results) {
  const std::vector<ResultRun>& runs = results.runs;
  Chart c{"chart-latency", "latency_points", 0, {}};
  json rows = json::array();
  std::set<std::int64_t> batches;
  std::map<std::int64_t, std::size_t> per_batch;
  double lo = INFINITY, hi = 0;
  const std::int64_t chosen = largest_batch(runs);
  for (const ResultRun& r : runs) {
    if (r.failed() || !(r.median_seconds > 0)) continue;
    batches.insert(r.batch);
    ++per_batch[r.batch];
    const double low = r.ci95_low_seconds > 0 ? r.ci95_low_seconds : r.median_seconds;
    lo = std::min(lo, low);
    hi = std::max(hi, std::max(r.ci95_high_seconds, r.median_seconds));
    rows.push_back({{"label", label_of(r)}, {"batch", r.batch}, {"median", r.median_seconds}, {"low", low},
                    {"high", std::max(r.ci95_high_seconds, r.median_seconds)}, {"backend", r.backend}, {"mode", r.mode},
                    {"verdict", r.verdict}, {"tooltip", run_tooltip(r)}});
    if (r.batch == chosen) ++c.expected;
  }
  std::size_t most = 1;
  for (const auto& [b, n] : per_batch) most = std::max(most, n);
  if (rows.empty()) lo = 1e-6, hi = 1e-3;
  c.spec = base_spec(640, static_cast<double>(most) * 24);
  json& s = c.spec;
  s["signals"] = json::array({batch_selector(batches, chosen)});
  s["data"] = {{{"name", "latency"}, {"values", rows}},
               {{"name", "shown"},
                {"source", "latency"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.batch === batch"}}})}}};
  s["scales"] = {{{"name", "x"}, {"type", "log"}, {"domain", {lo / 1.5, hi * 1.5}}, {"range", "width"}, {"nice", false}},
                 {{"name", "y"}, {"type", "band"}, {"domain", {{"data", "shown"}, {"field", "label"}}},
                  {"range", "height"}, {"padding", 0.3}},
                 color_scale(runs),
                 shape_scale(runs)};
  // the log axis's own labels (it leaves some ticks unlabelled), in seconds
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"grid", true}, {"format", "~s"}, {"labelOverlap", true},
                {"encode", {{"labels", {{"update", {{"text", {{"signal", "datum.label ? datum.label + 's' : ''"}}}}}}}}},
                {"title", "median time per pass; whiskers: 95% CI of the median"}},
               {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 260}}};
  s["legends"] = {{{"fill", "color"}, {"title", "framework"}, {"symbolType", "circle"}},
                  {{"shape", "shape"}, {"title", "mode"}}};
  const json y = {{"scale", "y"}, {"field", "label"}, {"band", 0.5}};
  s["marks"] = {{{"type", "rule"},
                 {"from", {{"data", "shown"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"field", "low"}}},
                     {"x2", {{"scale", "x"}, {"field", "high"}}},
                     {"y", y},
                     {"stroke", {{"scale", "color"}, {"field", "backend"}}},
                     {"strokeWidth", {{"value", 2}}}}}}}},
                {{"type", "symbol"},
                 {"name", "latency_points"},
                 {"from", {{"data", "shown"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"field", "median"}}},
                     {"y", y},
                     {"shape", {{"scale", "shape"}, {"field", "mode"}}},
                     {"size", {{"value", 80}}},
                     {"fill", {{"signal", "datum.verdict === 'mistrusted' ? '#fff' : scale('color', datum.backend)"}}},
                     {"stroke", {{"signal", "datum.verdict === 'mistrusted' ? '#d62728' : scale('color', datum.backend)"}}},
                     {"strokeWidth", {{"value", 1.5}}},
                     {"tooltip", {{"field", "tooltip"}}}}}}}}};
  return c;
}

Chart heatmap_chart(const ResultsFile& results) {
  const std::vector<ResultRun>& runs = results.runs;
  Chart c{"chart-efficiency", "heat_cells", 0, {}};
  json cells = json::array();
  std::set<std::int64_t> batches;
  std::vector<std::string> configs, models;
  double top = 0;
  const std::int64_t chosen = largest_batch(runs);
  for (const ResultRun& r : runs) {
    batches.insert(r.batch);
    const std::string config = report::config_name(r);
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) configs.push_back(config);
    if (std::find(models.begin(), models.end(), r.model) == models.end()) models.push_back(r.model);
    if (!r.failed()) top = std::max(top, r.efficiency);
    const std::string text = r.failed() ? "failed" : report::percent(r.efficiency) + (r.mistrusted() ? " ?" : "");
    json tooltip = r.failed() ? json{{"run", report::run_name(r)}, {"verdict", "failed"}, {"error", r.error}} : run_tooltip(r);
    cells.push_back({{"model", r.model}, {"config", config}, {"batch", r.batch}, {"efficiency", r.efficiency},
                     {"verdict", r.verdict}, {"text", text}, {"tooltip", tooltip}});
    if (r.batch == chosen) ++c.expected;
  }
  c.spec = base_spec(std::max<double>(240, 110.0 * static_cast<double>(configs.size())),
                     std::max<double>(60, 34.0 * static_cast<double>(models.size())));
  json& s = c.spec;
  s["signals"] = json::array({batch_selector(batches, chosen)});
  s["data"] = {{{"name", "cells"}, {"values", cells}},
               {{"name", "shown"},
                {"source", "cells"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.batch === batch"}}})}}};
  // the configurations and models of the chosen batch (a model may have been run at other batches only)
  s["scales"] = {{{"name", "x"}, {"type", "band"}, {"domain", {{"data", "shown"}, {"field", "config"}}},
                  {"range", "width"}, {"padding", 0.04}},
                 {{"name", "y"}, {"type", "band"}, {"domain", {{"data", "shown"}, {"field", "model"}}},
                  {"range", "height"}, {"padding", 0.04}},
                 {{"name", "heat"}, {"type", "linear"}, {"domain", {0, top > 0 ? top : 1}},
                  {"range", {{"scheme", "blues"}}}, {"zero", true}}};
  s["axes"] = {{{"orient", "top"}, {"scale", "x"}, {"labelLimit", 150}}, {{"orient", "left"}, {"scale", "y"}}};
  s["legends"] = json::array({{{"fill", "heat"}, {"title", "roofline efficiency"}, {"format", ".1%"}, {"type", "gradient"}}});
  s["marks"] = {
      {{"type", "rect"},
       {"name", "heat_cells"},
       {"from", {{"data", "shown"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "config"}}},
           {"width", {{"scale", "x"}, {"band", 1}}},
           {"y", {{"scale", "y"}, {"field", "model"}}},
           {"height", {{"scale", "y"}, {"band", 1}}},
           {"fill", json::array({{{"test", "datum.verdict === 'failed'"}, {"value", "#e6e6e6"}},
                                 {{"scale", "heat"}, {"field", "efficiency"}}})},
           {"stroke", {{"signal", "datum.verdict === 'mistrusted' ? '#d62728' : null"}}},
           {"strokeWidth", {{"value", 2}}},
           {"tooltip", {{"field", "tooltip"}}}}}}}},
      {{"type", "text"},
       {"from", {{"data", "shown"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "config"}, {"band", 0.5}}},
           {"y", {{"scale", "y"}, {"field", "model"}, {"band", 0.5}}},
           {"align", {{"value", "center"}}},
           {"baseline", {{"value", "middle"}}},
           {"text", {{"field", "text"}}},
           {"fontSize", {{"value", 11}}},
           {"fill", {{"signal", std::string("datum.verdict !== 'failed' && datum.efficiency > ") +
                                    fmt::format("{}", 0.55 * (top > 0 ? top : 1)) + " ? '#fff' : '#222'"}}}}}}}}};
  return c;
}

Chart scaling_chart(const ResultsFile& results) {
  const std::vector<ResultRun>& runs = results.runs;
  Chart c{"chart-scaling", "scaling_points", 0, base_spec(560, 320)};
  json points = json::array();
  std::vector<std::string> models;
  std::int64_t blo = INT64_MAX, bhi = 0;
  for (const ResultRun& r : runs) {
    if (r.failed() || !(r.samples_per_second > 0)) continue;
    if (std::find(models.begin(), models.end(), r.model) == models.end()) models.push_back(r.model);
    blo = std::min(blo, r.batch);
    bhi = std::max(bhi, r.batch);
    points.push_back({{"model", r.model}, {"config", report::config_name(r)}, {"backend", r.backend}, {"mode", r.mode},
                      {"batch", r.batch}, {"sps", r.samples_per_second}, {"verdict", r.verdict},
                      {"tooltip", run_tooltip(r)}});
    if (r.model == (models.empty() ? "" : models.front())) ++c.expected;
  }
  if (points.empty()) blo = 1, bhi = 2;
  json& s = c.spec;
  s["signals"] = json::array({select_signal("model", models.empty() ? json("") : json(models.front()), models, models, "model ")});
  s["data"] = {{{"name", "points"}, {"values", points}},
               {{"name", "shown"},
                {"source", "points"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.model === model"}}})}}};
  s["scales"] = {{{"name", "x"}, {"type", "log"}, {"base", 2},
                  {"domain", {static_cast<double>(blo) / 1.3, static_cast<double>(bhi) * 1.3}}, {"range", "width"},
                  {"nice", false}},
                 {{"name", "y"}, {"type", "log"}, {"domain", {{"data", "shown"}, {"field", "sps"}}}, {"range", "height"},
                  {"nice", true}, {"zero", false}},
                 {{"name", "color"}, {"type", "ordinal"}, {"domain", {{"data", "points"}, {"field", "config"}, {"sort", true}}},
                  {"range", {{"scheme", "tableau10"}}}}};
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"title", "batch"}, {"grid", true}, {"format", "~g"}},
               {{"orient", "left"}, {"scale", "y"}, {"title", "samples/s"}, {"grid", true}, {"format", "~s"}}};
  s["legends"] = json::array({{{"stroke", "color"}, {"title", "framework, mode"}, {"symbolType", "stroke"}}});
  s["marks"] = {
      {{"type", "group"},
       {"from", {{"facet", {{"name", "series"}, {"data", "shown"}, {"groupby", "config"}}}}},
       {"marks",
        json::array({{{"type", "line"},
          {"from", {{"data", "series"}}},
          {"sort", {{"field", "datum.batch"}}},
          {"encode",
           {{"update",
             {{"x", {{"scale", "x"}, {"field", "batch"}}},
              {"y", {{"scale", "y"}, {"field", "sps"}}},
              {"stroke", {{"scale", "color"}, {"field", "config"}}},
              {"strokeWidth", {{"value", 2}}}}}}}}})}},
      {{"type", "symbol"},
       {"name", "scaling_points"},
       {"from", {{"data", "shown"}}},
       {"encode",
        {{"update",
          {{"x", {{"scale", "x"}, {"field", "batch"}}},
           {"y", {{"scale", "y"}, {"field", "sps"}}},
           {"size", {{"value", 50}}},
           {"fill", {{"signal", "datum.verdict === 'mistrusted' ? '#fff' : scale('color', datum.config)"}}},
           {"stroke", {{"scale", "color"}, {"field", "config"}}},
           {"tooltip", {{"field", "tooltip"}}}}}}}}};
  return c;
}

Chart speedup_chart(const ResultsFile& results, const Findings& f) {
  Chart c{"chart-speedup", "speedup_bars", 0, {}};
  json bars = json::array();
  std::set<std::int64_t> batches;
  std::map<std::int64_t, std::size_t> per_batch;
  double lo = 1, hi = 1;
  for (const Speedup& s : f.speedups) {
    const ResultRun& e = results.runs[s.eager];
    const ResultRun& k = results.runs[s.compiled];
    batches.insert(k.batch);
    ++per_batch[k.batch];
    lo = std::min(lo, s.speedup);
    hi = std::max(hi, s.speedup);
    const char* source = s.source == SpeedupSource::kDispatch ? "mostly less dispatch (outside the layers)"
                         : s.source == SpeedupSource::kLayers ? "mostly faster layers"
                                                              : "unknown (a run has no per-layer times)";
    bars.push_back({{"label", label_of(k)}, {"batch", k.batch}, {"speedup", s.speedup}, {"backend", k.backend},
                    {"text", fmt::format("{:.2f}x", s.speedup)},
                    {"tooltip",
                     {{"cell", report::run_name(k)},
                      {"speedup", fmt::format("{:.2f}x", s.speedup)},
                      {"eager", si(e.median_seconds, "s")},
                      {k.mode, si(k.median_seconds, "s")},
                      {"eager unattributed", si(e.unattributed_seconds, "s")},
                      {k.mode + " unattributed", si(k.unattributed_seconds, "s")},
                      {"where the time went", source}}}});
  }
  const std::int64_t chosen = batches.empty() ? 0 : *batches.rbegin();
  c.expected = per_batch[chosen];
  std::size_t most = 1;
  for (const auto& [b, n] : per_batch) most = std::max(most, n);
  c.spec = base_spec(560, static_cast<double>(most) * 26);
  json& s = c.spec;
  s["signals"] = json::array({batch_selector(batches, chosen)});
  s["data"] = {{{"name", "bars"}, {"values", bars}},
               {{"name", "shown"},
                {"source", "bars"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.batch === batch"}}})}}};
  s["scales"] = {{{"name", "x"}, {"type", "log"}, {"domain", {lo / 1.6, hi * 1.6}}, {"range", "width"}, {"nice", false}},
                 {{"name", "y"}, {"type", "band"}, {"domain", {{"data", "shown"}, {"field", "label"}}},
                  {"range", "height"}, {"padding", 0.25}},
                 color_scale(results.runs)};
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"grid", true}, {"format", "~g"},
                {"title", "speedup: eager median / compiled median (log; right of 1 is faster)"}},
               {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 260}}};
  s["legends"] = json::array({{{"fill", "color"}, {"title", "framework"}}});
  s["marks"] = {{{"type", "rect"},
                 {"name", "speedup_bars"},
                 {"from", {{"data", "shown"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"value", 1}}},
                     {"x2", {{"scale", "x"}, {"field", "speedup"}}},
                     {"y", {{"scale", "y"}, {"field", "label"}}},
                     {"height", {{"scale", "y"}, {"band", 1}}},
                     {"fill", {{"scale", "color"}, {"field", "backend"}}},
                     {"tooltip", {{"field", "tooltip"}}}}}}}},
                {{"type", "text"},
                 {"from", {{"data", "shown"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"field", "speedup"}}},
                     {"dx", {{"signal", "datum.speedup >= 1 ? 4 : -4"}}},
                     {"align", {{"signal", "datum.speedup >= 1 ? 'left' : 'right'"}}},
                     {"y", {{"scale", "y"}, {"field", "label"}, {"band", 0.5}}},
                     {"baseline", {{"value", "middle"}}},
                     {"text", {{"field", "text"}}},
                     {"fontSize", {{"value", 10}}}}}}}},
                {{"type", "rule"},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"value", 1}}},
                     {"y", {{"value", 0}}},
                     {"y2", {{"signal", "height"}}},
                     {"stroke", {{"value", "#333"}}}}}}}}};
  return c;
}

Chart comparison_chart(const ResultsComparison& cmp) {
  Chart c{"chart-comparison", "change_points", 0, {}};
  json points = json::array();
  double lo = 0, hi = 0;
  for (const CellChange& x : cmp.cells) {
    if (x.change == Change::kNotComparable) continue;
    const double change = x.ratio - 1, low = x.ratio_ci95.low - 1, high = x.ratio_ci95.high - 1;
    lo = std::min({lo, low, change});
    hi = std::max({hi, high, change});
    points.push_back({{"label", cell_name(x.cell)}, {"change", change}, {"low", low}, {"high", high},
                      {"result", std::string(change_name(x.change))},
                      {"tooltip",
                       {{"cell", cell_name(x.cell)},
                        {"before", si(x.before.median_seconds, "s")},
                        {"after", si(x.after.median_seconds, "s")},
                        {"change", fmt::format("{:+.1f}%", change * 100)},
                        {"95% CI", fmt::format("{:+.1f}% .. {:+.1f}%", low * 100, high * 100)},
                        {"p", x.test ? fmt::format("{:.2g}", x.test->p_value) : std::string("not tested")},
                        {"result", std::string(change_name(x.change))}}}});
  }
  c.expected = points.size();
  c.spec = base_spec(560, std::max<double>(40, 24.0 * static_cast<double>(points.size())));
  json& s = c.spec;
  const double pad = std::max(0.02, (hi - lo) * 0.1);
  s["data"] = json::array({{{"name", "changes"}, {"values", points}}});
  s["scales"] = {{{"name", "x"}, {"type", "linear"}, {"domain", {lo - pad, hi + pad}}, {"range", "width"}, {"zero", true}},
                 {{"name", "y"}, {"type", "band"}, {"domain", {{"data", "changes"}, {"field", "label"}}},
                  {"range", "height"}, {"padding", 0.3}},
                 {{"name", "result"}, {"type", "ordinal"},
                  {"domain", {"faster", "slower", "no significant change", "not tested"}},
                  {"range", {"#2ca02c", "#d62728", "#888888", "#bcbd22"}}}};
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"grid", true}, {"format", "+.0%"},
                {"title", "change of the median (after / before - 1); whiskers: 95% interval"}},
               {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 280}}};
  s["legends"] = json::array({{{"fill", "result"}, {"title", "result"}}});
  const json y = {{"scale", "y"}, {"field", "label"}, {"band", 0.5}};
  s["marks"] = {{{"type", "rule"},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"value", 0}}},
                     {"y", {{"value", 0}}},
                     {"y2", {{"signal", "height"}}},
                     {"stroke", {{"value", "#333"}}}}}}}},
                {{"type", "rule"},
                 {"from", {{"data", "changes"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"field", "low"}}},
                     {"x2", {{"scale", "x"}, {"field", "high"}}},
                     {"y", y},
                     {"stroke", {{"scale", "result"}, {"field", "result"}}},
                     {"strokeWidth", {{"value", 2}}}}}}}},
                {{"type", "symbol"},
                 {"name", "change_points"},
                 {"from", {{"data", "changes"}}},
                 {"encode",
                  {{"update",
                    {{"x", {{"scale", "x"}, {"field", "change"}}},
                     {"y", y},
                     {"size", {{"value", 70}}},
                     {"fill", {{"scale", "result"}, {"field", "result"}}},
                     {"tooltip", {{"field", "tooltip"}}}}}}}}};
  return c;
}

// ---------------------------------------------------------------------------------------------
// HTML

const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:20px 28px 60px;background:#fff}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;margin:0 0 12px}.note{color:#555;font-size:12.5px;margin:4px 0}
ul.findings li{margin:4px 0}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}
th,td{padding:3px 8px;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600}td.name{min-width:6em;max-width:24em;overflow-wrap:anywhere}
.table{overflow-x:auto}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.mistrusted td{background:#fff4f2}tr.failed td{background:#f4f4f4;color:#666}
.flag{color:#d62728;font-weight:600;white-space:nowrap}.why{color:#8a3b2e;font-size:11.5px}
.chart{margin:6px 0 2px;overflow-x:auto}.vega-bindings{font-size:12.5px;margin:4px 0}
code{font-size:12.5px;background:#f3f3f3;padding:0 3px;border-radius:3px}
#nc-check{display:none}
)css";

// The page script: draws every chart and records what it drew (and any error) for the test.
const char* kPageScript = R"js(
(function () {
  var check = {ready: false, errors: [], charts: {}};
  function record(kind, args) {
    check.errors.push(kind + ': ' + Array.prototype.map.call(args, String).join(' '));
  }
  window.addEventListener('error', function (e) { record('error', [e.message]); });
  window.addEventListener('unhandledrejection', function (e) { record('rejection', [e.reason]); });
  ['error', 'warn'].forEach(function (level) {
    var original = console[level];
    console[level] = function () { record('console.' + level, arguments); original.apply(console, arguments); };
  });
  function finish() {
    check.ready = true;
    document.getElementById('nc-check').textContent = JSON.stringify(check);
    document.body.setAttribute('data-nc-ready', '1');
  }
  var data;
  try {
    data = JSON.parse(document.getElementById('nc-report-data').textContent);
  } catch (e) { record('error', ['report data: ' + e]); finish(); return; }
  var drawn = data.charts.map(function (chart) {
    var element = document.getElementById(chart.id);
    if (!element) { record('error', ['no element for chart ' + chart.id]); return Promise.resolve(); }
    var view = new vega.View(vega.parse(chart.spec), {renderer: 'svg', container: element, hover: true});
    view.logLevel(vega.Warn);
    return view.runAsync().then(function () {
      var marks = element.querySelectorAll('svg g.' + chart.mark + ' > path');
      var named = {};  // items drawn per named mark (Vega gives a mark's name as a class)
      element.querySelectorAll('svg g.role-mark').forEach(function (g) {
        var name = g.getAttribute('class').split(' ')[2];
        if (name) named[name] = g.querySelectorAll(':scope > path').length;
      });
      check.charts[chart.id] = {expected: chart.expected, drawn: marks.length, marks: named};
    });
  });
  Promise.all(drawn).catch(function (e) { record('error', [e && e.stack ? e.stack : e]); }).then(finish);
})();
)js";

std::string td(const std::string& text, bool number = false) {
  return fmt::format("<td{}>{}</td>", number ? " class=\"num\"" : "", html_text(text));
}

/// A cell holding a name (a model path, a layer): it may wrap anywhere, never widen the table much.
std::string name_td(const std::string& text) { return "<td class=\"name\">" + html_text(text) + "</td>"; }

std::string runs_table(const ResultsFile& results) {
  std::string out =
      "<div class=\"table\"><table><thead><tr><th>#</th><th>model</th><th>framework</th><th>mode</th><th>batch</th><th>device</th>"
      "<th>median</th><th>95% CI</th><th>CV</th><th>samples/s</th><th>FLOP/s</th><th>efficiency</th><th>limit</th>"
      "<th>verdict</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    out += fmt::format("<tr class=\"{}\">", r.verdict);
    out += td(std::to_string(i + 1), true) + name_td(r.model) + td(r.backend) + td(r.mode) + td(std::to_string(r.batch), true) +
           td(r.device);
    if (r.failed()) {
      out += "<td colspan=\"7\">-</td><td><span class=\"flag\">failed</span></td></tr>\n";
      continue;
    }
    out += td(si(r.median_seconds, "s"), true) +
           td(fmt::format("{} - {}", si(r.ci95_low_seconds, "s"), si(r.ci95_high_seconds, "s")), true) +
           td(report::percent(r.cv), true) + td(si(r.samples_per_second, ""), true) +
           td(si(r.achieved_flops_per_second, "FLOP/s"), true) + td(report::percent(r.efficiency), true) + td(r.bound);
    if (r.mistrusted()) {
      // the reasons on a row of their own, under the figures they qualify
      std::string why;
      for (const std::string& reason : r.reasons) why += (why.empty() ? "" : "; ") + reason;
      out += "<td><span class=\"flag\">&#9888; mistrusted</span></td></tr>\n<tr class=\"mistrusted\"><td></td>"
             "<td colspan=\"13\" class=\"why\">mistrusted: " + html_text(why) + "</td>";
    } else {
      out += td(r.verdict);
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

std::string failed_list(const ResultsFile& results) {
  std::string out;
  for (const ResultRun& r : results.runs) {
    if (!r.failed()) continue;
    out += "<li><b>" + html_text(report::run_name(r)) + "</b>: " + html_text(r.error) + "</li>\n";
  }
  return out.empty() ? "<p>None: every cell ran.</p>\n" : "<ul>\n" + out + "</ul>\n";
}

std::string cost_section(const ResultsFile& results, const CostReport& cost) {
  const std::string& cur = cost.currency;
  std::string out =
      "<p class=\"note\">cost = price per hour / 3600 &times; median / batch; the intervals are the 95% CI of the "
      "median, priced the same way; per token: samples &times; sequence length (rnn, lstm, transformer). "
      "&ldquo;Above bound&rdquo; is the time above the roofline lower bound, priced: what leaving the run as it is "
      "costs. " + html_text(kTrainingCostNote) + "</p>\n"
      "<table><thead><tr><th>run</th><th>price/h</th><th>per sample</th><th>per 1M samples</th><th>per 1M tokens</th>"
      "<th>above bound /1M samples</th><th>costliest layer above its bound /1M samples</th></tr></thead><tbody>\n";
  struct TopLayer {
    std::size_t run;
    LayerCost layer;
  };
  std::vector<TopLayer> top;
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    const std::optional<RunCost>& c = cost.runs[i];
    out += "<tr class=\"" + r.verdict + "\">" + name_td(report::run_name(r));
    if (!c) {
      out += fmt::format("<td colspan=\"6\">{}</td></tr>\n", r.failed() ? "failed" : "no price for this hardware");
      continue;
    }
    for (const LayerCost& l : c->layers) top.push_back({i, l});
    std::string layer = "-";
    if (!c->layers.empty()) {
      const ResultLayer& l = r.layers[c->layers.front().layer];
      layer = fmt::format("{} ({})", l.label(), report::money(c->layers.front().above_bound_per_million_samples, cur));
    }
    out += td(report::money(c->price_per_hour, cur), true) +
           td(fmt::format("{:.3g}{}", c->per_sample.value, r.mistrusted() ? " (mistrusted)" : ""), true) +
           td(report::money_interval(c->per_million_samples, cur), true) +
           td(c->per_million_tokens ? report::money_interval(*c->per_million_tokens, cur) : "-", true) +
           td(report::money(c->above_bound_per_million_samples, cur), true) + name_td(layer) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  std::stable_sort(top.begin(), top.end(), [](const TopLayer& a, const TopLayer& b) {
    return a.layer.above_bound_per_million_samples > b.layer.above_bound_per_million_samples;
  });
  if (top.size() > 10) top.resize(10);
  if (!top.empty()) {
    out += "<h3>The layers that cost most above their lower bound</h3>\n<table><thead><tr><th>layer</th><th>kind</th>"
           "<th>run</th><th>measured</th><th>lower bound</th><th>limit</th><th>above bound /1M samples</th></tr>"
           "</thead><tbody>\n";
    for (const TopLayer& t : top) {
      const ResultRun& r = results.runs[t.run];
      const ResultLayer& l = r.layers[t.layer.layer];
      out += "<tr>" + name_td(l.label()) + td(l.kind.empty() ? "-" : l.kind) +
             name_td(report::run_name(r)) + td(si(l.measured_seconds, "s"), true) + td(si(l.lower_bound_seconds, "s"), true) +
             td(l.bound.empty() ? "-" : l.bound) + td(report::money(t.layer.above_bound_per_million_samples, cur), true) +
             "</tr>\n";
    }
    out += "</tbody></table>\n";
  }
  for (const std::string& w : cost.warnings) out += "<p class=\"note\">warning: " + html_text(w) + "</p>\n";
  return out;
}

std::string comparison_table(const ResultsComparison& c) {
  std::string out =
      "<table><thead><tr><th>cell</th><th>before</th><th>after</th><th>change</th><th>95% CI</th><th>p</th>"
      "<th>result</th><th>notes</th></tr></thead><tbody>\n";
  for (const CellChange& x : c.cells) {
    const bool compared = x.change != Change::kNotComparable;
    std::string notes;
    for (const std::string& n : x.notes) notes += (notes.empty() ? "" : "; ") + n;
    out += "<tr>" + name_td(cell_name(x.cell)) + td(x.before.failed() ? "failed" : si(x.before.median_seconds, "s"), true) +
           td(x.after.failed() ? "failed" : si(x.after.median_seconds, "s"), true) +
           td(compared ? fmt::format("{:+.1f}%", (x.ratio - 1) * 100) : "-", true) +
           td(compared ? fmt::format("{:+.1f}% .. {:+.1f}%", (x.ratio_ci95.low - 1) * 100, (x.ratio_ci95.high - 1) * 100)
                       : "-",
              true) +
           td(x.test ? fmt::format("{:.2g}", x.test->p_value) : "-", true) + td(std::string(change_name(x.change))) +
           td(notes) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  for (const CellKey& k : c.only_before) out += "<p class=\"note\">only before: " + html_text(cell_name(k)) + "</p>\n";
  for (const CellKey& k : c.only_after) out += "<p class=\"note\">only after: " + html_text(cell_name(k)) + "</p>\n";
  for (const std::string& w : c.warnings) out += "<p class=\"note\">warning: " + html_text(w) + "</p>\n";
  return out;
}

std::string chart_section(const std::string& title, const Chart& chart, const std::string& note) {
  return "<h2>" + html_text(title) + "</h2>\n<div class=\"chart\" id=\"" + chart.id + "\"></div>\n" +
         (note.empty() ? "" : "<p class=\"note\">" + html_text(note) + "</p>\n");
}

}  // namespace

std::string render_report_html(const ReportInput& input, const std::string& vega_script) {
  const ResultsFile& results = *input.results;
  std::vector<std::string> roofline_notes;
  std::vector<Chart> charts;
  charts.push_back(roofline_chart(results, roofline_notes));
  charts.push_back(latency_chart(results));
  charts.push_back(heatmap_chart(results));
  charts.push_back(scaling_chart(results));
  const bool speedups = !input.findings.speedups.empty();
  if (speedups) charts.push_back(speedup_chart(results, input.findings));
  if (input.comparison) charts.push_back(comparison_chart(*input.comparison));

  std::string body;
  std::string hardware = "no readable hardware spec";
  if (!results.hardware.empty()) {
    hardware.clear();
    for (const HardwareSpec& h : results.hardware) hardware += (hardware.empty() ? "" : "; ") + h.name + " [" + h.id + "]";
  }
  body += "<h1>neural-cost report</h1>\n<p class=\"meta\">" + html_text(results.path) + " &middot; " +
          html_text(hardware) + " &middot; " + std::to_string(results.runs.size()) + " runs &middot; neural-cost " +
          html_text(std::string(kVersion)) + "</p>\n";
  body += "<h2>Findings</h2>\n<ul class=\"findings\">\n";
  for (const std::string& s : report::findings_sentences(input)) body += "<li>" + html_text(s) + "</li>\n";
  body += "</ul>\n";
  std::string note;
  for (const std::string& n : roofline_notes) note += (note.empty() ? "" : " ") + n;
  note += " Points: one per measured run (arithmetic intensity of its captured graph, achieved FLOP/s; red outline: "
          "mistrusted); triangles: the layers of the run chosen above (hover for layer, kind, FLOPs, bytes, intensity, "
          "time, efficiency, limit).";
  std::size_t k = 0;
  body += chart_section("Roofline", charts[k++], note);
  body += chart_section("Latency per model, framework and mode", charts[k++],
                        "Median time per forward pass with its 95% confidence interval; hollow red: mistrusted.");
  body += chart_section("Roofline efficiency", charts[k++],
                        "Lower bound / median per cell (red outline and '?': mistrusted; grey: failed).");
  body += chart_section("Batch scaling", charts[k++], "Throughput against batch size, log axes; hollow: mistrusted.");
  if (speedups) {
    body += chart_section("Compiled over eager", charts[k++],
                          "Eager median / compiled median per framework (hover: whether the time saved was dispatch "
                          "outside the layers or the layers themselves).");
  }
  if (input.cost) body += "<h2>Cost</h2>\n" + cost_section(results, *input.cost);
  if (input.comparison) {
    body += chart_section("Compared with " + input.comparison->before_path, charts[k++],
                          report::comparison_sentence(*input.comparison));
    body += comparison_table(*input.comparison);
  }
  body += "<h2>Runs</h2>\n" + runs_table(results);
  body += "<h2>Failed cells</h2>\n" + failed_list(results);
  if (!results.warnings.empty()) {
    body += "<h2>Lines skipped</h2>\n<ul>\n";
    for (const std::string& w : results.warnings) body += "<li>" + html_text(w) + "</li>\n";
    body += "</ul>\n";
  }

  // the charts, and the cost as `cost --format json` prints it (what the tests read back)
  json data{{"results", results.path}, {"charts", json::array()}};
  if (input.cost) data["cost"] = cost_json(results, *input.cost);
  for (const Chart& c : charts) {
    data["charts"].push_back({{"id", c.id}, {"mark", c.mark}, {"expected", c.expected}, {"spec", c.spec}});
  }
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>neural-cost report: " + html_text(results.path) + "</title>\n<style>" + kStyle +
                     "</style>\n<script>\n" + vega_script + "</script>\n</head>\n<body>\n<main>\n" + body +
                     "<pre id=\"nc-check\"></pre>\n</main>\n"
                     "<script type=\"application/json\" id=\"nc-report-data\">" + report::json_for_script(data) +
                     "</script>\n<script>" + kPageScript + "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace neuralcost
