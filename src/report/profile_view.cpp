// Table, Markdown, CSV and JSON views of profile runs (see profile_views.hpp).
#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/report/profile_views.hpp"
#include "neuralcost/version.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

Cell secs(double s) { return {report::si(s, "s"), fmt::format("{}", s)}; }
Cell text(std::string s) { return {std::move(s), ""}; }
Cell pct(double f) { return {report::percent(f), fmt::format("{}", f)}; }

std::string verdict_of(const ProfileRun& r) { return std::string(verdict_name(r.outcome.verdict)); }

/// "page faults 0.2 faults/iteration": a counter as a reader says it.
std::string counter_text(const Counter& c) {
  std::string name = c.name;
  std::replace(name.begin(), name.end(), '_', ' ');
  const std::string per = c.kind == Counter::Kind::kPerIteration ? "/iteration"
                          : c.kind == Counter::Kind::kRate       ? "/s"
                                                                 : "";
  return fmt::format("{} {:.3g}{}{}{}", name, c.value, c.unit.empty() ? "" : " ", c.unit, per);
}

json counter_json(const Counter& c) {
  return {{"name", c.name}, {"value", c.value}, {"unit", c.unit}, {"kind", counter_kind_name(c.kind)}};
}

std::string bound_of(const ProfileRun& r) { return std::string(bound_name(r.analysis.totals.bound)); }

std::string run_title(const ProfileRun& r) {
  const std::string device = r.device == "cpu" ? "" : " on " + r.device;
  return fmt::format("{}, {} {}{}, batch {}", terminal_text(r.model), r.backend, r.mode, device, r.batch);
}

/// One row of a layer table: a layer, a group, or the layers --top left out.
std::vector<Cell> layer_cells(const LayerRow& l, bool counted = true) {
  const bool work = l.has_work;
  const std::string count = counted && l.layers > 1 ? fmt::format(" ({})", l.layers) : "";
  return {text(l.name + count),
          text(l.kind),
          text(l.op),
          text(l.output_shape),
          l.modeled ? Cell{report::si(static_cast<double>(l.flops), ""), std::to_string(l.flops)} : text("?"),
          {report::si(static_cast<double>(l.bytes), "B"), std::to_string(l.bytes)},
          secs(l.lower_bound_seconds),
          secs(l.measured_seconds),
          pct(l.share),
          secs(l.waste_seconds),
          work && l.modeled && l.measured_seconds > 0 ? pct(l.efficiency) : text("-"),
          text(!l.modeled        ? "unmodeled"
               : l.bound && work ? std::string(bound_name(*l.bound))
                                 : "-")};
}

/// The per-layer table of a run (measure/layer_table.hpp shapes its rows): its layers, the
/// unattributed rest and the total (the timed median, whose efficiency is the run's). `keys`
/// adds the run's model, backend, mode and batch to each row (the CSV of layers across runs).
report::Table layer_table(const ProfileRun& r, const LayerTableOptions& options, bool keys) {
  report::Table t;
  t.headers = {"layer",       "kind",     "op",    "output", "FLOPs",      "bytes",
               "lower bound", "measured", "share", "waste",  "efficiency", "limit"};
  t.raw_headers = {"layer",
                   "kind",
                   "op",
                   "output_shape",
                   "flops",
                   "bytes",
                   "lower_bound_seconds",
                   "measured_seconds",
                   "share",
                   "waste_seconds",
                   "efficiency",
                   "bound"};
  t.right_align = {false, false, false, false, true, true, true, true, true, true, true, false};
  if (keys) {
    t.headers.insert(t.headers.begin(), {"model", "backend", "mode", "batch"});
    t.raw_headers.insert(t.raw_headers.begin(), {"model", "backend", "mode", "batch"});
    t.right_align.insert(t.right_align.begin(), {false, false, false, true});
  }
  auto row = [&](std::vector<Cell> cells) {
    if (keys)
      cells.insert(cells.begin(), {text(r.model), text(r.backend), text(r.mode), text(std::to_string(r.batch))});
    t.rows.push_back(std::move(cells));
  };
  const LayerTableRows rows = layer_rows(r, options);
  for (const LayerRow& l : rows.rows) row(layer_cells(l));
  if (rows.rest) row(layer_cells(*rows.rest, false));
  const double median = r.timing.summary.median;
  row({text("unattributed (dispatch, framework)"), text(""), text(""), text(""), text(""), text(""), text(""),
       secs(r.unattributed_seconds), pct(median > 0 ? r.unattributed_seconds / median : 0),
       secs(r.unattributed_seconds), text(""), text("")});
  const ModelTotals& tot = r.analysis.totals;
  row({text("total (timed median)"),
       text(""),
       text(""),
       text(""),
       {report::si(static_cast<double>(tot.flops), ""), std::to_string(tot.flops)},
       {report::si(static_cast<double>(tot.bytes_read + tot.bytes_written), "B"),
        std::to_string(tot.bytes_read + tot.bytes_written)},
       secs(tot.lower_bound_seconds),
       secs(median),
       pct(1.0),
       secs(std::max(0.0, median - tot.lower_bound_seconds)),
       pct(r.efficiency),
       text(bound_of(r))});
  return t;
}

