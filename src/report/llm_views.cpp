// Table, Markdown, CSV and JSON views of generations and speculative decoding (llm_views.hpp).
#include "neuralcost/report/llm_views.hpp"

#include <fmt/format.h>

#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

double draft_seconds(const SpeculativeEstimate& e) {
  double s = 0;
  for (const Analysis& a : e.draft_steps) s += a.totals.fused_lower_bound_seconds;
  return s;
}

json estimate_json(const SpeculativeEstimate& e) {
  const SpeculativeRequest& r = e.request;
  json steps = json::array();
  for (const Analysis& a : e.draft_steps) steps.push_back(a.totals.fused_lower_bound_seconds);
  return {{"target", r.target},
          {"draft", r.draft},
          {"batch", r.batch},
          {"context", r.context},
          {"draft_tokens", r.draft_tokens},
          {"acceptance", r.acceptance},
          {"target_step_seconds", e.target_step.totals.fused_lower_bound_seconds},
          {"draft_step_seconds", steps},
          {"verify_step_seconds", e.verify_step.totals.fused_lower_bound_seconds},
          {"verify_step_bound", std::string(bound_name(e.verify_step.totals.bound))},
          {"expected_tokens_per_round", e.expected_tokens},
          {"round_seconds", e.round_seconds},
          {"seconds_per_token", e.seconds_per_token},
          {"speedup", e.speedup},
          {"break_even_acceptance", e.break_even_acceptance ? json(*e.break_even_acceptance) : json(nullptr)}};
}

/// A line of text for the table and Markdown views: no control characters on a terminal, no
/// markup in Markdown.
std::string text_line(const std::string& text, Format format) {
  return (format == Format::kMarkdown ? report::markdown_text(text) : terminal_text(text)) + "\n";
}

}  // namespace

std::string render_speculative(const std::vector<SpeculativeEstimate>& estimates, Format format) {
  if (estimates.empty()) return "";
  const SpeculativeRequest& r = estimates.front().request;
  const std::string basis =
      "every time is a fused lower bound on " + r.hardware.id +
      "; the speedup is the ratio of bounds, each token accepted independently with the given probability";
  if (format == Format::kJson) {
    json j{{"schema_version", 1}, {"basis", basis}, {"estimates", json::array()}};
    for (const SpeculativeEstimate& e : estimates) j["estimates"].push_back(estimate_json(e));
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"batch",        "target step", "draft steps", "verify step",
               "tokens/round", "per token",   "speedup",     "break-even α"};
  t.raw_headers = {"batch",
                   "target_step_seconds",
                   "draft_steps_seconds",
                   "verify_step_seconds",
                   "expected_tokens_per_round",
                   "seconds_per_token",
                   "speedup",
                   "break_even_acceptance"};
  t.right_align = {true, true, true, true, true, true, true, true};
  for (const SpeculativeEstimate& e : estimates) {
    const double target = e.target_step.totals.fused_lower_bound_seconds;
    const double verify = e.verify_step.totals.fused_lower_bound_seconds;
    t.rows.push_back({{std::to_string(e.request.batch), ""},
                      {report::seconds(target), fmt::format("{}", target)},
                      {fmt::format("{} in {}", report::seconds(draft_seconds(e)), e.draft_steps.size()),
                       fmt::format("{}", draft_seconds(e))},
                      {report::seconds(verify), fmt::format("{}", verify)},
                      {fmt::format("{:.2f}", e.expected_tokens), fmt::format("{}", e.expected_tokens)},
                      {report::seconds(e.seconds_per_token), fmt::format("{}", e.seconds_per_token)},
                      {fmt::format("{:.2f}x", e.speedup), fmt::format("{}", e.speedup)},
                      e.break_even_acceptance ? Cell{fmt::format("{:.3f}", *e.break_even_acceptance),
                                                     fmt::format("{}", *e.break_even_acceptance)}
                                              : Cell{"never", ""}});
  }
  std::string out;
  const auto line = [&](const std::string& text) { out += text_line(text, format); };
  if (format != Format::kCsv) {
    line(
        fmt::format("speculative decoding: {} verifies {} tokens drafted by {}, each accepted with probability {}, "
                    "at a context of {} tokens",
                    r.target, r.draft_tokens, r.draft, r.acceptance, r.context));
    out += "\n";
  }
  out += report::render_table(t, format);
  if (format == Format::kCsv) return out;
  out += "\n";
  line(
      fmt::format("tokens per round = (1 − α^(γ+1)) / (1 − α) with γ = {}, α = {}; per token = (draft steps + "
                  "verify step) / tokens per round; speedup = target step / per token; break-even α: where the "
                  "speedup is 1 (never: not even α = 1 pays)",
                  r.draft_tokens, r.acceptance));
  line("note: " + basis +
       " (a bound on each step, not a measurement; the baseline's tokens are all timed at the "
       "starting context)");
  return out;
}

