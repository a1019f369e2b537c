// The view of a train-to-target study (include/neuralcost/report/to_target_views.hpp).
#include "neuralcost/report/to_target_views.hpp"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

std::string with_interval(const MeanInterval& m, const std::function<std::string(double)>& text) {
  if (!m.ci95) return text(m.mean);
  return fmt::format("{} [{}, {}]", text(m.mean), text(m.ci95->low), text(m.ci95->high));
}

std::string ratio_text(const std::optional<MeanInterval>& r) {
  if (!r || !r->ci95) return "-";
  return fmt::format("x{:.2f} [{:.2f}, {:.2f}]", r->mean, r->ci95->low, r->ci95->high);
}

std::string count(double v) { return report::grouped(static_cast<std::int64_t>(v + 0.5)); }

}  // namespace

std::string render_to_target(const ToTargetStudy& s, Format format) {
  if (format == Format::kJson) return to_json(s).dump(2) + "\n";
  const ToTargetOptions& o = s.options;
  const ToTargetRun* any = nullptr;
  for (const ToTargetRun& r : s.runs) {
    if (r.error.empty()) {
      any = &r;
      break;
    }
  }
  std::string out = fmt::format(
      "train-to-target: {} (width {}, depth {}{}) on {}{}; target validation accuracy >= {:g}, evaluated every {} "
      "steps, at most {} steps; {}; {} seeded runs per configuration (seeds {} to {}), each in a fresh torch{} "
      "process, {} thread(s), on {}\n\n",
      o.model, o.width, o.depth, any ? fmt::format(", {} parameters", report::grouped(any->parameters)) : "", o.dataset,
      any ? fmt::format(": {} training and {} validation images (stratified split, seed {})",
                        report::grouped(any->train_images), report::grouped(any->val_images), o.split_seed)
          : "",
      o.target, o.eval_every, report::grouped(o.max_steps), o.optimizer == "sgd" ? "SGD, momentum 0.9" : "Adam", o.runs,
      o.seed, o.seed + static_cast<std::uint64_t>(o.runs) - 1, any ? " " + any->torch_version : "", o.threads,
      s.cpu.empty() ? "this CPU" : s.cpu);
  report::Table t;
  t.headers = {"configuration",     "reached", "time to target (olympic)", "mean time, 95% CI", "steps to target",
               "samples to target", "steps/s"};
  t.raw_headers = {"configuration", "reached",      "olympic_seconds", "mean_seconds",
                   "mean_steps",    "mean_samples", "steps_per_second"};
  t.right_align = {false, true, true, true, true, true, true};
  if (s.price_per_hour) {
    t.headers.push_back(fmt::format("cost to target ({})", s.currency));
    t.raw_headers.push_back("mean_cost");
    t.right_align.push_back(true);
  }
  for (const ToTargetSummary& m : s.summaries) {
    std::vector<report::Cell> row{
        {m.config.label(), ""},
        {fmt::format("{} of {}", m.reached, m.runs), std::to_string(m.reached)},
        m.score.valid ? report::Cell{report::seconds(m.score.mean_seconds), fmt::format("{}", m.score.mean_seconds)}
                      : report::Cell{"invalid", ""},
        m.seconds.mean > 0 ? report::Cell{with_interval(m.seconds, report::seconds), fmt::format("{}", m.seconds.mean)}
                           : report::Cell{"-", ""},
        m.steps.mean > 0 ? report::Cell{with_interval(m.steps, count), fmt::format("{}", m.steps.mean)}
                         : report::Cell{"-", ""},
        m.samples.mean > 0 ? report::Cell{with_interval(m.samples, count), fmt::format("{}", m.samples.mean)}
                           : report::Cell{"-", ""},
        {fmt::format("{:.0f}", m.steps_per_second), fmt::format("{}", m.steps_per_second)}};
    if (s.price_per_hour) {
      row.push_back(m.cost && m.cost->mean > 0
                        ? report::Cell{with_interval(*m.cost, [](double v) { return fmt::format("{:.3g}", v); }),
                                       fmt::format("{}", m.cost->mean)}
                        : report::Cell{"-", ""});
    }
    t.rows.push_back(std::move(row));
  }
  out += report::render_table(t, format);
  if (format == Format::kCsv) return out;
  for (const ToTargetSummary& m : s.summaries) {
    if (!m.score.valid) out += fmt::format("{}: no olympic mean: {}\n", m.config.label(), m.score.why_invalid);
    if (m.reached < m.runs) {
      out += fmt::format("{}: {} of {} runs did not reach {:g}{} (median final accuracy {:.3f})\n", m.config.label(),
                         m.runs - m.reached, m.runs, o.target,
                         m.failed ? fmt::format(", {} of them failed (see the JSON)", m.failed) : "",
                         m.median_final_accuracy);
    }
  }
  if (!s.contrasts.empty()) {
    out += fmt::format("\nagainst {}:\n", s.summaries.front().config.label());
    for (const ToTargetContrast& c : s.contrasts) {
      out += fmt::format("  {}: time to target {}, steps to target {}, steps/s x{:.2f}: {}\n",
                         s.summaries[c.b].config.label(), ratio_text(c.seconds_ratio), ratio_text(c.steps_ratio),
                         c.throughput_ratio, c.verdict);
    }
  }
  out +=
      "\napproximation: time to target runs from the first training step to the end of the evaluation that "
      "reached the target, evaluations included; compilation (compiled mode) runs before the clock, as MLPerf's "
      "initialisation\n";
  out += fmt::format(
      "approximation: intervals are percentile bootstraps of the mean over the runs that reached the target; with {} "
      "runs a configuration they are rough (MLPerf asks 5 to 10 runs for its olympic mean, which has no interval)\n",
      o.runs);
  return out;
}

}  // namespace neuralcost