std::string run_block(const ProfileRun& r, const HardwareSpec& hw, Format format, const LayerTableOptions& options) {
  std::string out =
      fmt::format("{}{} on {} [{}]\n", format == Format::kMarkdown ? "### " : "", run_title(r), hw.name, hw.id);
  if (r.outcome.failed()) return out + "error: " + report::valid_utf8(r.outcome.error()) + "\n\n";
  // a model file's inputs: what its numbers were measured on (token ids' range, dtypes)
  if (const auto in = r.contract.find("input_values"); in != r.contract.end()) out += "inputs: " + in->second + "\n";
  const SampleSummary& s = r.timing.summary;
  out += fmt::format("median {} (95% CI {} - {}, n {}, CV {}), p5 {}, p95 {}; verdict {}\n", report::si(s.median, "s"),
                     report::si(s.ci95_median.low, "s"), report::si(s.ci95_median.high, "s"), s.n,
                     report::percent(s.cv), report::si(s.p5, "s"), report::si(s.p95, "s"), verdict_of(r));
  for (const std::string& why : r.outcome.reasons) out += "  mistrusted: " + why + "\n";
  out += fmt::format(
      "{} samples/s, {}, roofline efficiency {} ({}-bound; fused bound: {}, 95% interval {} - {}{})\n",
      report::si(r.samples_per_second, ""), report::si(r.achieved_flops_per_second, "FLOP/s"),
      report::percent(r.efficiency), bound_of(r), report::percent(r.fused_efficiency),
      report::percent(r.fused_efficiency_interval.low), report::percent(r.fused_efficiency_interval.high),
      hw.roof_uncertainty > 0 ? fmt::format(", the roofs' own ±{} included", report::percent(hw.roof_uncertainty))
                              : "");
  if (!r.timing.counters.empty()) {
    std::string counters;
    for (const Counter& c : r.timing.counters) counters += (counters.empty() ? "" : ", ") + counter_text(c);
    out += "counters: " + counters + "\n";
  }
  if (!r.layers.empty()) {
    out += "\n" + report::render_table(layer_table(r, options, false), format);
    out += fmt::format(
        "per-layer times: medians of {} profiled passes, scaled by {:.3f} to the timed median (the "
        "profiler adds {} to a pass; its overhead is taken as proportional)\n",
        r.profiled_passes, r.layer_scale, report::percent(r.profiling_overhead));
  }
  for (const std::string& w : r.warnings) out += "warning: " + w + "\n";
  if (!r.analysis.complete()) {
    const std::vector<UnmodeledShare> shares = unmodeled_shares(r);
    double bytes = 0, time = 0;
    bool timed = false;
    for (const UnmodeledShare& u : shares) {
      bytes += u.byte_share;
      if (u.time_share) time += *u.time_share, timed = true;
    }
    out += fmt::format(
        "warning: {} op(s) not modeled ({} of bytes moved{}); their FLOPs are unknown, so FLOP totals, "
        "FLOP/s and efficiency are incomplete:\n",
        shares.size(), report::percent(bytes),
        timed ? ", " + report::percent(time) + " of the measured time" : std::string());
    for (const UnmodeledShare& u : shares) {
      out +=
          fmt::format("  {}{}: {}; {} of bytes{}\n", terminal_text(u.name),
                      u.module.empty() ? "" : " in " + terminal_text(u.module), terminal_text(u.reason),
                      report::percent(u.byte_share),
                      u.time_share ? ", " + report::percent(*u.time_share) + " of the measured time" : std::string());
    }
  }
  return out + "\n";
}

