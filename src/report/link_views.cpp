// Views of interconnects, systems and collective calibrations (include/neuralcost/report/link_views.hpp).
#include "neuralcost/report/link_views.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/statistics.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

constexpr double kHeldBackTarget = 0.10;

Cell number(double value, const std::string& unit) { return {report::si(value, unit), fmt::format("{}", value)}; }

Cell percent(double share) { return {fmt::format("{:.1f} %", 100 * share), fmt::format("{}", share)}; }

std::string segments_text(const MeasuredCollective& m) {
  std::string out;
  for (const auto& s : m.segments) {
    out += fmt::format("{}{}-{}: α {}, busbw {}", out.empty() ? "" : "; ", report::si(s.min_bytes, "B"),
                       report::si(s.max_bytes, "B"), report::si(s.latency_seconds, "s"),
                       report::si(s.bus_bytes_per_second, "B/s"));
  }
  return out;
}

json point_json(const CollectivePoint& p) {
  return {{"collective", collective_name(p.collective)},
          {"ranks", p.ranks},
          {"bytes", p.bytes},
          {"calls", p.calls},
          {"seconds", p.seconds},
          {"median_seconds", p.median_seconds},
          {"held_back", p.held_back},
          {"predicted_seconds", p.predicted_seconds}};
}

}  // namespace

std::string render_interconnects(const std::vector<InterconnectSpec>& specs, Format format) {
  if (format == Format::kJson) {
    json j = json::array();
    for (const auto& s : specs) j.push_back(json::parse(interconnect_spec_json(s)));
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"id", "kind", "scope", "line rate", "bus BW", "of line", "step latency", "in-network BW", "name"};
  t.raw_headers = {"id",
                   "kind",
                   "scope",
                   "line_rate_bytes_per_second",
                   "bus_bandwidth_bytes_per_second",
                   "bus_share_of_line_rate",
                   "latency_seconds",
                   "in_network_bus_bandwidth_bytes_per_second",
                   "name"};
  t.right_align = {false, false, false, true, true, true, true, true, false};
  for (const auto& s : specs) {
    const Cell none{"-", ""};
    t.rows.push_back(
        {{s.id, ""},
         {s.kind, ""},
         {s.scope, ""},
         s.line_rate_bytes_per_second ? number(*s.line_rate_bytes_per_second, "B/s") : none,
         number(s.bus_bandwidth_bytes_per_second, "B/s"),
         s.line_rate_bytes_per_second ? percent(s.bus_bandwidth_bytes_per_second / *s.line_rate_bytes_per_second)
                                      : none,
         number(s.latency_seconds, "s"),
         s.in_network_bus_bandwidth_bytes_per_second ? number(*s.in_network_bus_bandwidth_bytes_per_second, "B/s")
                                                     : Cell{s.in_network_reduction ? "yes, not published" : "-", ""},
         {s.name, ""}});
  }
  std::string out = report::render_table(t, format);
  if (format == Format::kTable) {
    out +=
        "\nBandwidths are per device (or NIC port), one direction; bus BW is what NCCL's ring all-reduce reaches\n"
        "(nccl-tests' busbw). `neural-cost hardware calibrate --collectives` measures this machine's.\n";
  }
  return out;
}

std::string render_systems(const std::vector<SystemSpec>& systems, Format format) {
  if (format == Format::kJson) {
    json j = json::array();
    for (const auto& s : systems) {
      j.push_back({{"id", s.id},
                   {"name", s.name},
                   {"device", s.device},
                   {"devices_per_node", s.devices_per_node},
                   {"intra_node", s.intra_node},
                   {"inter_node", s.inter_node},
                   {"nics_per_node", s.nics_per_node},
                   {"sources", s.sources},
                   {"notes", s.notes}});
    }
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"id", "device", "per node", "in the node", "between nodes", "NICs", "name"};
  t.raw_headers = {"id", "device", "devices_per_node", "intra_node", "inter_node", "nics_per_node", "name"};
  t.right_align = {false, false, true, false, false, true, false};
  for (const auto& s : systems) {
    t.rows.push_back({{s.id, ""},
                      {s.device, ""},
                      {std::to_string(s.devices_per_node), ""},
                      {s.intra_node, ""},
                      {s.inter_node, ""},
                      {std::to_string(s.nics_per_node), ""},
                      {s.name, ""}});
  }
  return report::render_table(t, format);
}

