// The data-parallel step view (include/neuralcost/report/parallel_views.hpp).
#include "neuralcost/report/parallel_views.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/number_text.hpp"
#include "neuralcost/report/views.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

json step_json(const TrainingReport& report, const DataParallelStep& s, const DataParallelRequest& r) {
  json comm = json::array();
  for (const auto& c : s.communication) {
    comm.push_back({{"collective", collective_name(c.collective.collective)},
                    {"what", c.collective.what},
                    {"bytes", c.collective.bytes},
                    {"calls", c.calls},
                    {"seconds", c.seconds},
                    {"exposed_seconds", c.exposed_seconds},
                    {"wire_bytes_per_rank", c.wire_bytes_per_rank},
                    {"basis", c.basis}});
  }
  json j = {{"model", report.step.model},
            {"system", r.system.id},
            {"device", report.step.hardware.id},
            {"intra_node", r.intra.id},
            {"inter_node", r.inter.id},
            {"data_parallel", s.ranks},
            {"devices_per_node", s.per_node},
            {"nodes", s.nodes},
            {"zero_stage", zero_stage_name(s.stage)},
            {"batch_per_device", s.batch_per_device},
            {"global_batch", s.batch_per_device * s.ranks},
            {"forward_seconds", s.forward_seconds},
            {"backward_seconds", s.backward_seconds},
            {"optimizer_seconds", s.optimizer_seconds},
            {"compute_seconds", s.compute_seconds},
            {"communication_seconds", s.communication_seconds},
            {"exposed_communication_seconds", s.exposed_seconds},
            {"step_seconds", s.step_seconds},
            {"limit", s.limit()},
            {"samples_per_second", s.samples_per_second()},
            {"model_flops", s.model_flops},
            {"hardware_flops", s.hardware_flops},
            {"mfu", s.mfu()},
            {"hfu", s.hfu()},
            {"communication", comm},
            {"memory_per_device",
             {{"parameter_bytes", s.states.parameter_bytes},
              {"gradient_bytes", s.states.gradient_bytes},
              {"optimizer_state_bytes", s.states.optimizer_state_bytes},
              {"master_weight_bytes", s.states.master_weight_bytes},
              {"gathered_parameter_bytes", s.states.gathered_parameter_bytes},
              {"bucket_copy_bytes", s.bucket_copy_bytes},
              {"lower_bytes", s.memory_lower_bytes},
              {"upper_bytes", s.memory_upper_bytes},
              {"device_bytes", s.device_memory_bytes ? json(*s.device_memory_bytes) : json(nullptr)},
              {"fits", s.fit()}}},
            {"approximations", s.approximations}};
  return j;
}