/// The names of the counters of `runs`, in order of first appearance.
std::vector<std::string> counter_names(const std::vector<ProfileRun>& runs) {
  std::vector<std::string> names;
  for (const ProfileRun& r : runs) {
    for (const Counter& c : r.timing.counters) {
      if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
    }
  }
  return names;
}

/// The summary table; `counters` adds a column per counter (CSV carries them, raw).
report::Table summary_table(const std::vector<ProfileRun>& runs, bool counters = false) {
  report::Table t;
  t.headers = {"model",     "backend", "mode",       "batch", "median", "95% CI",
               "samples/s", "FLOP/s",  "efficiency", "limit", "verdict"};
  t.raw_headers = {"model",
                   "backend",
                   "mode",
                   "batch",
                   "median_seconds",
                   "ci95_seconds",
                   "samples_per_second",
                   "flops_per_second",
                   "efficiency",
                   "bound",
                   "verdict"};
  t.right_align = {false, false, false, true, true, true, true, true, true, false, false};
  for (const ProfileRun& r : runs) {
    if (r.outcome.failed()) {
      t.rows.push_back({text(r.model), text(r.backend), text(r.mode), text(std::to_string(r.batch)), text("-"),
                        text("-"), text("-"), text("-"), text("-"), text("-"), text("failed")});
      continue;
    }
    const SampleSummary& s = r.timing.summary;
    t.rows.push_back(
        {text(r.model),
         text(r.backend),
         text(r.mode),
         text(std::to_string(r.batch)),
         secs(s.median),
         {fmt::format("{} - {}", report::si(s.ci95_median.low, "s"), report::si(s.ci95_median.high, "s")),
          fmt::format("{}:{}", s.ci95_median.low, s.ci95_median.high)},
         {report::si(r.samples_per_second, ""), fmt::format("{}", r.samples_per_second)},
         {report::si(r.achieved_flops_per_second, "FLOP/s"), fmt::format("{}", r.achieved_flops_per_second)},
         pct(r.efficiency),
         text(bound_of(r)),
         text(verdict_of(r))});
  }
  if (!counters) return t;
  const std::vector<std::string> names = counter_names(runs);
  for (const std::string& n : names) {
    t.headers.push_back(n);
    t.raw_headers.push_back(n);
    t.right_align.push_back(true);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const std::string& n : names) {
      const Counter* c = find_counter(runs[i].timing.counters, n);
      t.rows[i].push_back(c ? Cell{counter_text(*c), fmt::format("{}", c->value)} : text("-"));
    }
  }
  return t;
}

json timing_json(const TimingResult& t) {
  const SampleSummary& s = t.summary;
  return {{"median_seconds", s.median},
          {"mean_seconds", s.mean},
          {"stddev_seconds", s.stddev},
          {"cv", s.cv},
          {"min_seconds", s.min},
          {"max_seconds", s.max},
          {"p5_seconds", s.p5},
          {"p95_seconds", s.p95},
          {"ci95_low_seconds", s.ci95_median.low},
          {"ci95_high_seconds", s.ci95_median.high},
          {"samples", s.n},
          {"warmup_iterations", t.warmup_iterations},
          {"warmup_seconds", t.warmup_seconds},
          {"sampling_seconds", t.sampling_seconds},
          {"clock_resolution_seconds", t.clock_resolution_seconds},
          {"reached_target", t.reached_target},
          {"verdict", std::string(verdict_name(t.verdict))},
          {"reasons", t.reasons},
          // every sample in the order taken: what `compare` tests for a significant change
          {"samples_seconds", t.samples_seconds}};
}

}  // namespace