std::string render_collective_calibration(const CollectiveCalibration& c, Format format) {
  if (format == Format::kJson) {
    json points = json::array();
    for (const auto& p : c.points) points.push_back(point_json(p));
    return report::json_text({{"torch", c.torch_version},
                              {"cpu", c.cpu},
                              {"wall_seconds", c.wall_seconds},
                              {"points", points},
                              {"interconnect", json::parse(interconnect_spec_json(c.link))},
                              {"notes", c.notes}});
  }
  report::Table t;
  t.headers = {"collective", "ranks", "sizes", "held back", "median error", "worst error", "within 10 %", "fit"};
  t.raw_headers = {"collective",   "ranks",     "sizes",         "held_back",
                   "median_error", "max_error", "within_target", "segments"};
  t.right_align = {false, true, true, true, true, true, false, false};
  for (const auto& m : c.link.measured) {
    std::vector<double> errors;
    int sizes = 0;
    for (const auto& p : c.points) {
      if (p.collective != m.collective || p.ranks != m.ranks) continue;
      ++sizes;
      if (p.held_back) errors.push_back(std::abs(p.predicted_seconds / p.median_seconds - 1));
    }
    const double worst = errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end());
    t.rows.push_back({{std::string(collective_name(m.collective)), ""},
                      {std::to_string(m.ranks), ""},
                      {std::to_string(sizes), ""},
                      {std::to_string(errors.size()), ""},
                      errors.empty() ? Cell{"-", ""} : percent(median(errors)),
                      errors.empty() ? Cell{"-", ""} : percent(worst),
                      {worst <= kHeldBackTarget ? "yes" : "no", worst <= kHeldBackTarget ? "true" : "false"},
                      {segments_text(m), ""}});
  }
  std::string out = report::render_table(t, format);
  if (format == Format::kTable) {
    out += fmt::format("\n{}: bus bandwidth {}, step latency {} (torch {}, {:.0f} s)\n", c.link.id,
                       report::si(c.link.bus_bandwidth_bytes_per_second, "B/s"),
                       report::si(c.link.latency_seconds, "s"), c.torch_version, c.wall_seconds);
    out +=
        "Each size's time is the median of its rounds (a call's time is its slowest rank's); the fit uses every\n"
        "other size and the error is on the sizes between. Segment: t = α + factor × S / busbw.\n";
    for (const auto& n : c.notes) out += "note: " + n + "\n";
    for (const auto& n : c.link.notes) out += "note: " + n + "\n";
  }
  return out;
}

