// Table, Markdown, CSV and JSON views of the cost of runs (see report_views.hpp).
#include <fmt/format.h>

#include "neuralcost/report/report_views.hpp"
#include "neuralcost/version.hpp"
#include "report/findings_text.hpp"
#include "report/safe_text.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

json money_json(const Money& m) { return {{"value", m.value}, {"low", m.low}, {"high", m.high}}; }

Cell money_cell(const Money& m, const std::string& currency) {
  return {report::money_interval(m, currency), fmt::format("{}", m.value)};
}

}  // namespace

json cost_json(const ResultsFile& results, const CostReport& cost) {
  json j{{"schema_version", 1},           {"tool", {{"name", "neural-cost"}, {"version", std::string(kVersion)}}},
         {"results", results.path},       {"currency", cost.currency},
         {"training", kTrainingCostNote}, {"warnings", cost.warnings}};
  j["runs"] = json::array();
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    json run{{"model", r.model},
             {"backend", r.backend},
             {"mode", r.mode},
             {"batch", r.batch},
             {"workload", cell_of(r).training ? "train" : "forward"},
             {"device", r.device},
             {"hardware_id", r.hardware_id},
             {"verdict", r.verdict}};
    if (!r.failed()) {
      run["median_seconds"] = r.median_seconds;
      run["ci95_low_seconds"] = r.ci95_low_seconds;
      run["ci95_high_seconds"] = r.ci95_high_seconds;
    }
    const std::optional<RunCost>& c = i < cost.runs.size() ? cost.runs[i] : std::nullopt;
    if (!c) {
      run["cost"] = nullptr;
      j["runs"].push_back(run);
      continue;
    }
    json layers = json::array();
    for (const LayerCost& lc : c->layers) {
      const ResultLayer& l = r.layers[lc.layer];
      layers.push_back({{"event", l.event},
                        {"name", l.name},
                        {"module", l.module},
                        {"kind", l.kind},
                        {"waste_seconds", l.waste_seconds},
                        {"above_bound_per_million_samples", lc.above_bound_per_million_samples}});
    }
    run["cost"] = {{"price_per_hour", c->price_per_hour},
                   {"per_sample", money_json(c->per_sample)},
                   {"per_million_samples", money_json(c->per_million_samples)},
                   {"tokens_per_sample", c->tokens_per_sample},
                   {"per_million_tokens", c->per_million_tokens ? money_json(*c->per_million_tokens) : json(nullptr)},
                   {"above_bound_per_million_samples", c->above_bound_per_million_samples},
                   {"layers", layers}};
    j["runs"].push_back(run);
  }
  return j;
}

static std::string cost_view(const ResultsFile& results, const CostReport& cost, Format format) {
  if (format == Format::kJson) return report::json_text(cost_json(results, cost));
  report::Table t;
  t.headers = {"model",           "backend",         "mode",           "batch",
               "price/h",         "per sample",      "per 1M samples", "per 1M tokens",
               "above bound /1M", "costliest layer", "workload"};
  t.raw_headers = {"model",
                   "backend",
                   "mode",
                   "batch",
                   "price_per_hour",
                   "per_sample",
                   "per_million_samples",
                   "per_million_tokens",
                   "above_bound_per_million_samples",
                   "costliest_layer",
                   "workload"};
  t.right_align = {false, false, false, true, true, true, true, true, true, false, false};
  const std::string& cur = cost.currency;
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    std::vector<Cell> row = {{r.model, ""}, {r.backend, ""}, {r.mode, ""}, {std::to_string(r.batch), ""}};
    const Cell workload{cell_of(r).training ? "train" : "forward", ""};
    const std::optional<RunCost>& c = i < cost.runs.size() ? cost.runs[i] : std::nullopt;
    if (!c) {
      const std::string why = r.failed() ? "failed" : "no price";
      for (int k = 0; k < 6; ++k) row.push_back({k == 0 ? why : "-", ""});
      row.push_back(workload);
      t.rows.push_back(row);
      continue;
    }
    std::string layer = "-", layer_raw;
    if (!c->layers.empty()) {
      const ResultLayer& l = r.layers[c->layers.front().layer];
      layer = fmt::format("{} {}", l.label(), report::money(c->layers.front().above_bound_per_million_samples, cur));
      layer_raw = l.label();
    }
    row.push_back({report::money(c->price_per_hour, cur), fmt::format("{}", c->price_per_hour)});
    row.push_back({fmt::format("{:.3g}{}", c->per_sample.value, r.mistrusted() ? " (mistrusted)" : ""),
                   fmt::format("{}", c->per_sample.value)});
    row.push_back(money_cell(c->per_million_samples, cur));
    row.push_back(c->per_million_tokens ? money_cell(*c->per_million_tokens, cur) : Cell{"-", ""});
    row.push_back({report::money(c->above_bound_per_million_samples, cur),
                   fmt::format("{}", c->above_bound_per_million_samples)});
    row.push_back({layer, layer_raw});
    row.push_back(workload);
    t.rows.push_back(row);
  }
  std::string out = report::render_table(t, format);
  if (format == Format::kCsv) return out;
  out += fmt::format(
      "\ncost = price per hour / 3600 x median / batch; intervals from the 95% CI of the median; per "
      "token: samples x sequence length (rnn, lstm, transformer). {}\n",
      kTrainingCostNote);
  for (const std::string& w : cost.warnings) {
    out +=
        (format == Format::kMarkdown ? report::markdown_text("warning: " + w) : terminal_text("warning: " + w)) + "\n";
  }
  return out;
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_cost(const ResultsFile& results, const CostReport& cost, Format format) {
  return report::noting_invalid_utf8(format, [&] { return cost_view(results, cost, format); });
}

}  // namespace neuralcost