std::string render_generation(const std::vector<GenerationEstimate>& estimates, Format format,
                              const std::optional<PriceList>& prices) {
  if (estimates.empty()) return "";
  const GenerationRequest& r = estimates.front().request;
  const std::optional<double> price = prices ? prices->price_for(r.hardware.id) : std::nullopt;
  const double hourly = price.value_or(0);
  if (format == Format::kJson) {
    json j{{"schema_version", 1},
           {"basis", "fused lower bounds on " + r.hardware.id + "; the decode steps summed exactly over the context"},
           {"estimates", json::array()}};
    for (const GenerationEstimate& e : estimates) {
      const StepSums& d = e.decode;
      j["estimates"].push_back(
          {{"model", r.model},
           {"batch", e.request.batch},
           {"prompt", r.prompt},
           {"generate", r.generate},
           {"time_to_first_token_seconds", e.prefill.fused_lower_bound_seconds},
           {"prefill_lower_bound_seconds", e.prefill.lower_bound_seconds},
           {"decode_steps", e.decode_steps},
           {"seconds_per_output_token", e.seconds_per_output_token()},
           {"first_step_seconds", e.decode_steps > 0 ? json(e.first_step.fused_lower_bound_seconds) : json(nullptr)},
           {"last_step_seconds", e.decode_steps > 0 ? json(e.last_step.fused_lower_bound_seconds) : json(nullptr)},
           {"seconds", e.seconds()},
           {"tokens_per_second", static_cast<double>(e.request.batch * r.generate) / e.seconds()},
           {"decode",
            {{"flops", d.flops},
             {"contraction_flops", d.contraction_flops},
             {"bytes_read", d.bytes_read},
             {"bytes_written", d.bytes_written},
             {"lower_bound_seconds", d.lower_bound_seconds},
             {"fused_lower_bound_seconds", d.fused_lower_bound_seconds}}},
           {"flops", e.prefill.flops + d.flops},
           {"bytes", e.prefill.bytes_read + e.prefill.bytes_written + d.bytes_read + d.bytes_written},
           {"analysed_decode_steps", e.analysed_steps}});
      if (price) {
        const TokenCost c = generation_token_cost(e, hourly);
        j["estimates"].back()["cost"] = {
            {"currency", prices->currency},
            {"price_per_hour", hourly},
            {"per_million_prompt_tokens_at_least", c.per_million_prompt_tokens},
            {"per_million_generated_tokens_at_least",
             c.per_million_generated_tokens ? json(*c.per_million_generated_tokens) : json(nullptr)}};
      }
    }
    return report::json_text(j);
  }
  report::Table t;
  t.headers = {"batch", "first token", "per token", "first step", "last step", "whole", "tokens/s", "FLOPs", "bytes"};
  t.raw_headers = {"batch",
                   "time_to_first_token_seconds",
                   "seconds_per_output_token",
                   "first_step_seconds",
                   "last_step_seconds",
                   "seconds",
                   "tokens_per_second",
                   "flops",
                   "bytes"};
  if (price) {
    t.headers.insert(t.headers.end(), {prices->currency + "/M prompt ≥", prices->currency + "/M generated ≥"});
    t.raw_headers.insert(t.raw_headers.end(),
                         {"per_million_prompt_tokens_at_least", "per_million_generated_tokens_at_least"});
  }
  t.right_align = std::vector<bool>(t.headers.size(), true);
  for (const GenerationEstimate& e : estimates) {
    const double ttft = e.prefill.fused_lower_bound_seconds;
    const auto secs = [](double s) { return Cell{report::seconds(s), fmt::format("{}", s)}; };
    const std::uint64_t flops = e.prefill.flops + e.decode.flops;
    const std::uint64_t bytes =
        e.prefill.bytes_read + e.prefill.bytes_written + e.decode.bytes_read + e.decode.bytes_written;
    const double rate = static_cast<double>(e.request.batch * r.generate) / e.seconds();
    t.rows.push_back({{std::to_string(e.request.batch), ""},
                      secs(ttft),
                      e.decode_steps > 0 ? secs(e.seconds_per_output_token()) : Cell{"-", ""},
                      e.decode_steps > 0 ? secs(e.first_step.fused_lower_bound_seconds) : Cell{"-", ""},
                      e.decode_steps > 0 ? secs(e.last_step.fused_lower_bound_seconds) : Cell{"-", ""},
                      secs(e.seconds()),
                      {fmt::format("{:.4g}", rate), fmt::format("{}", rate)},
                      {report::si(static_cast<double>(flops), "FLOP"), std::to_string(flops)},
                      {report::si(static_cast<double>(bytes), "B"), std::to_string(bytes)}});
    if (price) {
      const TokenCost c = generation_token_cost(e, hourly);
      t.rows.back().push_back(
          {fmt::format("{:.4g}", c.per_million_prompt_tokens), fmt::format("{}", c.per_million_prompt_tokens)});
      t.rows.back().push_back(c.per_million_generated_tokens
                                  ? Cell{fmt::format("{:.4g}", *c.per_million_generated_tokens),
                                         fmt::format("{}", *c.per_million_generated_tokens)}
                                  : Cell{"-", ""});
    }
  }
  std::string out;
  const auto line = [&](const std::string& text) { out += text_line(text, format); };
  if (format != Format::kCsv) {
    line(fmt::format(
        "generation: {}, a prompt of {} tokens then {} generated (a prefill and {} decode steps at contexts "
        "{} .. {})",
        r.model, r.prompt, r.generate, r.generate - 1, r.prompt, r.prompt + r.generate - 2));
    out += "\n";
  }
  out += report::render_table(t, format);
  if (format == Format::kCsv) return out;
  out += "\n";
  std::size_t analysed = 0;
  for (const GenerationEstimate& e : estimates) analysed += e.analysed_steps;
  line(
      fmt::format("note: fused lower bounds on {}; the decode steps are summed exactly ({} of the {} steps' contexts "
                  "analysed, the others an arithmetic series between contexts where every op keeps its roof and "
                  "memory level); tokens/s = batch x generated tokens / whole",
                  r.hardware.id, analysed, static_cast<std::int64_t>(estimates.size()) * (r.generate - 1)));
  if (price) {
    line(
        fmt::format("cost at {} {} per hour ({}): prompt tokens at the prefill's bound, generated tokens (all but the "
                    "first, which the prefill yields) at the decode steps'; from lower bounds, so at least what they "
                    "cost",
                    hourly, prices->currency, prices->origin));
  }
  return out;
}

}  // namespace neuralcost