namespace {

json figure_json(const RoundFigure& f) {
  return json{{"median", f.median}, {"ci95", {f.ci95.low, f.ci95.high}}, {"rounds", f.rounds}};
}

std::string link_name(const InterconnectSpec& link) {
  return link.origin.empty() || link.origin == "built-in" ? link.id : link.origin;
}

std::string interval_text(const RoundFigure& f) {
  return fmt::format("{} [{}, {}]", report::seconds(f.median), report::seconds(f.ci95.low),
                     report::seconds(f.ci95.high));
}

/// A table of measured figures beside their predictions (header and columns).
report::Table measured_table(double within) {
  report::Table t;
  t.headers = {"", "measured (median of rounds, 95% interval)", "predicted", "error",
               fmt::format("within {:g}%", within * 100)};
  t.raw_headers = {"quantity", "measured_seconds", "predicted_seconds", "error", "within"};
  t.right_align = {false, true, true, true, false};
  return t;
}

/// A measured figure and its prediction with the error; `verdict`: whether it is within `within`.
std::vector<Cell> predicted_row(const std::string& name, const std::string& raw, const RoundFigure& measured,
                                double predicted, double within, bool verdict) {
  const double error = measured.median > 0 ? predicted / measured.median - 1 : 0;
  return {{name, raw},
          {interval_text(measured), fmt::format("{}", measured.median)},
          {report::seconds(predicted), fmt::format("{}", predicted)},
          {fmt::format("{:+.1f}%", 100 * error), fmt::format("{}", error)},
          {verdict ? (std::abs(error) <= within ? "yes" : "no") : "", ""}};
}

/// A measured figure the prediction takes as given (`what`: "(measured)", "(not modeled)").
std::vector<Cell> measured_row(const std::string& name, const std::string& raw, const RoundFigure& measured,
                               const char* what) {
  return {{name, raw}, {interval_text(measured), fmt::format("{}", measured.median)}, {what, ""}, {"", ""}, {"", ""}};
}

/// A measured parallel step beside its prediction: step and link with their errors, the step
/// without communication and the ranks' skew as measured.
report::Table step_table(const RoundFigure& step, const RoundFigure& link, const RoundFigure& compute,
                         const RoundFigure& wait, double predicted_step, double predicted_link, double within) {
  report::Table t = measured_table(within);
  t.rows.push_back(predicted_row("step", "step", step, predicted_step, within, true));
  t.rows.push_back(predicted_row("communication (link)", "link", link, predicted_link, within, true));
  t.rows.push_back(measured_row("step without communication", "compute", compute, "(measured)"));
  t.rows.push_back(measured_row("ranks' skew before collectives", "wait", wait, "(not modeled)"));
  return t;
}

}  // namespace

