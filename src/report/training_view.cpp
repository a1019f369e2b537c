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
  return {{"flops", w.flops},
          {"contraction_flops", w.contraction_flops},
          {"bytes", w.bytes},
          {"lower_bound_seconds", w.lower_bound_seconds},
          {"records", w.records}};
}

std::string options_text(const TrainingOptions& o) {
  return fmt::format("optimizer {}, precision {}, checkpointing {}", optimizer_name(o.optimizer),
                     precision_name(o.precision), checkpoint_name(o.checkpoint));
}

std::string bytes(std::uint64_t b) { return memory_size_string(b); }

std::string memory_text(const MemoryLedger& m, const std::vector<std::string>& names) {
  const ActivationMemory& a = m.activations;
  std::string out =
      fmt::format("memory (docs/training-memory.md): parameters {}, gradients {}, optimizer state {}{}{}\n",
                  bytes(m.parameter_bytes), bytes(m.gradient_bytes), bytes(m.optimizer_state_bytes),
                  m.master_weight_bytes ? fmt::format(", fp32 master weights {}", bytes(m.master_weight_bytes)) : "",
                  m.buffer_bytes ? fmt::format(", buffers {}", bytes(m.buffer_bytes)) : "");
  out += fmt::format("activations: {} saved for backward; the peak is between {} (at '{}', {}) and {}\n",
                     bytes(a.saved_bytes), bytes(a.lower_bound_bytes), terminal_text(a.peak_op),
                     memory_phase_name(a.peak_phase), bytes(a.upper_bound_bytes));
  if (m.optimizer_transient_bytes > 0) {
    out +=
        fmt::format("optimizer step temporaries: {} (after the backward pass)\n", bytes(m.optimizer_transient_bytes));
  }
  out += fmt::format("step total: {} to {}\n", bytes(m.total_bytes(MemoryBound::kLower)),
                     bytes(m.total_bytes(MemoryBound::kUpper)));
  std::string savers;
  for (std::size_t i : biggest_savers(m, 3)) {
    if (m.ops[i].keeps_bytes == 0) continue;
    savers += fmt::format("{}{} {}", savers.empty() ? "" : ", ", terminal_text(names.at(m.ops[i].op_index)),
                          bytes(m.ops[i].keeps_bytes));
  }
  if (!savers.empty()) out += "biggest savers: " + savers + "\n";
  if (m.options.checkpoint.kind != CheckpointKind::kNone) {
    std::size_t recomputed = 0;
    for (const CheckpointSegment& seg : m.segments) recomputed += seg.recomputed ? 1 : 0;
    out +=
        fmt::format("checkpointing {}: {} of {} segments recomputed, {} more\n", checkpoint_name(m.options.checkpoint),
                    recomputed, m.segments.size(), report::si(static_cast<double>(m.recompute_flops), "FLOP"));
  }
  for (const std::string& n : m.notes) out += "note: " + terminal_text(n) + "\n";
  if (!m.unknown_saves.empty()) {
    out += fmt::format("warning: what {} op(s) keep for backward is not known (not in the lower bound): {}\n",
                       m.unknown_saves.size(), terminal_text(m.unknown_saves.front()));
  }
  return out;
}

std::string fit_text(const BatchFit& f) {
  std::string out =
      fmt::format("fits: budget {} with a {} reserve ({} usable): largest batch {}{}, needing {} ({} bound)",
                  bytes(f.budget_bytes), report::percent(f.reserve), bytes(f.usable_bytes), f.batch,
                  f.capped ? " (the largest tried)" : "", bytes(f.needed_bytes), memory_bound_name(f.bound));
  if (!f.capped) out += fmt::format("; batch {} would need {}", f.batch + 1, bytes(f.next_batch_bytes));
  const MemoryLedger& m = f.ledger;
  out += fmt::format(
      "\n  at batch {}: parameters {}, gradients {}, optimizer state {}, master weights {}, activations {}\n", f.batch,
      bytes(m.parameter_bytes), bytes(m.gradient_bytes), bytes(m.optimizer_state_bytes), bytes(m.master_weight_bytes),
      bytes(f.bound == MemoryBound::kUpper ? m.activations.upper_bound_bytes : m.activations.lower_bound_bytes));
  return out;
}

