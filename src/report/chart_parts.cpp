// Parts the HTML report's charts share (chart_parts.hpp).
#include "report/chart_parts.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "report/findings_text.hpp"
#include "report/si_format.hpp"

namespace neuralcost::report::chart_parts {

using nlohmann::json;

namespace {

const json kConfig = {
    {"font", "system-ui, -apple-system, 'Segoe UI', sans-serif"},
    {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}, {"gridColor", "#ececec"}, {"domainColor", "#888"}}},
    {"legend", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
    {"title", {{"fontSize", 13}}}};

const std::vector<std::string> kShapes = {"circle", "diamond", "triangle-up", "square", "cross", "triangle-down"};

}  // namespace

json base_spec(double width, double height) {
  return {{"$schema", "https://vega.github.io/schema/vega/v5.json"},
          {"width", width},
          {"height", height},
          {"padding", 8},
          {"config", kConfig}};
}

json select_signal(const std::string& name, const json& value, const json& options, const json& labels,
                   const std::string& label) {
  return {{"name", name},
          {"value", value},
          {"bind", {{"input", "select"}, {"options", options}, {"labels", labels}, {"name", label}}}};
}

std::string label_of(const ResultRun& r) { return fmt::format("{} · {} {}", r.model, r.backend, r.mode); }

std::vector<std::string> distinct(const std::vector<ResultRun>& runs, std::string ResultRun::*field,
                                  bool measured_only) {
  std::vector<std::string> out;
  for (const ResultRun& r : runs) {
    if (measured_only && r.failed()) continue;
    if (std::find(out.begin(), out.end(), r.*field) == out.end()) out.push_back(r.*field);
  }
  return out;
}

json color_scale(const std::vector<ResultRun>& runs) {
  return {{"name", "color"},
          {"type", "ordinal"},
          {"domain", distinct(runs, &ResultRun::backend, false)},
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

}  // namespace neuralcost::report::chart_parts