std::string render_data_parallel_check(const DataParallelCheck& c, double within, Format format) {
  const DataParallelCheckRequest& r = c.request;
  const char* mode = r.stage == ZeroStage::kParameters ? "fsdp" : "ddp";
  const bool step_ok = std::abs(c.step_error()) <= within, link_ok = std::abs(c.link_error()) <= within;
  if (format == Format::kJson) {
    return report::json_text(json{{"model", r.model},
                                  {"batch_per_rank", r.batch},
                                  {"ranks", r.ranks},
                                  {"mode", mode},
                                  {"link", link_name(r.link)},
                                  {"torch", c.torch_version},
                                  {"parameters", c.parameters},
                                  {"rounds", r.rounds},
                                  {"steps_per_round", r.steps},
                                  {"step_seconds", figure_json(c.step)},
                                  {"compute_seconds", figure_json(c.compute)},
                                  {"link_seconds", figure_json(c.link)},
                                  {"wait_seconds", figure_json(c.wait)},
                                  {"collectives_per_step", c.collectives_per_step},
                                  {"collectives", c.collectives},
                                  {"ddp_bucket_bytes", c.measured_buckets},
                                  {"fsdp_unit_parameters", c.units},
                                  {"predicted_calls", c.predicted_calls},
                                  {"predicted_link_seconds", c.predicted_link_seconds},
                                  {"predicted_exposed_seconds", c.predicted_exposed_seconds},
                                  {"predicted_step_seconds", c.predicted_step_seconds},
                                  {"step_error", c.step_error()},
                                  {"link_error", c.link_error()},
                                  {"within", within},
                                  {"step_within", step_ok},
                                  {"link_within", link_ok},
                                  {"notes", c.notes}});
  }
  const report::Table t =
      step_table(c.step, c.link, c.compute, c.wait, c.predicted_step_seconds, c.predicted_link_seconds, within);
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format(
      "{}: {} over {} local processes (gloo, torch {}), batch {} a rank, {} parameters; {} rounds of {} steps with "
      "and {} without communication, interleaved\n",
      r.model, mode, r.ranks, c.torch_version, r.batch, c.parameters, r.rounds, r.steps, r.steps);
  out += fmt::format("link: {}; measured {} collectives a step ({}), predicted {}\n", link_name(r.link),
                     c.collectives_per_step, fmt::join(c.collectives, ", "), c.predicted_calls);
  out += report::render_table(t, format);
  out += fmt::format("predicted exposed communication: {}\n", report::seconds(c.predicted_exposed_seconds));
  for (const std::string& n : c.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_tensor_parallel_check(const TensorParallelCheck& c, double within, Format format) {
  const TensorParallelCheckRequest& r = c.request;
  const bool step_ok = std::abs(c.step_error()) <= within, link_ok = std::abs(c.link_error()) <= within;
  const bool calls_ok = c.collectives_per_step == c.predicted_calls;
  if (format == Format::kJson) {
    return report::json_text(json{{"model", r.model.empty() ? r.config.source : r.model},
                                  {"ranks", r.ranks},
                                  {"sequence_parallel", r.sequence_parallel},
                                  {"batch", r.batch},
                                  {"tokens", r.tokens},
                                  {"link", link_name(r.link)},
                                  {"torch", c.torch_version},
                                  {"parameters_per_rank", c.parameters},
                                  {"predicted_parameters_per_rank", c.predicted_parameters},
                                  {"rounds", r.rounds},
                                  {"steps_per_round", r.steps},
                                  {"step_seconds", figure_json(c.step)},
                                  {"compute_seconds", figure_json(c.compute)},
                                  {"link_seconds", figure_json(c.link)},
                                  {"wait_seconds", figure_json(c.wait)},
                                  {"collectives_per_step", c.collectives_per_step},
                                  {"call_bytes", c.call_bytes},
                                  {"collectives", c.collectives},
                                  {"predicted_calls", c.predicted_calls},
                                  {"predicted_link_seconds", c.predicted_link_seconds},
                                  {"predicted_step_seconds", c.predicted_step_seconds},
                                  {"step_error", c.step_error()},
                                  {"link_error", c.link_error()},
                                  {"within", within},
                                  {"calls_equal", calls_ok},
                                  {"step_within", step_ok},
                                  {"link_within", link_ok},
                                  {"notes", c.notes}});
  }
  const report::Table t =
      step_table(c.step, c.link, c.compute, c.wait, c.predicted_step_seconds, c.predicted_link_seconds, within);
  if (format == Format::kCsv) return report::render_table(t, format);
  std::vector<std::string> sizes;
  for (double b : c.call_bytes) sizes.push_back(report::si(b, "B"));
  std::string out = fmt::format(
      "{}: tensor parallel over {} local processes (gloo, torch {}), Megatron's split{}, fp32; batch {} × {} tokens, "
      "{} parameters a rank ({} by the shard's graph); {} rounds of {} steps with and {} without communication, "
      "interleaved\n",
      r.model.empty() ? r.config.source : r.model, r.ranks, c.torch_version,
      r.sequence_parallel ? " with sequence parallelism" : "", r.batch, r.tokens, c.parameters, c.predicted_parameters,
      r.rounds, r.steps, r.steps);
  out += fmt::format("link: {}; measured {} collectives a step ({}; of {}), predicted {}{}\n", link_name(r.link),
                     c.collectives_per_step, fmt::join(c.collectives, ", "), fmt::join(sizes, ", "), c.predicted_calls,
                     calls_ok ? "" : " (they differ)");
  out += report::render_table(t, format);
  for (const std::string& n : c.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_pipeline_parallel_check(const PipelineParallelCheck& c, double within, Format format) {
  const PipelineParallelCheckRequest& r = c.request;
  const bool step_ok = std::abs(c.step_error()) <= within;
  if (format == Format::kJson) {
    json stages = json::array();
    for (std::size_t d = 0; d < c.stage_passes.size(); ++d) {
      stages.push_back({{"stage", d},
                        {"parameters", d < c.parameters.size() ? c.parameters[d] : 0},
                        {"predicted_parameters", d < c.predicted_parameters.size() ? c.predicted_parameters[d] : 0},
                        {"passes_seconds", figure_json(c.stage_passes[d])},
                        {"optimizer_seconds", figure_json(c.stage_optimizer[d])}});
    }
    return report::json_text(json{{"model", r.model.empty() ? r.config.source : r.model},
                                  {"stages", r.ranks},
                                  {"batch", r.batch},
                                  {"tokens", r.tokens},
                                  {"micro_batches", r.micro_batches},
                                  {"link", link_name(r.link)},
                                  {"torch", c.torch_version},
                                  {"rounds", r.rounds},
                                  {"steps_per_round", r.steps},
                                  {"step_seconds", figure_json(c.step)},
                                  {"overhead_seconds", figure_json(c.overhead)},
                                  {"per_stage", stages},
                                  {"transfers_per_step", c.transfers_per_step},
                                  {"predicted_transfers", c.predicted_transfers},
                                  {"transfer_bytes", c.transfer_bytes},
                                  {"predicted_transfer_bytes", c.predicted_transfer_bytes},
                                  {"predicted_bubble_seconds", c.predicted_bubble_seconds},
                                  {"predicted_p2p_seconds", c.predicted_p2p_seconds},
                                  {"predicted_tied_seconds", c.predicted_tied_seconds},
                                  {"predicted_overhead_seconds", c.predicted_overhead_seconds},
                                  {"predicted_step_seconds", c.predicted_step_seconds},
                                  {"step_error", c.step_error()},
                                  {"overhead_error", c.overhead_error() ? json(*c.overhead_error()) : json(nullptr)},
                                  {"counts_equal", c.counts_equal()},
                                  {"within", within},
                                  {"step_within", step_ok},
                                  {"notes", c.notes}});
  }
  report::Table t = measured_table(within);
  t.rows.push_back(predicted_row("step", "step", c.step, c.predicted_step_seconds, within, true));
  t.rows.push_back(predicted_row("bubble and transfers (step less the busiest stage alone)", "overhead", c.overhead,
                                 c.predicted_overhead_seconds, within, false));
  if (!c.overhead_error()) t.rows.back()[3] = {"n/a", ""};  // no bubble to read (a note says why)
  for (std::size_t d = 0; d < c.stage_passes.size(); ++d) {
    t.rows.push_back(measured_row(fmt::format("stage {}: {} micro-batches alone", d, r.micro_batches),
                                  fmt::format("stage{}", d), c.stage_passes[d], "(measured)"));
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format(
      "{}: {} pipeline stages in local processes (gloo, torch {}), 1F1B, fp32; {} micro-batches of {} × {} tokens; "
      "{} rounds of {} steps through the pipeline and {} of the stages alone, interleaved\n",
      r.model.empty() ? r.config.source : r.model, r.ranks, c.torch_version, r.micro_batches, r.batch, r.tokens,
      r.rounds, r.steps, r.steps);
  out += fmt::format(
      "link: {}; measured {} transfers a step of {}, predicted {} of {}; parameters a stage {} ({} by the stages' "
      "graphs){}\n",
      link_name(r.link), c.transfers_per_step, report::si(c.transfer_bytes, "B"), c.predicted_transfers,
      report::si(c.predicted_transfer_bytes, "B"), fmt::join(c.parameters, ", "),
      fmt::join(c.predicted_parameters, ", "), c.counts_equal() ? "" : " (they differ)");
  out += report::render_table(t, format);
  out += fmt::format("predicted bubble {}, transfers on the critical path {}{}\n",
                     report::seconds(c.predicted_bubble_seconds), report::seconds(c.predicted_p2p_seconds),
                     c.predicted_tied_seconds > 0
                         ? fmt::format(", tied embedding's all-reduce {}", report::seconds(c.predicted_tied_seconds))
                         : std::string());
  for (const std::string& n : c.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace neuralcost
