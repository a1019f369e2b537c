// The 3D-parallel step views (include/neuralcost/report/model_parallel_views.hpp).
#include "neuralcost/report/model_parallel_views.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/report/views.hpp"
#include "neuralcost/training/memory.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

json step_json(const std::string& model, const ModelParallelStep& s) {
  const ModelParallelRequest& r = s.request;
  json stages = json::array();
  for (const PipelineStage& st : s.stages) {
    json layers = json::array();
    for (const auto& [first, last] : st.layers) layers.push_back({first, last});
    stages.push_back({{"stage", st.index},
                      {"layers", layers},
                      {"forward_seconds", st.forward_seconds},
                      {"backward_seconds", st.backward_seconds},
                      {"tensor_parallel_seconds", st.tensor_seconds},
                      {"expert_parallel_seconds", st.expert_seconds},
                      {"micro_batch_seconds", st.busy_seconds()},
                      {"optimizer_seconds", st.optimizer_seconds},
                      {"gradient_seconds", st.gradient_seconds},
                      {"gradient_exposed_seconds", st.gradient_exposed_seconds},
                      {"parameters", st.parameters},
                      {"in_flight", st.in_flight},
                      {"state_bytes", st.state_bytes},
                      {"activation_bytes", st.activation_bytes},
                      {"memory_lower_bytes", st.memory_lower_bytes()},
                      {"memory_upper_bytes", st.memory_upper_bytes()}});
  }
  return {{"model", model},
          {"system", r.system.id},
          {"intra_node", r.intra.id},
          {"inter_node", r.inter.id},
          {"devices", s.devices},
          {"data_parallel", r.dp},
          {"tensor_parallel", r.tp},
          {"pipeline_parallel", r.pp},
          {"expert_parallel", r.ep},
          {"sequence_parallel", r.sequence_parallel},
          {"virtual_stages", r.virtual_stages},
          {"micro_batch", r.micro_batch},
          {"micro_batches", s.micro_batches},
          {"global_batch", r.global_batch},
          {"tokens", r.tokens},
          {"zero_stage", zero_stage_name(r.stage)},
          {"recompute", r.recompute ? "full" : "none"},
          {"layout", s.layout()},
          {"step_seconds", s.step_seconds},
          {"expert_parallel_seconds", s.expert_seconds},
          {"pipeline_seconds", s.pipeline_seconds},
          {"bubble_seconds", s.bubble_seconds},
          {"p2p_seconds", s.p2p_seconds},
          {"stages_link", s.link_of_stages},
          {"tensor_parallel_seconds", s.tensor_seconds},
          {"gradient_exposed_seconds", s.gradient_exposed_seconds},
          {"optimizer_seconds", s.optimizer_seconds},
          {"tokens_per_second", s.tokens_per_second()},
          {"model_flops", s.model_flops},
          {"hardware_flops", s.hardware_flops},
          {"mfu", s.mfu()},
          {"hfu", s.hfu()},
          {"memory_lower_bytes", s.memory_lower_bytes()},
          {"memory_upper_bytes", s.memory_upper_bytes()},
          {"device_memory_bytes", s.device_memory_bytes ? json(*s.device_memory_bytes) : json(nullptr)},
          {"fit", s.fit()},
          {"stages", stages},
          {"approximations", s.approximations},
          {"notes", s.notes}};
}

std::string range_text(const PipelineStage& st) {
  std::string out;
  for (const auto& [first, last] : st.layers) {
    out += fmt::format("{}{}-{}", out.empty() ? "" : ",", first, last - 1);
  }
  return out;
}

std::string memory_text(std::uint64_t lower, std::uint64_t upper) {
  return memory_size_string(lower) + "-" + memory_size_string(upper);
}

}  // namespace