std::string one_step(const TrainingReport& report, const DataParallelStep& s, const DataParallelRequest& r,
                     Format format) {
  report::Table t;
  t.headers = {"collective", "of", "calls", "wire / device", "link time", "exposed", "basis"};
  t.raw_headers = {"collective", "what", "calls", "wire_bytes_per_rank", "seconds", "exposed_seconds", "basis"};
  t.right_align = {false, false, true, true, true, true, false};
  for (const auto& c : s.communication) {
    t.rows.push_back({{std::string(collective_name(c.collective.collective)), ""},
                      {c.collective.what, ""},
                      {std::to_string(c.calls), ""},
                      {report::si(c.wire_bytes_per_rank, "B"), fmt::format("{}", c.wire_bytes_per_rank)},
                      {report::seconds(c.seconds), fmt::format("{}", c.seconds)},
                      {report::seconds(c.exposed_seconds), fmt::format("{}", c.exposed_seconds)},
                      {c.basis, ""}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out =
      fmt::format("{}: data parallel over {} × {} ({} node{} of {}, {}), {}, batch {} per device ({} in all)\n",
                  terminal_text(report.step.model), s.ranks, report.step.hardware.id, s.nodes, s.nodes == 1 ? "" : "s",
                  s.per_node, r.system.id, zero_stage_name(s.stage), s.batch_per_device, s.batch_per_device * s.ranks);
  out += fmt::format(
      "step ≥ {} ({}-limited): compute {} (forward {}, backward {}, optimizer {}) + exposed "
      "communication {} of {}\n",
      report::seconds(s.step_seconds), s.limit(), report::seconds(s.compute_seconds),
      report::seconds(s.forward_seconds), report::seconds(s.backward_seconds), report::seconds(s.optimizer_seconds),
      report::seconds(s.exposed_seconds), report::seconds(s.communication_seconds));
  out += fmt::format(
      "samples/s ≤ {:.4g} over {} devices; MFU ≤ {}, HFU ≤ {} (exact step FLOPs {}, with "
      "recomputation {}, over {} × the step bound)\n",
      s.samples_per_second(), s.ranks, report::percent(s.mfu()), report::percent(s.hfu()),
      report::si(s.model_flops, "FLOP"), report::si(s.hardware_flops, "FLOP"),
      report::si(s.peak_flops_per_second, "FLOP/s"));
  if (!s.communication.empty()) out += "\n" + report::render_table(t, format);
  out += fmt::format(
      "\nmemory per device: {} to {} ({}): parameters {}, gradients {}, optimizer state {}, master "
      "weights {}{}{}\n",
      memory_size_string(s.memory_lower_bytes), memory_size_string(s.memory_upper_bytes), s.fit(),
      memory_size_string(s.states.parameter_bytes), memory_size_string(s.states.gradient_bytes),
      memory_size_string(s.states.optimizer_state_bytes), memory_size_string(s.states.master_weight_bytes),
      s.states.gathered_parameter_bytes > 0
          ? ", gathered layer " + memory_size_string(s.states.gathered_parameter_bytes)
          : "",
      s.bucket_copy_bytes > 0 ? ", DDP buckets " + memory_size_string(s.bucket_copy_bytes) : "");
  for (const auto& a : s.approximations) out += "approximation: " + a + "\n";
  return out;
}

}  // namespace

std::string render_data_parallel(const std::vector<TrainingReport>& reports, const std::vector<DataParallelStep>& steps,
                                 const DataParallelRequest& request, Format format) {
  if (format == Format::kJson) {
    if (reports.size() == 1) return report::json_text(step_json(reports[0], steps[0], request));
    json all = json::array();
    for (std::size_t i = 0; i < reports.size(); ++i) all.push_back(step_json(reports[i], steps[i], request));
    return report::json_text(all);
  }
  std::string out;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    out += (i == 0 ? "" : "\n") + one_step(reports[i], steps[i], request, format);
  }
  return out;
}

namespace {

json tensor_step_json(const TensorParallelStep& s, const SystemSpec& system, const InterconnectSpec& link) {
  json comm = json::array();
  for (const auto& c : s.communication) {
    comm.push_back({{"collective", collective_name(c.collective)},
                    {"calls", c.calls},
                    {"bytes_each", c.bytes_each},
                    {"seconds", c.seconds},
                    {"wire_bytes_per_rank", c.wire_bytes_per_rank},
                    {"basis", c.basis}});
  }
  return {{"model", s.one_device.model},
          {"system", system.id},
          {"device", s.device_step.hardware.id},
          {"link", link.id},
          {"tensor_parallel", s.tp},
          {"batch", s.one_device.batch},
          {"heads_per_device", s.shard.heads},
          {"kv_heads_per_device", s.shard.kv_heads},
          {"intermediate_per_device", s.shard.intermediate},
          {"vocab_per_device", s.shard.vocab},
          {"one_device_seconds", s.one_device.totals.fused_lower_bound_seconds},
          {"compute_seconds", s.compute_seconds},
          {"communication_seconds", s.communication_seconds},
          {"step_seconds", s.step_seconds},
          {"speedup", s.speedup()},
          {"parameter_bytes_per_device", s.device_step.totals.parameter_bytes},
          {"communication", comm},
          {"notes", s.notes}};
}

}  // namespace

std::string render_data_parallel_search(const std::vector<TrainingReport>& reports,
                                        const std::vector<DataParallelCandidate>& ranked, const DataParallelRequest& r,
                                        Format format) {
  if (format == Format::kJson) {
    json all = json::array();
    for (const auto& c : ranked) {
      json j = step_json(reports[c.report], c.step, r);
      j["checkpoint"] = checkpoint_name(reports[c.report].options.checkpoint);
      j["fit"] = c.step.fit();
      all.push_back(j);
    }
    return report::json_text(all);
  }
  report::Table t;
  t.headers = {"rank",         "zero",        "batch / device", "checkpoint",      "step ≥",
               "exposed comm", "samples/s ≤", "MFU ≤",          "memory / device", "fits"};
  t.raw_headers = {"rank",
                   "zero_stage",
                   "batch_per_device",
                   "checkpoint",
                   "step_seconds",
                   "exposed_seconds",
                   "samples_per_second",
                   "mfu",
                   "memory_upper_bytes",
                   "fit"};
  t.right_align = {true, false, true, false, true, true, true, true, true, false};
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const DataParallelStep& s = ranked[i].step;
    t.rows.push_back({{std::to_string(i + 1), ""},
                      {std::string(zero_stage_name(s.stage)), ""},
                      {std::to_string(s.batch_per_device), ""},
                      {checkpoint_name(reports[ranked[i].report].options.checkpoint), ""},
                      {report::seconds(s.step_seconds), fmt::format("{}", s.step_seconds)},
                      {report::seconds(s.exposed_seconds), fmt::format("{}", s.exposed_seconds)},
                      {fmt::format("{:.4g}", s.samples_per_second()), fmt::format("{}", s.samples_per_second())},
                      {report::percent(s.mfu()), fmt::format("{}", s.mfu())},
                      {memory_size_string(s.memory_lower_bytes) + "-" + memory_size_string(s.memory_upper_bytes),
                       std::to_string(s.memory_upper_bytes)},
                      {s.fit(), ""}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const DataParallelStep& any = ranked.front().step;
  std::string out = fmt::format(
      "{}: every ZeRO stage, batch and checkpoint policy over {} × {} ({}), ranked: those "
      "that fit by samples/s, then those that may\n",
      terminal_text(reports.front().step.model), any.ranks, reports.front().step.hardware.id, r.system.id);
  return out + report::render_table(t, format);
}

std::string render_tensor_parallel(const std::vector<TensorParallelStep>& steps, const SystemSpec& system,
                                   const InterconnectSpec& link, Format format) {
  if (format == Format::kJson) {
    if (steps.size() == 1) return report::json_text(tensor_step_json(steps[0], system, link));
    json all = json::array();
    for (const auto& s : steps) all.push_back(tensor_step_json(s, system, link));
    return report::json_text(all);
  }
  report::Table t;
  t.headers = {"batch",       "1 device",     "tp devices", "compute",
               "all-reduces", "logit gather", "speedup",    "weights / device"};
  t.raw_headers = {"batch",           "one_device_seconds",        "step_seconds",
                   "compute_seconds", "all_reduce_seconds",        "all_gather_seconds",
                   "speedup",         "parameter_bytes_per_device"};
  t.right_align = {true, true, true, true, true, true, true, true};
  for (const auto& s : steps) {
    double reduce = 0, gather = 0;
    for (const auto& c : s.communication) (c.collective == Collective::kAllReduce ? reduce : gather) += c.seconds;
    const double one = s.one_device.totals.fused_lower_bound_seconds;
    t.rows.push_back({{std::to_string(s.one_device.batch), ""},
                      {report::seconds(one), fmt::format("{}", one)},
                      {report::seconds(s.step_seconds), fmt::format("{}", s.step_seconds)},
                      {report::seconds(s.compute_seconds), fmt::format("{}", s.compute_seconds)},
                      {report::seconds(reduce), fmt::format("{}", reduce)},
                      {report::seconds(gather), fmt::format("{}", gather)},
                      {fmt::format("{:.2f}×", s.speedup()), fmt::format("{}", s.speedup())},
                      {memory_size_string(s.device_step.totals.parameter_bytes),
                       fmt::format("{}", s.device_step.totals.parameter_bytes)}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const TensorParallelStep& first = steps.front();
  std::string out = fmt::format(
      "{}: tensor parallel over {} × {} ({}, {}); per device {} of {} heads, {}, "
      "{} MLP columns, {} of the vocabulary\n",
      terminal_text(first.one_device.model), first.tp, first.device_step.hardware.id, system.id, link.id,
      first.shard.heads, first.shard.heads * first.tp,
      first.shard.latent ? fmt::format("the whole latent ({} + {} dims a token, replicated)",
                                       first.shard.latent->kv_rank, first.shard.latent->rope_dims)
                         : fmt::format("{} KV heads", first.shard.kv_heads),
      first.shard.intermediate, first.shard.vocab);
  out += report::render_table(t, format);
  if (!first.communication.empty()) {
    const auto& ar = first.communication.front();
    out += fmt::format(
        "\n{} all-reduces per step ({} each at batch {}; {}), one gather of the logits; lower bounds: "
        "the shard's fused roofline plus the link time\n",
        ar.calls, report::si(ar.bytes_each, "B"), first.one_device.batch, ar.basis);
  }
  for (const auto& n : first.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_serving_capacity(const std::string& model, std::int64_t context, std::int64_t batch,
                                    std::uint64_t budget, double reserve, const std::vector<ServingCapacity>& rows,
                                    Format format) {
  const ServingCapacity* smallest = nullptr;
  for (const auto& r : rows) {
    if (smallest == nullptr && r.sequences >= static_cast<std::uint64_t>(batch)) smallest = &r;
  }
  if (format == Format::kJson) {
    json list = json::array();
    for (const auto& r : rows) {
      list.push_back({{"tensor_parallel", r.tp},
                      {"weight_bytes", r.weight_bytes},
                      {"kv_bytes_per_token", r.kv_bytes_per_token},
                      {"usable_bytes", r.usable_bytes},
                      {"cache_tokens", r.cache_tokens},
                      {"sequences", r.sequences},
                      {"longest_sequence_at_batch", r.longest_sequence},
                      {"weights_fit", r.weights_fit}});
    }
    return report::json_text({{"model", model},
                              {"context", context},
                              {"batch", batch},
                              {"budget_bytes", budget},
                              {"reserve", reserve},
                              {"block_tokens", 16},
                              {"capacity", list},
                              {"smallest_tensor_parallel", smallest ? json(smallest->tp) : json(nullptr)}});
  }
  report::Table t;
  t.headers = {"tp",
               "weights / device",
               "KV / token / device",
               "KV cache / device",
               "tokens cached",
               "sequences",
               fmt::format("longest at batch {}", batch)};
  t.raw_headers = {"tensor_parallel", "weight_bytes", "kv_bytes_per_token",       "usable_bytes",
                   "cache_tokens",    "sequences",    "longest_sequence_at_batch"};
  t.right_align = {true, true, true, true, true, true, true};
  for (const auto& r : rows) {
    t.rows.push_back(
        {{std::to_string(r.tp), ""},
         {memory_size_string(r.weight_bytes), std::to_string(r.weight_bytes)},
         {memory_size_string(r.kv_bytes_per_token), std::to_string(r.kv_bytes_per_token)},
         {r.weights_fit ? memory_size_string(r.usable_bytes) : "weights do not fit", std::to_string(r.usable_bytes)},
         {grouped(r.cache_tokens), std::to_string(r.cache_tokens)},
         {grouped(r.sequences), std::to_string(r.sequences)},
         {r.longest_sequence > 0 ? grouped(r.longest_sequence) + " tokens" : "none",
          std::to_string(r.longest_sequence)}});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format(
      "{}: sequences of {} tokens (the context and the step's token) in {} a device less {} "
      "reserve, the KV cache in blocks of 16 tokens\n",
      terminal_text(model), context + 1, memory_size_string(budget), report::percent(reserve));
  out += report::render_table(t, format);
  out += smallest ? fmt::format("\nthe smallest tensor-parallel degree that serves {} sequence{} at once: tp={}\n",
                                batch, batch == 1 ? "" : "s", smallest->tp)
                  : fmt::format("\nno degree up to tp={} serves {} sequence{} at once\n",
                                rows.empty() ? 0 : rows.back().tp, batch, batch == 1 ? "" : "s");
  out += fmt::format(
      "longest at batch {}: the most tokens each of {} sequence{} served at once can hold (whole blocks, at most "
      "the model's positions)\n",
      batch, batch, batch == 1 ? "" : "s");
  out += "approximation: the step's own activations (small beside the cache at decode) are left to the reserve\n";
  return out;
}

std::string render_serving_choice(const std::string& model, const DecoderRequest& request, double target_seconds,
                                  double reserve, const ServingChoice& choice, const std::string& currency,
                                  const std::string& price_origin, Format format) {
  const ServingOption* cheapest = choice.cheapest ? &choice.options[*choice.cheapest] : nullptr;
  const auto money = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  if (format == Format::kJson) {
    json list = json::array();
    for (const ServingOption& o : choice.options) {
      list.push_back({{"system", o.system},
                      {"device", o.device},
                      {"tensor_parallel", o.tp},
                      {"fits", o.fits},
                      {"seconds_per_token_at_least", o.seconds_per_token},
                      {"meets_target", o.meets_target},
                      {"price_per_device_hour", money(o.price_per_device_hour)},
                      {"cost_per_million_tokens_at_least", money(o.cost_per_million_tokens)}});
    }
    return report::json_text(
        {{"model", model},
         {"context", request.context},
         {"batch", request.batch},
         {"dtype", std::string(dtype_name(request.dtype))},
         {"target_seconds_per_token", target_seconds},
         {"reserve", reserve},
         {"currency", currency},
         {"prices", price_origin.empty() ? json(nullptr) : json(price_origin)},
         {"options", list},
         {"cheapest",
          cheapest ? json({{"system", cheapest->system}, {"tensor_parallel", cheapest->tp}}) : json(nullptr)},
         {"unpriced_devices_meeting_target", choice.unpriced_devices}});
  }
  report::Table t;
  t.headers = {
      "system", "device", "tp", "fits", "per token ≥", "meets", currency + "/device-h", currency + "/M tokens ≥"};
  t.raw_headers = {"system",
                   "device",
                   "tensor_parallel",
                   "fits",
                   "seconds_per_token_at_least",
                   "meets_target",
                   "price_per_device_hour",
                   "cost_per_million_tokens_at_least"};
  t.right_align = {false, false, true, false, true, false, true, true};
  for (const ServingOption& o : choice.options) {
    const auto amount = [](const std::optional<double>& v) {
      return report::Cell{v ? fmt::format("{:.4g}", *v) : "-", v ? fmt::format("{}", *v) : ""};
    };
    t.rows.push_back({{o.system, ""},
                      {o.device, ""},
                      {std::to_string(o.tp), ""},
                      {o.fits ? "yes" : "no", o.fits ? "true" : "false"},
                      {report::seconds(o.seconds_per_token), fmt::format("{}", o.seconds_per_token)},
                      {o.meets_target ? "yes" : "no", o.meets_target ? "true" : "false"},
                      amount(o.price_per_device_hour),
                      amount(o.cost_per_million_tokens)});
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  std::string out = fmt::format(
      "{}: decode at batch {}, context {} ({}), target {} per output token; every built-in system at every "
      "tensor-parallel degree its heads allow, each device's memory less {} reserve\n",
      terminal_text(model), request.batch, request.context, dtype_name(request.dtype), report::seconds(target_seconds),
      report::percent(reserve));
  out += report::render_table(t, format);
  if (cheapest) {
    out += fmt::format(
        "\nthe cheapest that meets the target: {} at tp={} ({} of {}), {:.4g} {} per million output "
        "tokens at least\n",
        cheapest->system, cheapest->tp, report::seconds(cheapest->seconds_per_token), report::seconds(target_seconds),
        *cheapest->cost_per_million_tokens, currency);
  } else {
    const bool any = std::any_of(choice.options.begin(), choice.options.end(),
                                 [](const ServingOption& o) { return o.meets_target; });
    out += any ? "\nsome options meet the target, none has a price: give --price-file or --price-per-hour\n"
               : "\nno built-in system meets the target at this batch and context\n";
  }
  if (!choice.unpriced_devices.empty()) {
    std::string ids;
    for (const std::string& d : choice.unpriced_devices) ids += (ids.empty() ? "" : ", ") + d;
    out += fmt::format("no price for {}: those options are not ranked by cost\n", ids);
  }
  out +=
      "approximation: per token is the decode step's lower bound (fused roofline plus the link time), so an "
      "option that misses the target misses it for certain; one that meets it may not when measured\n";
  return out;
}

}  // namespace neuralcost
