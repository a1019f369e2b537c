// Table, Markdown, CSV and JSON views of speculative decoding estimates (speculative_view.hpp).
#include "neuralcost/report/speculative_view.hpp"

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
  t.headers = {"batch", "target step", "draft steps", "verify step", "tokens/round", "per token", "speedup",
               "break-even α"};
  t.raw_headers = {"batch", "target_step_seconds", "draft_steps_seconds", "verify_step_seconds",
                   "expected_tokens_per_round", "seconds_per_token", "speedup", "break_even_acceptance"};
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
  auto line = [&](const std::string& text) {
    out += (format == Format::kMarkdown ? report::markdown_text(text) : terminal_text(text)) + "\n";
  };
  if (format != Format::kCsv) {
    line(fmt::format("speculative decoding: {} verifies {} tokens drafted by {}, each accepted with probability {}, "
                     "at a context of {} tokens",
                     r.target, r.draft_tokens, r.draft, r.acceptance, r.context));
    out += "\n";
  }
  out += report::render_table(t, format);
  if (format == Format::kCsv) return out;
  out += "\n";
  line(fmt::format("tokens per round = (1 − α^(γ+1)) / (1 − α) with γ = {}, α = {}; per token = (draft steps + "
                   "verify step) / tokens per round; speedup = target step / per token; break-even α: where the "
                   "speedup is 1 (never: not even α = 1 pays)",
                   r.draft_tokens, r.acceptance));
  line("note: " + basis + " (a bound on each step, not a measurement; the baseline's tokens are all timed at the "
       "starting context)");
  return out;
}

}  // namespace neuralcost