nlohmann::json profile_run_json(const ProfileRun& r) {
  json run{{"backend", r.backend},
           {"mode", r.mode},
           {"model", r.model},
           {"batch", r.batch},
           {"device", r.device},
           {"failed", r.outcome.failed()},
           {"outcome", {{"verdict", verdict_of(r)}, {"reasons", r.outcome.reasons}}}};
  if (r.outcome.failed()) {
    run["error"] = r.outcome.error();
    return run;
  }
  const json analysis = analysis_json(r.analysis);
  run["timing"] = timing_json(r.timing);
  run["timing"]["iqr_seconds"] = r.timing.summary.iqr;
  run["timing"]["mad_seconds"] = r.timing.summary.mad;
  if (!r.rounds.empty()) {
    // the unit of evidence: the median and interval above are the rounds' (docs/profiling.md, "Rounds")
    const RoundsEstimate& e = r.estimate;
    run["timing"]["estimate"] = {
        {"method", e.level_spread > 0 ? "median of the round medians; interval: order statistics of the round medians, "
                                        "widened by the machine's level over the study (batch means of its pace)"
                                      : "median of the round medians; interval: order statistics of the round medians"},
        {"rounds", e.rounds},
        {"preparations", r.preparations},
        {"coverage", e.interval.coverage},
        {"order_statistic", e.interval.k},
        {"relative_half_width", e.relative_half_width},
        {"within_round_spread", e.within_round_spread},
        {"between_round_spread", e.between_round_spread},
        {"expected_between_spread", e.expected_between_spread},
        {"dominant_spread", e.dominant},
        {"machine_canary_seconds", e.machine_seconds},
        {"machine_spread", e.machine_spread},
        {"rounds_ci95_low_seconds", e.rounds_interval.low},
        {"rounds_ci95_high_seconds", e.rounds_interval.high},
        {"level_spread", e.level_spread},
        {"level_ticks", e.level_ticks}};
    json rounds = json::array();
    for (const Round& x : r.rounds) {
      rounds.push_back({{"process", x.process},
                        {"sweep", x.sweep},
                        {"pass", x.pass},
                        {"start_seconds", x.start_seconds},
                        {"median_seconds", x.summary.median},
                        {"samples", x.summary.n},
                        {"cv", x.summary.cv},
                        {"iqr_seconds", x.summary.iqr},
                        {"machine_canary_seconds", x.machine_seconds},
                        {"cpu_canary_seconds", x.cpu_canary_seconds},
                        {"reasons", x.reasons}});
    }
    run["timing"]["rounds"] = std::move(rounds);
  }
  run["counters"] = json::array();
  for (const Counter& c : r.timing.counters) run["counters"].push_back(counter_json(c));
  run["totals"] = analysis["totals"];
  run["efficiency"] = r.efficiency;
  run["fused_efficiency"] = r.fused_efficiency;
  run["efficiency_interval"] = {{"low", r.efficiency_interval.low}, {"high", r.efficiency_interval.high}};
  run["fused_efficiency_interval"] = {{"low", r.fused_efficiency_interval.low},
                                      {"high", r.fused_efficiency_interval.high}};
  run["roof_uncertainty"] = r.analysis.hardware.roof_uncertainty;
  run["bound"] = bound_of(r);
  run["samples_per_second"] = r.samples_per_second;
  run["achieved_flops_per_second"] = r.achieved_flops_per_second;
  run["ops"] = analysis["ops"];
  for (const LayerMeasurement& l : r.layers) {
    // a framework op that became one record carries its measured time on that record
    if (l.records.size() == 1) run["ops"][l.records[0]]["measured_seconds"] = l.measured_seconds;
  }
  run["unmodeled"] = analysis["unmodeled"];
  run["approximations"] = analysis["approximations"];
  run["layers"] = json::array();
  for (const LayerMeasurement& l : r.layers) {
    json records = json::array();
    for (std::size_t i : l.records) records.push_back(r.analysis.graph.op(i).name);
    run["layers"].push_back({{"event", l.event},
                             {"name", l.name},
                             {"module", l.module},
                             {"kind", l.kind},
                             {"output_shape", l.output_shape},
                             {"ops", records},
                             {"flops", l.flops},
                             {"bytes", l.bytes},
                             {"lower_bound_seconds", l.lower_bound_seconds},
                             {"profiled_seconds", l.profiled_seconds},
                             {"measured_seconds", l.measured_seconds},
                             {"share", l.share},
                             {"waste_seconds", l.waste_seconds},
                             {"efficiency", l.efficiency},
                             {"bound", l.bound ? json(std::string(bound_name(*l.bound))) : json(nullptr)},
                             {"modeled", l.modeled}});
    if (!l.pass.empty()) run["layers"].back()["pass"] = l.pass;
  }
  run["profiled_passes"] = r.profiled_passes;
  run["profiled_pass_seconds"] = r.profiled_pass_seconds;
  run["unattributed_seconds"] = r.unattributed_seconds;
  run["layer_scale"] = r.layer_scale;
  run["profiling_overhead"] = r.profiling_overhead;
  run["contract"] = r.contract;
  run["warnings"] = r.warnings;
  return run;
}

