// The view of a train-to-target study (include/neuralcost/report/to_target_views.hpp).
#include "neuralcost/report/to_target_views.hpp"

#include <algorithm>
#include <cctype>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/version.hpp"
#include "report/chart_parts.hpp"
#include "report/html_page.hpp"
#include "report/safe_text.hpp"
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

/// " (torch 2.15.0; LibTorch 1.13.0)": the versions the runs ran on.
std::string engines_of(const ToTargetStudy& s) {
  std::vector<std::string> seen;
  for (const ToTargetRun& r : s.runs) {
    if (r.torch_version.empty()) continue;
    // the torch worker writes torch's bare version; the other engines name themselves
    const bool named = std::isupper(static_cast<unsigned char>(r.torch_version.front())) != 0;
    const std::string v = named ? r.torch_version : "torch " + r.torch_version;
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string out;
  for (const std::string& v : seen) out += (out.empty() ? " (" : "; ") + v;
  return out.empty() ? out : out + ")";
}

/// "torch, libtorch and jax": the study's backends, in the order of its configurations.
std::string backends_of(const ToTargetStudy& s) {
  std::vector<std::string> seen;
  for (const ToTargetSummary& c : s.summaries) {
    if (std::find(seen.begin(), seen.end(), c.config.backend) == seen.end()) seen.push_back(c.config.backend);
  }
  std::string out;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == seen.size() ? " and " : ", ") + seen[i];
  }
  return out;
}

std::string count(double v) { return report::grouped(static_cast<std::int64_t>(v + 0.5)); }

/// What the text view says after its table: runs that did not reach the target, each configuration
/// against the first, the approximations.
std::string notes_of(const ToTargetStudy& s) {
  const ToTargetOptions& o = s.options;
  std::string out;
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
  if (s.start) {
    const std::string backends = backends_of(s);
    out += s.start->same ? fmt::format(
                               "same start: a seed's first batch has the same loss in {} ({} pair(s), largest "
                               "difference {:.1e} relative): the same initial weights on the same images\n",
                               backends, s.start->pairs, s.start->largest_relative_difference)
                         : fmt::format(
                               "warning: {} did not start a seed alike: its first batch's loss differs by up to {:.1e} "
                               "relative over {} pair(s), so their steps to target are not the same training's\n",
                               backends, s.start->largest_relative_difference, s.start->pairs);
  }
  out +=
      "peak RSS: the high-water resident memory of each run's own process (the framework and the data included: "
      "Python and torch in the torch worker, and JAX or TensorFlow beside them for jax and tensorflow), the median "
      "over a configuration's runs; "
      "samples/s: steps/s x the "
      "batch\n";
  return out;
}

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
      "train-to-target: {} ({}{}) on {}{}; target validation accuracy >= {:g}, evaluated every {} "
      "steps, at most {} steps; {}; {} seeded runs per configuration (seeds {} to {}), each in a fresh process{}, "
      "{} thread(s), on {}\n\n",
      o.model,
      o.model == "ff" || o.model == "cnn" ? fmt::format("width {}, depth {}", o.width, o.depth)
      : o.model_kind.empty()              ? to_target_model_kind(o.model)
                                          : o.model_kind,
      any ? fmt::format(", {} parameters", report::grouped(any->parameters)) : "", o.dataset,
      any ? fmt::format(": {} training and {} validation images (stratified split, seed {})",
                        report::grouped(any->train_images), report::grouped(any->val_images), o.split_seed)
          : "",
      o.target, o.eval_every, report::grouped(o.max_steps), o.optimizer == "sgd" ? "SGD, momentum 0.9" : "Adam", o.runs,
      o.seed, o.seed + static_cast<std::uint64_t>(o.runs) - 1, engines_of(s), o.threads,
      s.cpu.empty() ? "this CPU" : s.cpu);
  report::Table t;
  t.headers = {"configuration",     "reached",         "time to target (olympic)",
               "mean time, 95% CI", "steps to target", "samples to target",
               "steps/s",           "samples/s",       "peak RSS (median)"};
  t.raw_headers = {"configuration", "reached",          "olympic_seconds",    "mean_seconds",         "mean_steps",
                   "mean_samples",  "steps_per_second", "samples_per_second", "median_peak_rss_bytes"};
  t.right_align = {false, true, true, true, true, true, true, true, true};
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
        {fmt::format("{:.0f}", m.steps_per_second), fmt::format("{}", m.steps_per_second)},
        {fmt::format("{:.0f}", m.samples_per_second), fmt::format("{}", m.samples_per_second)},
        m.median_peak_rss_bytes > 0
            ? report::Cell{report::si(m.median_peak_rss_bytes, "B"), fmt::format("{}", m.median_peak_rss_bytes)}
            : report::Cell{"-", ""}};
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
  out += notes_of(s);
  return out;
}

