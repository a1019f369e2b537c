// The HTML report's charts (report/html_charts.hpp): Vega 5 specs with their data inline, every
// value from a results file passed as JSON data, never as markup.
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

// Chart specs (Vega 5). Every chart names the mark whose items are its data points, and says how
// many it should draw with the defaults: the page's check compares that with what was drawn.
using nlohmann::json;
using namespace chart_parts;  // NOLINT(google-build-using-namespace): the charts' shared parts

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
    rows.push_back({{"label", label_of(r)},
                    {"batch", r.batch},
                    {"median", r.median_seconds},
                    {"low", low},
                    {"high", std::max(r.ci95_high_seconds, r.median_seconds)},
                    {"backend", r.backend},
                    {"mode", r.mode},
                    {"verdict", r.verdict},
                    {"tooltip", run_tooltip(r)}});
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
  s["scales"] = {
      {{"name", "x"}, {"type", "log"}, {"domain", {lo / 1.5, hi * 1.5}}, {"range", "width"}, {"nice", false}},
      {{"name", "y"},
       {"type", "band"},
       {"domain", {{"data", "shown"}, {"field", "label"}}},
       {"range", "height"},
       {"padding", 0.3}},
      color_scale(runs),
      shape_scale(runs)};
  // the log axis's own labels (it leaves some ticks unlabelled), in seconds
  s["axes"] = {
      {{"orient", "bottom"},
       {"scale", "x"},
       {"grid", true},
       {"format", "~s"},
       {"labelOverlap", true},
       {"encode", {{"labels", {{"update", {{"text", {{"signal", "datum.label ? datum.label + 's' : ''"}}}}}}}}},
       {"title", "median time per pass; whiskers: 95% CI of the median"}},
      {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 260}}};
  s["legends"] = {{{"fill", "color"}, {"title", "framework"}, {"symbolType", "circle"}},
                  {{"shape", "shape"}, {"title", "mode"}}};
  const json y = {{"scale", "y"}, {"field", "label"}, {"band", 0.5}};
  s["marks"] = {
      {{"type", "rule"},
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
    json tooltip =
        r.failed() ? json{{"run", report::run_name(r)}, {"verdict", "failed"}, {"error", r.error}} : run_tooltip(r);
    cells.push_back({{"model", r.model},
                     {"config", config},
                     {"batch", r.batch},
                     {"efficiency", r.efficiency},
                     {"verdict", r.verdict},
                     {"text", text},
                     {"tooltip", tooltip}});
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
  s["scales"] = {{{"name", "x"},
                  {"type", "band"},
                  {"domain", {{"data", "shown"}, {"field", "config"}}},
                  {"range", "width"},
                  {"padding", 0.04}},
                 {{"name", "y"},
                  {"type", "band"},
                  {"domain", {{"data", "shown"}, {"field", "model"}}},
                  {"range", "height"},
                  {"padding", 0.04}},
                 {{"name", "heat"},
                  {"type", "linear"},
                  {"domain", {0, top > 0 ? top : 1}},
                  {"range", {{"scheme", "blues"}}},
                  {"zero", true}}};
  s["axes"] = {{{"orient", "top"}, {"scale", "x"}, {"labelLimit", 150}}, {{"orient", "left"}, {"scale", "y"}}};
  s["legends"] =
      json::array({{{"fill", "heat"}, {"title", "roofline efficiency"}, {"format", ".1%"}, {"type", "gradient"}}});
  s["marks"] = {{{"type", "rect"},
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
                     {"fill",
                      {{"signal", std::string("datum.verdict !== 'failed' && datum.efficiency > ") +
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
    points.push_back({{"model", r.model},
                      {"config", report::config_name(r)},
                      {"backend", r.backend},
                      {"mode", r.mode},
                      {"batch", r.batch},
                      {"sps", r.samples_per_second},
                      {"verdict", r.verdict},
                      {"tooltip", run_tooltip(r)}});
    if (r.model == (models.empty() ? "" : models.front())) ++c.expected;
  }
  if (points.empty()) blo = 1, bhi = 2;
  json& s = c.spec;
  s["signals"] =
      json::array({select_signal("model", models.empty() ? json("") : json(models.front()), models, models, "model ")});
  s["data"] = {{{"name", "points"}, {"values", points}},
               {{"name", "shown"},
                {"source", "points"},
                {"transform", json::array({{{"type", "filter"}, {"expr", "datum.model === model"}}})}}};
  s["scales"] = {{{"name", "x"},
                  {"type", "log"},
                  {"base", 2},
                  {"domain", {static_cast<double>(blo) / 1.3, static_cast<double>(bhi) * 1.3}},
                  {"range", "width"},
                  {"nice", false}},
                 {{"name", "y"},
                  {"type", "log"},
                  {"domain", {{"data", "shown"}, {"field", "sps"}}},
                  {"range", "height"},
                  {"nice", true},
                  {"zero", false}},
                 {{"name", "color"},
                  {"type", "ordinal"},
                  {"domain", {{"data", "points"}, {"field", "config"}, {"sort", true}}},
                  {"range", {{"scheme", "tableau10"}}}}};
  s["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"title", "batch"}, {"grid", true}, {"format", "~g"}},
               {{"orient", "left"}, {"scale", "y"}, {"title", "samples/s"}, {"grid", true}, {"format", "~s"}}};
  s["legends"] = json::array({{{"stroke", "color"}, {"title", "framework, mode"}, {"symbolType", "stroke"}}});
  s["marks"] = {{{"type", "group"},
                 {"from", {{"facet", {{"name", "series"}, {"data", "shown"}, {"groupby", "config"}}}}},
                 {"marks", json::array({{{"type", "line"},
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
    bars.push_back({{"label", label_of(k)},
                    {"batch", k.batch},
                    {"speedup", s.speedup},
                    {"backend", k.backend},
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
  s["scales"] = {
      {{"name", "x"}, {"type", "log"}, {"domain", {lo / 1.6, hi * 1.6}}, {"range", "width"}, {"nice", false}},
      {{"name", "y"},
       {"type", "band"},
       {"domain", {{"data", "shown"}, {"field", "label"}}},
       {"range", "height"},
       {"padding", 0.25}},
      color_scale(results.runs)};
  s["axes"] = {{{"orient", "bottom"},
                {"scale", "x"},
                {"grid", true},
                {"format", "~g"},
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
    points.push_back({{"label", cell_name(x.cell)},
                      {"change", change},
                      {"low", low},
                      {"high", high},
                      {"result", std::string(change_name(x.change))},
                      {"tooltip",
                       {{"cell", cell_name(x.cell)},
                        {"before", si(x.before.median_seconds, "s")},
                        {"after", si(x.after.median_seconds, "s")},
                        {"change", fmt::format("{:+.1f}%", change * 100)},
                        {"95% CI", fmt::format("{:+.1f}% .. {:+.1f}%", low * 100, high * 100)},
                        {"p", x.test ? fmt::format("{:.2g}", x.p_value()) : std::string("not tested")},
                        {"result", std::string(change_name(x.change))}}}});
  }
  c.expected = points.size();
  c.spec = base_spec(560, std::max<double>(40, 24.0 * static_cast<double>(points.size())));
  json& s = c.spec;
  const double pad = std::max(0.02, (hi - lo) * 0.1);
  s["data"] = json::array({{{"name", "changes"}, {"values", points}}});
  s["scales"] = {
      {{"name", "x"}, {"type", "linear"}, {"domain", {lo - pad, hi + pad}}, {"range", "width"}, {"zero", true}},
      {{"name", "y"},
       {"type", "band"},
       {"domain", {{"data", "changes"}, {"field", "label"}}},
       {"range", "height"},
       {"padding", 0.3}},
      {{"name", "result"},
       {"type", "ordinal"},
       {"domain", {"faster", "slower", "no significant change", "not tested"}},
       {"range", {"#2ca02c", "#d62728", "#888888", "#bcbd22"}}}};
  s["axes"] = {{{"orient", "bottom"},
                {"scale", "x"},
                {"grid", true},
                {"format", "+.0%"},
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

}  // namespace neuralcost::report