std::string render_model_parallel(const std::string& model, const ModelParallelStep& s, Format format) {
  if (format == Format::kJson) return report::json_text(step_json(model, s));
  const ModelParallelRequest& r = s.request;
  report::Table t;
  t.headers = {"stage",       "layers",     "forward",   "backward",       "tp comm",
               "micro-batch", "parameters", "in flight", "memory / device"};
  t.raw_headers = {"stage",
                   "layers",
                   "forward_seconds",
                   "backward_seconds",
                   "tensor_parallel_seconds",
                   "micro_batch_seconds",
                   "parameters",
                   "in_flight",
                   "memory_upper_bytes"};
  t.right_align = {true, false, true, true, true, true, true, true, true};
  for (const PipelineStage& st : s.stages) {
    t.rows.push_back(
        {{std::to_string(st.index), ""},
         {range_text(st), ""},
         {report::seconds(st.forward_seconds), fmt::format("{}", st.forward_seconds)},
         {report::seconds(st.backward_seconds), fmt::format("{}", st.backward_seconds)},
         {report::seconds(st.tensor_seconds), fmt::format("{}", st.tensor_seconds)},
         {report::seconds(st.busy_seconds()), fmt::format("{}", st.busy_seconds())},
         {report::si(static_cast<double>(st.parameters), ""), std::to_string(st.parameters)},
         {std::to_string(st.in_flight), ""},
         {memory_text(st.memory_lower_bytes(), st.memory_upper_bytes()), std::to_string(st.memory_upper_bytes())}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const std::string device = r.system.device;
  std::string out = fmt::format(
      "{}: dp={} × tp={} × pp={}{}{} over {} × {} ({}); micro-batch {} × {} micro-batches a replica (global batch {} "
      "sequences of {} tokens), {}, {}, {}\n",
      terminal_text(model), r.dp, r.tp, r.pp, r.ep > 1 ? fmt::format(" (ep={})", r.ep) : "",
      r.sequence_parallel ? " (sequence parallel)" : "", s.devices, device, r.system.id, r.micro_batch, s.micro_batches,
      r.global_batch, r.tokens,
      r.pp == 1              ? "no pipeline"
      : r.virtual_stages > 1 ? fmt::format("interleaved 1F1B ({} chunks a device)", r.virtual_stages)
                             : "1F1B",
      r.stage == ZeroStage::kNone ? "ddp" : "distributed optimizer (zero1)",
      r.recompute ? "full recomputation" : "no recomputation");
  double most = 0;
  for (const PipelineStage& st : s.stages) most = std::max(most, st.busy_seconds());
  out += fmt::format(
      "step ≥ {}: pipeline {} ({} × {} on the busiest device, bubble {}, stage transfers {} {}) + exposed gradient "
      "reduction {} + optimizer {}\n",
      report::seconds(s.step_seconds), report::seconds(s.pipeline_seconds), s.micro_batches, report::seconds(most),
      report::seconds(s.bubble_seconds), report::seconds(s.p2p_seconds), s.link_of_stages,
      report::seconds(s.gradient_exposed_seconds), report::seconds(s.optimizer_seconds));
  out += fmt::format(
      "tokens/s ≤ {:.4g}; MFU ≤ {}, HFU ≤ {} (the model's exact step FLOPs {}, every device's {} with {}, over {} "
      "a device × {} devices × the step bound)\n",
      s.tokens_per_second(), report::percent(s.mfu()), report::percent(s.hfu()), report::si(s.model_flops, "FLOP"),
      report::si(s.hardware_flops, "FLOP"),
      fmt::format("{}{}", r.recompute ? "recomputation and " : "",
                  r.tp == 1             ? "no tensor split"
                  : r.sequence_parallel ? "norms split over the sequence"
                                        : "norms replicated over tp"),
      report::si(s.peak_flops_per_second, "FLOP/s"), s.devices);
  if (r.tp > 1) {
    out += fmt::format("tensor-parallel {}: {} of the busiest device's step\n",
                       r.sequence_parallel ? "reduce-scatters and all-gathers" : "all-reduces",
                       report::seconds(s.tensor_seconds));
  }
  // the links every collective above is timed on (--link replaces the one inside a node)
  out +=
      fmt::format("links: inside a node {}, between nodes {}\n", terminal_text(r.intra.id), terminal_text(r.inter.id));
  if (r.ep > 1) {
    out += fmt::format("expert-parallel all-to-alls: {} of the busiest device's step\n",
                       report::seconds(s.expert_seconds));
  }
  out += "\n" + report::render_table(t, format);
  out += fmt::format(
      "\nmemory per device (the fullest stage): {} ({}{})\n",
      memory_text(s.memory_lower_bytes(), s.memory_upper_bytes()), s.fit(),
      s.device_memory_bytes ? " in " + memory_size_string(static_cast<std::uint64_t>(*s.device_memory_bytes)) : "");
  for (const std::string& a : s.approximations) out += "approximation: " + a + "\n";
  for (const std::string& n : s.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_model_parallel_search(const std::string& model, const std::vector<ModelParallelStep>& ranked,
                                         int devices, std::size_t top, Format format) {
  if (format == Format::kJson) {
    json all = json::array();
    for (const ModelParallelStep& s : ranked) all.push_back(step_json(model, s));
    return report::json_text(all);
  }
  report::Table t;
  t.headers = {"rank", "dp",        "tp",     "pp",     "ep",         "sp",    "micro-batch",     "micro-batches",
               "zero", "recompute", "step ≥", "bubble", "tokens/s ≤", "MFU ≤", "memory / device", "fits"};
  t.raw_headers = {"rank",
                   "data_parallel",
                   "tensor_parallel",
                   "pipeline_parallel",
                   "expert_parallel",
                   "sequence_parallel",
                   "micro_batch",
                   "micro_batches",
                   "zero_stage",
                   "recompute",
                   "step_seconds",
                   "bubble_seconds",
                   "tokens_per_second",
                   "mfu",
                   "memory_upper_bytes",
                   "fit"};
  t.right_align = {true, true, true, true, true, false, true, true, false, false, true, true, true, true, true, false};
  std::size_t fits = 0;
  for (const ModelParallelStep& s : ranked) fits += s.fit() == "fits" ? 1 : 0;
  for (std::size_t i = 0; i < ranked.size() && (format == Format::kCsv || i < top); ++i) {
    const ModelParallelStep& s = ranked[i];
    const ModelParallelRequest& r = s.request;
    t.rows.push_back(
        {{std::to_string(i + 1), ""},
         {std::to_string(r.dp), ""},
         {std::to_string(r.tp), ""},
         {std::to_string(r.pp), ""},
         {std::to_string(r.ep), ""},
         {r.sequence_parallel ? "yes" : "no", r.sequence_parallel ? "true" : "false"},
         {std::to_string(r.micro_batch), ""},
         {std::to_string(s.micro_batches), ""},
         {std::string(zero_stage_name(r.stage)), ""},
         {r.recompute ? "full" : "none", ""},
         {report::seconds(s.step_seconds), fmt::format("{}", s.step_seconds)},
         {report::seconds(s.bubble_seconds), fmt::format("{}", s.bubble_seconds)},
         {fmt::format("{:.4g}", s.tokens_per_second()), fmt::format("{}", s.tokens_per_second())},
         {report::percent(s.mfu()), fmt::format("{}", s.mfu())},
         {memory_text(s.memory_lower_bytes(), s.memory_upper_bytes()), std::to_string(s.memory_upper_bytes())},
         {s.fit(), ""}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  if (ranked.empty()) {
    return fmt::format("{}: no layout of {} devices divides the model and the global batch\n", terminal_text(model),
                       devices);
  }
  const ModelParallelStep& any = ranked.front();
  std::string out = fmt::format(
      "{}: {} layouts of {} × {} ({}) for a global batch of {} sequences of {} tokens; {} fit. Ranked: those that "
      "fit by step time, then those that may, then the rest{}\n",
      terminal_text(model), ranked.size(), devices, any.request.system.device, any.request.system.id,
      any.request.global_batch, any.request.tokens, fits,
      ranked.size() > top ? fmt::format(" (the first {}; --format json or csv for all)", top) : "");
  out += report::render_table(t, format);
  if (fits > 0) {
    out += fmt::format("\nbest: {}: step ≥ {}, MFU ≤ {}\n", any.layout(), report::seconds(any.step_seconds),
                       report::percent(any.mfu()));
  }
  for (const std::string& a : any.approximations) out += "approximation: " + a + "\n";
  return out;
}

}  // namespace neuralcost
