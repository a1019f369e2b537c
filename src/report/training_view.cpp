// Views of a training step (report/training_views.hpp); the grouping is the library's
// (summarize_step), the views only lay it out.
#include <fmt/format.h>

#include "neuralcost/report/training_views.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using report::Cell;

Cell count(std::uint64_t value, const std::string& unit) {
  return {report::si(static_cast<double>(value), unit), std::to_string(value)};
}
Cell seconds(double value) { return {report::si(value, "s"), fmt::format("{}", value)}; }
Cell text(std::string s) { return {std::move(s), ""}; }

StepWork backward_of(const StepOpRow& row) {
  StepWork w = row.input_gradient;
  w.flops += row.weight_gradient.flops;
  w.contraction_flops += row.weight_gradient.contraction_flops;
  w.bytes += row.weight_gradient.bytes;
  w.lower_bound_seconds += row.weight_gradient.lower_bound_seconds;
  w.records += row.weight_gradient.records;
  return w;
}

nlohmann::json work_json(const StepWork& w) {
  return {{"flops", w.flops}, {"contraction_flops", w.contraction_flops}, {"bytes", w.bytes},
          {"lower_bound_seconds", w.lower_bound_seconds}, {"records", w.records}};
}

std::string options_text(const TrainingOptions& o) {
  return fmt::format("optimizer {}, precision {}, checkpointing {}", optimizer_name(o.optimizer),
                     precision_name(o.precision), checkpoint_name(o.checkpoint));
}

}  // namespace

nlohmann::json training_json(const Analysis& step, const TrainingOptions& options) {
  const StepSummary s = summarize_step(step);
  nlohmann::json t{{"optimizer", std::string(optimizer_name(options.optimizer))},
                   {"precision", std::string(precision_name(options.precision))},
                   {"checkpoint", checkpoint_name(options.checkpoint)}};
  t["passes"] = nlohmann::json::array();
  for (const PassTotal& p : s.passes) {
    nlohmann::json pj = work_json(p.work);
    pj["pass"] = std::string(pass_name(p.pass));
    t["passes"].push_back(pj);
  }
  t["ops"] = nlohmann::json::array();
  for (const StepOpRow& r : s.ops) {
    t["ops"].push_back({{"name", r.name}, {"kind", r.kind}, {"modeled", r.modeled},
                        {"forward", work_json(r.forward)}, {"input_gradient", work_json(r.input_gradient)},
                        {"weight_gradient", work_json(r.weight_gradient)}});
  }
  t["optimizer_step"] = work_json(s.optimizer);
  t["optimizer_step"]["parameters"] = s.optimizer_parameters;
  t["unmodeled_gradients"] = nlohmann::json::array();
  for (const auto& [name, why] : s.unmodeled_gradients) t["unmodeled_gradients"].push_back({{"op", name}, {"reason", why}});
  nlohmann::json j = analysis_json(step);
  j["training"] = t;
  return j;
}

std::string render_training(const Analysis& step, const TrainingOptions& options, Format format) {
  if (format == Format::kJson) return report::json_text(training_json(step, options));
  const StepSummary s = summarize_step(step);
  report::Table t;
  t.headers = {"op", "kind", "fwd FLOPs", "bwd FLOPs", "bwd/fwd", "fwd bytes", "bwd bytes", "lower bound"};
  t.raw_headers = {"name", "kind", "forward_flops", "backward_flops", "backward_to_forward", "forward_bytes",
                   "backward_bytes", "lower_bound_seconds"};
  t.right_align = {false, false, true, true, true, true, true, true};
  for (const StepOpRow& r : s.ops) {
    const StepWork bwd = backward_of(r);
    const std::string ratio = r.forward.flops > 0 && r.modeled
                                  ? report::fixed1(static_cast<double>(bwd.flops) / static_cast<double>(r.forward.flops))
                                  : std::string(r.modeled ? "-" : "?");
    t.rows.push_back({text(terminal_text(r.name)), text(r.kind), count(r.forward.flops, ""),
                      r.modeled ? count(bwd.flops, "") : text("?"), text(ratio), count(r.forward.bytes, "B"),
                      count(bwd.bytes, "B"), seconds(r.forward.lower_bound_seconds + bwd.lower_bound_seconds)});
  }
  // the optimizer's update runs after the backward pass: its FLOPs go in the backward column
  t.rows.push_back({text(fmt::format("optimizer step ({} tensors)", s.optimizer_parameters)),
                    text(std::string(optimizer_name(options.optimizer))), text(""), count(s.optimizer.flops, ""), text(""),
                    text(""), count(s.optimizer.bytes, "B"),
                    seconds(s.optimizer.lower_bound_seconds)});
  if (format == Format::kCsv) return report::render_table(t, format);
  const ModelTotals& tot = step.totals;
  std::string out = format == Format::kMarkdown ? "### " : "";
  out += fmt::format("{} training step ({}{}, {}) on {} [{}]\n", terminal_text(step.model),
                     step.batch > 0 ? fmt::format("batch {}, ", step.batch) : "", dtype_name(step.dtype),
                     options_text(options), step.hardware.name, step.hardware.id);
  for (const std::string& n : step.graph.notes()) out += "note: " + terminal_text(n) + "\n";
  out += "\n" + report::render_table(t, format) + "\n";
  for (const PassTotal& p : s.passes) {
    out += fmt::format("{:<16} {} ({} in contractions), {} moved, lower bound {}\n", std::string(pass_name(p.pass)) + ":",
                       report::si(static_cast<double>(p.work.flops), "FLOP"),
                       report::si(static_cast<double>(p.work.contraction_flops), "FLOP"),
                       report::si(static_cast<double>(p.work.bytes), "B"), report::si(p.work.lower_bound_seconds, "s"));
  }
  out += fmt::format("step: {}, {} moved; lower bound {} unfused ({}-bound), {} fused\n",
                     report::si(static_cast<double>(tot.flops), "FLOP"),
                     report::si(static_cast<double>(tot.bytes_read + tot.bytes_written), "B"),
                     report::si(tot.lower_bound_seconds, "s"), bound_name(tot.bound),
                     report::si(tot.fused_lower_bound_seconds, "s"));
  if (step.batch > 0 && tot.lower_bound_seconds > 0 && !step.mostly_unmodeled()) {
    out += fmt::format("best case: {} samples/s from the unfused bound\n",
                       report::si(static_cast<double>(step.batch) / tot.lower_bound_seconds, ""));
  }
  for (const std::string& n : step.approximations) out += "note: approximation: " + terminal_text(n) + "\n";
  for (const auto& [name, why] : s.unmodeled_gradients) {
    out += fmt::format("warning: the gradient of '{}' is not modeled: {}\n", terminal_text(name), terminal_text(why));
  }
  return out;
}

std::string render_training_summary(const std::vector<Analysis>& steps, const TrainingOptions& options, Format format) {
  if (format == Format::kJson) {
    nlohmann::json j{{"schema_version", 1}, {"analyses", nlohmann::json::array()}};
    for (const Analysis& a : steps) j["analyses"].push_back(training_json(a, options));
    return report::json_text(j);
  }
  std::string out = render_summary(steps, format);
  if (format != Format::kCsv) out += fmt::format("training steps: {} (FLOPs, bytes and bounds are per step)\n", options_text(options));
  return out;
}

}  // namespace neuralcost