namespace {

/// Validation accuracy against `x` ("seconds" or "cost") of every run, a line per run coloured by
/// its configuration, a point per evaluation (the counted mark), the target as a rule.
report::Chart curve_chart(const ToTargetStudy& s, const std::string& x) {
  const bool cost = x == "cost";
  report::Chart c{cost ? "chart-cost-curve" : "chart-time-curve", cost ? "cost_points" : "time_points", 0,
                  report::chart_parts::base_spec(720, 360)};
  nlohmann::json points = nlohmann::json::array();
  double hi = 0;
  for (std::size_t i = 0; i < s.runs.size(); ++i) {
    const ToTargetRun& r = s.runs[i];
    const std::string config = s.summaries[r.config].config.label();
    for (const CurvePoint& p : r.curve) {
      const double value = cost ? p.seconds * *s.price_per_hour / 3600 : p.seconds;
      hi = std::max(hi, value);
      points.push_back({{"run", i},
                        {"config", config},
                        {"x", value},
                        {"accuracy", p.accuracy},
                        {"tooltip",
                         {{"configuration", config},
                          {"seed", r.seed},
                          {"step", p.step},
                          {"samples", p.samples},
                          {"time", report::seconds(p.seconds)},
                          {"validation accuracy", fmt::format("{:.4f}", p.accuracy)},
                          {"loss", fmt::format("{:.4g}", p.loss)}}}});
      ++c.expected;
    }
  }
  nlohmann::json& spec = c.spec;
  spec["data"] = {{{"name", "points"}, {"values", points}},
                  {{"name", "target"}, {"values", nlohmann::json::array({{{"y", s.options.target}}})}}};
  spec["scales"] = {{{"name", "x"}, {"type", "linear"}, {"domain", {0, hi > 0 ? hi * 1.02 : 1}}, {"range", "width"}},
                    {{"name", "y"}, {"type", "linear"}, {"domain", {0, 1}}, {"range", "height"}},
                    {{"name", "color"},
                     {"type", "ordinal"},
                     {"domain", {{"data", "points"}, {"field", "config"}}},
                     {"range", {{"scheme", "tableau10"}}}}};
  spec["axes"] = {{{"orient", "bottom"},
                   {"scale", "x"},
                   {"title", cost ? fmt::format("cost ({})", s.currency) : std::string("seconds since the first step")},
                   {"format", cost ? "~e" : "~g"},
                   {"grid", true}},
                  {{"orient", "left"}, {"scale", "y"}, {"title", "validation accuracy"}, {"grid", true}}};
  spec["legends"] =
      nlohmann::json::array({{{"stroke", "color"},
                              {"title", "configuration"},
                              {"symbolType", "stroke"},
                              {"labelLimit", 320}}});  // "libtorch compiled bf16-mixed batch 32 lr 0.05" whole
  spec["marks"] = {{{"type", "group"},
                    {"from", {{"facet", {{"name", "series"}, {"data", "points"}, {"groupby", "run"}}}}},
                    {"marks", nlohmann::json::array({{{"type", "line"},
                                                      {"from", {{"data", "series"}}},
                                                      {"sort", {{"field", "datum.x"}}},
                                                      {"encode",
                                                       {{"update",
                                                         {{"x", {{"scale", "x"}, {"field", "x"}}},
                                                          {"y", {{"scale", "y"}, {"field", "accuracy"}}},
                                                          {"stroke", {{"scale", "color"}, {"field", "config"}}},
                                                          {"strokeOpacity", {{"value", 0.7}}},
                                                          {"strokeWidth", {{"value", 1.5}}}}}}}}})}},
                   {{"type", "symbol"},
                    {"name", c.mark},
                    {"from", {{"data", "points"}}},
                    {"encode",
                     {{"update",
                       {{"x", {{"scale", "x"}, {"field", "x"}}},
                        {"y", {{"scale", "y"}, {"field", "accuracy"}}},
                        {"size", {{"value", 18}}},
                        {"fill", {{"scale", "color"}, {"field", "config"}}},
                        {"tooltip", {{"field", "tooltip"}}}}}}}},
                   {{"type", "rule"},
                    {"from", {{"data", "target"}}},
                    {"encode",
                     {{"update",
                       {{"x", {{"value", 0}}},
                        {"x2", {{"signal", "width"}}},
                        {"y", {{"scale", "y"}, {"field", "y"}}},
                        {"stroke", {{"value", "#d62728"}}},
                        {"strokeDash", {{"value", {5, 4}}}}}}}}}};
  return c;
}

/// The summaries as an HTML table: the text view's columns.
std::string summary_table(const ToTargetStudy& s) {
  const auto& td = report::table_cell;
  std::string out =
      "<div class=\"table\"><table>\n<tr><th>configuration</th><th>reached</th><th>time to target (olympic)</th>"
      "<th>mean time, 95% CI</th><th>steps to target</th><th>samples to target</th><th>steps/s</th>"
      "<th>samples/s</th><th>peak RSS (median)</th>" +
      (s.price_per_hour ? "<th>cost to target (" + report::html_text(s.currency) + ")</th>" : std::string()) +
      "</tr>\n";
  for (const ToTargetSummary& m : s.summaries) {
    out += "<tr>" + td(m.config.label(), false) + td(fmt::format("{} of {}", m.reached, m.runs), true) +
           td(m.score.valid ? report::seconds(m.score.mean_seconds) : "invalid", true) +
           td(m.seconds.mean > 0 ? with_interval(m.seconds, report::seconds) : "-", true) +
           td(m.steps.mean > 0 ? with_interval(m.steps, count) : "-", true) +
           td(m.samples.mean > 0 ? with_interval(m.samples, count) : "-", true) +
           td(fmt::format("{:.0f}", m.steps_per_second), true) + td(fmt::format("{:.0f}", m.samples_per_second), true) +
           td(m.median_peak_rss_bytes > 0 ? report::si(m.median_peak_rss_bytes, "B") : "-", true);
    if (s.price_per_hour) {
      out += td(
          m.cost && m.cost->mean > 0 ? with_interval(*m.cost, [](double v) { return fmt::format("{:.3g}", v); }) : "-",
          true);
    }
    out += "</tr>\n";
  }
  return out + "</table></div>\n";
}

}  // namespace