nlohmann::json memory_json(const MemoryLedger& m, const std::vector<std::string>& names) {
  const ActivationMemory& a = m.activations;
  nlohmann::json j{{"parameter_count", m.parameter_count},
                   {"parameter_bytes", m.parameter_bytes},
                   {"buffer_bytes", m.buffer_bytes},
                   {"gradient_bytes", m.gradient_bytes},
                   {"optimizer_state_bytes", m.optimizer_state_bytes},
                   {"master_weight_bytes", m.master_weight_bytes},
                   {"optimizer_transient_bytes", m.optimizer_transient_bytes},
                   {"resident_bytes", m.resident_bytes()},
                   {"activations",
                    {{"saved_bytes", a.saved_bytes},
                     {"lower_bound_bytes", a.lower_bound_bytes},
                     {"upper_bound_bytes", a.upper_bound_bytes},
                     {"peak_op", a.peak_op},
                     {"peak_phase", std::string(memory_phase_name(a.peak_phase))},
                     {"largest_transient_bytes", a.largest_transient_bytes},
                     {"lower_with_parameter_gradients_bytes", a.lower_with_parameter_gradients_bytes}}},
                   {"persistent_bytes", m.persistent_bytes()},
                   {"total_lower_bytes", m.total_bytes(MemoryBound::kLower)},
                   {"total_upper_bytes", m.total_bytes(MemoryBound::kUpper)},
                   {"recompute_flops", m.recompute_flops},
                   {"unknown_saves", m.unknown_saves},
                   {"notes", m.notes}};
  j["biggest_savers"] = nlohmann::json::array();
  for (std::size_t i : biggest_savers(m, 5)) {
    if (m.ops[i].keeps_bytes == 0) continue;
    j["biggest_savers"].push_back({{"op", names.at(m.ops[i].op_index)}, {"bytes", m.ops[i].keeps_bytes}});
  }
  return j;
}

}  // namespace

nlohmann::json training_json(const TrainingReport& report) {
  const Analysis& step = report.step;
  const TrainingOptions& options = report.options;
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
    t["ops"].push_back({{"name", r.name},
                        {"kind", r.kind},
                        {"modeled", r.modeled},
                        {"forward", work_json(r.forward)},
                        {"input_gradient", work_json(r.input_gradient)},
                        {"weight_gradient", work_json(r.weight_gradient)}});
  }
  t["optimizer_step"] = work_json(s.optimizer);
  t["optimizer_step"]["parameters"] = s.optimizer_parameters;
  t["unmodeled_gradients"] = nlohmann::json::array();
  for (const auto& [name, why] : s.unmodeled_gradients)
    t["unmodeled_gradients"].push_back({{"op", name}, {"reason", why}});
  t["memory"] = memory_json(report.memory, report.op_names);
  if (report.fit) {
    const BatchFit& f = *report.fit;
    t["fit"] = {{"batch", f.batch},
                {"capped", f.capped},
                {"bound", std::string(memory_bound_name(f.bound))},
                {"budget_bytes", f.budget_bytes},
                {"reserve", f.reserve},
                {"usable_bytes", f.usable_bytes},
                {"needed_bytes", f.needed_bytes},
                {"next_batch_bytes", f.next_batch_bytes},
                {"memory", memory_json(f.ledger, report.op_names)}};
  }
  nlohmann::json j = analysis_json(step);
  j["training"] = t;
  return j;
}