nlohmann::json profile_json(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware) {
  json j{{"schema_version", 1}, {"tool", {{"name", "neural-cost"}, {"version", std::string(kVersion)}}}};
  j["hardware"] = hardware_json(hardware);
  j["runs"] = json::array();
  for (const ProfileRun& r : runs) j["runs"].push_back(profile_run_json(r));
  if (has_comparison(runs)) j["comparison"] = comparison_json(runs);
  return j;
}

static std::string profile_summary_view(const std::vector<ProfileRun>& runs, Format format) {
  std::string out = report::render_table(summary_table(runs, format == Format::kCsv), format);
  if (has_comparison(runs) && format != Format::kCsv) out += "\n" + render_comparison(runs, format);
  return out;
}

static std::string profile_view(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware, Format format,
                                const LayerTableOptions& options) {
  if (format == Format::kJson) return report::json_text(profile_json(runs, hardware));
  if (format == Format::kCsv) {
    // one table: the layers of every run that has them, else the runs
    bool layers = false;
    for (const ProfileRun& r : runs) layers = layers || !r.layers.empty();
    if (!layers) return report::render_table(summary_table(runs, true), format);
    report::Table all;
    for (const ProfileRun& r : runs) {
      if (r.layers.empty()) continue;
      report::Table t = layer_table(r, options, true);
      if (all.headers.empty())
        all = t;
      else
        all.rows.insert(all.rows.end(), t.rows.begin(), t.rows.end());
    }
    return report::render_table(all, format);
  }
  std::string out;
  for (const ProfileRun& r : runs) out += run_block(r, hardware, format, options);
  out += format == Format::kMarkdown ? "### summary\n\n" : "summary\n";
  return out + render_profile_summary(runs, format);
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_profile_summary(const std::vector<ProfileRun>& runs, Format format) {
  return report::noting_invalid_utf8(format, [&] { return profile_summary_view(runs, format); });
}

std::string render_profile(const std::vector<ProfileRun>& runs, const HardwareSpec& hardware, Format format,
                           const LayerTableOptions& options) {
  return report::noting_invalid_utf8(format, [&] { return profile_view(runs, hardware, format, options); });
}

}  // namespace neuralcost