std::string render_to_target_html(const ToTargetStudy& s, const std::string& path, const std::string& vega_script) {
  std::vector<report::Chart> charts{curve_chart(s, "seconds")};
  if (s.price_per_hour) charts.push_back(curve_chart(s, "cost"));
  std::string body = "<h1>neural-cost: training to a quality target</h1>\n<p class=\"meta\">" +
                     report::html_text(path) + " &middot; " + std::to_string(s.runs.size()) +
                     " runs &middot; neural-cost " + report::html_text(std::string(kVersion)) + "</p>\n";
  // the text view's parts: its first paragraph (the contract), a table, the notes after it
  const std::string text = render_to_target(s, Format::kCsv);
  const std::string contract = text.substr(0, text.find("\n\n"));
  body += "<p>" + report::html_text(contract) + "</p>\n<h2>Summary</h2>\n" + summary_table(s);
  body += "<pre class=\"note\" style=\"white-space:pre-wrap\">" + report::html_text(notes_of(s)) + "</pre>\n";
  const std::string what = fmt::format(
      "Every run's validation accuracy at each evaluation (every {} steps), one line per run, coloured by "
      "configuration; the dashed line is the target, {:g}. Hover a point for its run, step and loss.",
      s.options.eval_every, s.options.target);
  body += report::chart_section("Validation accuracy against time", charts[0], what);
  if (s.price_per_hour) {
    body +=
        report::chart_section("Validation accuracy against cost", charts[1],
                              fmt::format("The same runs, time x {:g} {} per hour.", *s.price_per_hour, s.currency));
  }
  return report::html_page("neural-cost train-to-target: " + path, body, charts,
                           nlohmann::json{{"results", path}, {"kind", "train_to_target"}}, vega_script);
}

}  // namespace neuralcost