static std::string training_view(const TrainingReport& report, Format format) {
  if (format == Format::kJson) return report::json_text(training_json(report));
  const Analysis& step = report.step;
  const TrainingOptions& options = report.options;
  const StepSummary s = summarize_step(step);
  report::Table t;
  t.headers = {"op", "kind", "fwd FLOPs", "bwd FLOPs", "bwd/fwd", "fwd bytes", "bwd bytes", "lower bound"};
  t.raw_headers = {"name",          "kind",           "forward_flops",      "backward_flops", "backward_to_forward",
                   "forward_bytes", "backward_bytes", "lower_bound_seconds"};
  t.right_align = {false, false, true, true, true, true, true, true};
  for (const StepOpRow& r : s.ops) {
    const StepWork bwd = backward_of(r);
    const std::string ratio =
        r.forward.flops > 0 && r.modeled
            ? report::fixed1(static_cast<double>(bwd.flops) / static_cast<double>(r.forward.flops))
            : std::string(r.modeled ? "-" : "?");
    t.rows.push_back({text(terminal_text(r.name)), text(r.kind), count(r.forward.flops, ""),
                      r.modeled ? count(bwd.flops, "") : text("?"), text(ratio), count(r.forward.bytes, "B"),
                      count(bwd.bytes, "B"), seconds(r.forward.lower_bound_seconds + bwd.lower_bound_seconds)});
  }
  // the optimizer's update runs after the backward pass: its FLOPs go in the backward column
  t.rows.push_back({text(fmt::format("optimizer step ({} tensors)", s.optimizer_parameters)),
                    text(std::string(optimizer_name(options.optimizer))), text(""), count(s.optimizer.flops, ""),
                    text(""), text(""), count(s.optimizer.bytes, "B"), seconds(s.optimizer.lower_bound_seconds)});
  if (format == Format::kCsv) return report::render_table(t, format);
  const ModelTotals& tot = step.totals;
  std::string out = format == Format::kMarkdown ? "### " : "";
  out += fmt::format("{} training step ({}{}, {}) on {} [{}]\n", terminal_text(step.model),
                     step.batch > 0 ? fmt::format("batch {}, ", step.batch) : "", dtype_name(step.dtype),
                     options_text(options), step.hardware.name, step.hardware.id);
  for (const std::string& n : step.graph.notes()) out += "note: " + terminal_text(n) + "\n";
  out += "\n" + report::render_table(t, format) + "\n";
  for (const PassTotal& p : s.passes) {
    out += fmt::format("{:<16} {} ({} in contractions), {} moved, lower bound {}\n",
                       std::string(pass_name(p.pass)) + ":", report::si(static_cast<double>(p.work.flops), "FLOP"),
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
  out += "\n" + memory_text(report.memory, report.op_names);
  if (report.fit) out += fit_text(*report.fit);
  return out;
}

static std::string training_summary_view(const std::vector<TrainingReport>& reports, Format format) {
  if (format == Format::kJson) {
    nlohmann::json j{{"schema_version", 1}, {"analyses", nlohmann::json::array()}};
    for (const TrainingReport& r : reports) j["analyses"].push_back(training_json(r));
    return report::json_text(j);
  }
  std::vector<Analysis> steps;
  for (const TrainingReport& r : reports) steps.push_back(r.step);
  std::string out = render_summary(steps, format);
  if (format == Format::kCsv || reports.empty()) return out;
  out +=
      fmt::format("training steps: {} (FLOPs, bytes and bounds are per step)\n", options_text(reports.front().options));
  for (const TrainingReport& r : reports) {
    out +=
        fmt::format("memory: {} batch {}: {} to {}{}\n", terminal_text(r.step.model), r.step.batch,
                    bytes(r.memory.total_bytes(MemoryBound::kLower)), bytes(r.memory.total_bytes(MemoryBound::kUpper)),
                    r.fit ? fmt::format("; largest batch in {}: {}", bytes(r.fit->budget_bytes), r.fit->batch) : "");
  }
  return out;
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_training(const TrainingReport& report, Format format) {
  return report::noting_invalid_utf8(format, [&] { return training_view(report, format); });
}

std::string render_training_summary(const std::vector<TrainingReport>& reports, Format format) {
  return report::noting_invalid_utf8(format, [&] { return training_summary_view(reports, format); });
}

}  // namespace neuralcost
