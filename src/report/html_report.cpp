// The HTML report (see report_views.hpp): one self-contained page. Text is HTML-escaped here;
// the charts are Vega specs built here with their data inline, embedded as JSON that no string
// can break out of, and drawn by Vega's SVG renderer (text as text nodes, tooltips as title
// attributes), so no name from a model file ever becomes markup or script.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "neuralcost/report/report_views.hpp"
#include "neuralcost/version.hpp"
#include "report/findings_text.hpp"
#include "report/html_charts.hpp"
#include "report/html_page.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Chart;
using report::html_text;
using report::si;

// ---------------------------------------------------------------------------------------------
// HTML

std::string td(const std::string& text, bool number = false) {
  return fmt::format("<td{}>{}</td>", number ? " class=\"num\"" : "", html_text(text));
}

/// A cell holding a name (a model path, a layer): it may wrap anywhere, never widen the table much.
std::string name_td(const std::string& text) { return "<td class=\"name\">" + html_text(text) + "</td>"; }

std::string runs_table(const ResultsFile& results) {
  std::string out =
      "<div "
      "class=\"table\"><table><thead><tr><th>#</th><th>model</th><th>framework</th><th>mode</th><th>batch</"
      "th><th>device</th>"
      "<th>median</th><th>95% CI</th><th>CV</th><th>samples/s</th><th>FLOP/s</th><th>efficiency</th><th>limit</th>"
      "<th>verdict</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    out += fmt::format("<tr class=\"{}\">", r.verdict);
    out += td(std::to_string(i + 1), true) + name_td(r.model) + td(r.backend) + td(r.mode) +
           td(std::to_string(r.batch), true) + td(r.device);
    if (r.failed()) {
      out += "<td colspan=\"7\">-</td><td><span class=\"flag\">failed</span></td></tr>\n";
      continue;
    }
    out += td(si(r.median_seconds, "s"), true) +
           td(fmt::format("{} - {}", si(r.ci95_low_seconds, "s"), si(r.ci95_high_seconds, "s")), true) +
           td(report::percent(r.cv), true) + td(si(r.samples_per_second, ""), true) +
           td(si(r.achieved_flops_per_second, "FLOP/s"), true) + td(report::percent(r.efficiency), true) + td(r.bound);
    if (r.mistrusted()) {
      // the reasons on a row of their own, under the figures they qualify
      std::string why;
      for (const std::string& reason : r.reasons) why += (why.empty() ? "" : "; ") + reason;
      out +=
          "<td><span class=\"flag\">&#9888; mistrusted</span></td></tr>\n<tr class=\"mistrusted\"><td></td>"
          "<td colspan=\"13\" class=\"why\">mistrusted: " +
          html_text(why) + "</td>";
    } else {
      out += td(r.verdict);
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

std::string failed_list(const ResultsFile& results) {
  std::string out;
  for (const ResultRun& r : results.runs) {
    if (!r.failed()) continue;
    out += "<li><b>" + html_text(report::run_name(r)) + "</b>: " + html_text(r.error) + "</li>\n";
  }
  return out.empty() ? "<p>None: every cell ran.</p>\n" : "<ul>\n" + out + "</ul>\n";
}

std::string cost_section(const ResultsFile& results, const CostReport& cost) {
  const std::string& cur = cost.currency;
  std::string out =
      "<p class=\"note\">cost = price per hour / 3600 &times; median / batch; the intervals are the 95% CI of the "
      "median, priced the same way; per token: samples &times; sequence length (rnn, lstm, transformer). "
      "&ldquo;Above bound&rdquo; is the time above the roofline lower bound, priced: what leaving the run as it is "
      "costs. " +
      html_text(kTrainingCostNote) +
      "</p>\n"
      "<table><thead><tr><th>run</th><th>price/h</th><th>per sample</th><th>per 1M samples</th><th>per 1M tokens</th>"
      "<th>above bound /1M samples</th><th>costliest layer above its bound /1M samples</th></tr></thead><tbody>\n";
  struct TopLayer {
    std::size_t run;
    LayerCost layer;
  };
  std::vector<TopLayer> top;
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    const std::optional<RunCost>& c = cost.runs[i];
    out += "<tr class=\"" + r.verdict + "\">" + name_td(report::run_name(r));
    if (!c) {
      out += fmt::format("<td colspan=\"6\">{}</td></tr>\n", r.failed() ? "failed" : "no price for this hardware");
      continue;
    }
    for (const LayerCost& l : c->layers) top.push_back({i, l});
    std::string layer = "-";
    if (!c->layers.empty()) {
      const ResultLayer& l = r.layers[c->layers.front().layer];
      layer = fmt::format("{} ({})", l.label(), report::money(c->layers.front().above_bound_per_million_samples, cur));
    }
    out += td(report::money(c->price_per_hour, cur), true) +
           td(fmt::format("{:.3g}{}", c->per_sample.value, r.mistrusted() ? " (mistrusted)" : ""), true) +
           td(report::money_interval(c->per_million_samples, cur), true) +
           td(c->per_million_tokens ? report::money_interval(*c->per_million_tokens, cur) : "-", true) +
           td(report::money(c->above_bound_per_million_samples, cur), true) + name_td(layer) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  std::stable_sort(top.begin(), top.end(), [](const TopLayer& a, const TopLayer& b) {
    return a.layer.above_bound_per_million_samples > b.layer.above_bound_per_million_samples;
  });
  if (top.size() > 10) top.resize(10);
  if (!top.empty()) {
    out +=
        "<h3>The layers that cost most above their lower bound</h3>\n<table><thead><tr><th>layer</th><th>kind</th>"
        "<th>run</th><th>measured</th><th>lower bound</th><th>limit</th><th>above bound /1M samples</th></tr>"
        "</thead><tbody>\n";
    for (const TopLayer& t : top) {
      const ResultRun& r = results.runs[t.run];
      const ResultLayer& l = r.layers[t.layer.layer];
      out += "<tr>" + name_td(l.label()) + td(l.kind.empty() ? "-" : l.kind) + name_td(report::run_name(r)) +
             td(si(l.measured_seconds, "s"), true) + td(si(l.lower_bound_seconds, "s"), true) +
             td(l.bound.empty() ? "-" : l.bound) +
             td(report::money(t.layer.above_bound_per_million_samples, cur), true) + "</tr>\n";
    }
    out += "</tbody></table>\n";
  }
  for (const std::string& w : cost.warnings) out += "<p class=\"note\">warning: " + html_text(w) + "</p>\n";
  return out;
}

std::string comparison_table(const ResultsComparison& c) {
  std::string out =
      "<table><thead><tr><th>cell</th><th>before</th><th>after</th><th>change</th><th>95% CI</th><th>p</th>"
      "<th>result</th><th>notes</th></tr></thead><tbody>\n";
  for (const CellChange& x : c.cells) {
    const bool compared = x.change != Change::kNotComparable;
    std::string notes;
    for (const std::string& n : x.notes) notes += (notes.empty() ? "" : "; ") + n;
    out +=
        "<tr>" + name_td(cell_name(x.cell)) +
        td(x.before.failed() ? "failed" : si(x.before.median_seconds, "s"), true) +
        td(x.after.failed() ? "failed" : si(x.after.median_seconds, "s"), true) +
        td(compared ? fmt::format("{:+.1f}%", (x.ratio - 1) * 100) : "-", true) +
        td(compared ? fmt::format("{:+.1f}% .. {:+.1f}%", (x.ratio_ci95.low - 1) * 100, (x.ratio_ci95.high - 1) * 100)
                    : "-",
           true) +
        td(x.test ? fmt::format("{:.2g}", x.p_value()) : "-", true) + td(std::string(change_name(x.change))) +
        td(notes) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  for (const CellKey& k : c.only_before) out += "<p class=\"note\">only before: " + html_text(cell_name(k)) + "</p>\n";
  for (const CellKey& k : c.only_after) out += "<p class=\"note\">only after: " + html_text(cell_name(k)) + "</p>\n";
  for (const std::string& w : c.warnings) out += "<p class=\"note\">warning: " + html_text(w) + "</p>\n";
  return out;
}

}  // namespace

std::string render_report_html(const ReportInput& input, const std::string& vega_script) {
  const ResultsFile& results = *input.results;
  std::vector<std::string> roofline_notes;
  std::vector<Chart> charts;
  charts.push_back(report::roofline_chart(results, roofline_notes));
  charts.push_back(report::latency_chart(results));
  charts.push_back(report::heatmap_chart(results));
  charts.push_back(report::scaling_chart(results));
  const bool speedups = !input.findings.speedups.empty();
  if (speedups) charts.push_back(report::speedup_chart(results, input.findings));
  if (input.comparison) charts.push_back(report::comparison_chart(*input.comparison));

  std::string body;
  std::string hardware = "no readable hardware spec";
  if (!results.hardware.empty()) {
    hardware.clear();
    for (const HardwareSpec& h : results.hardware)
      hardware += (hardware.empty() ? "" : "; ") + h.name + " [" + h.id + "]";
  }
  body += "<h1>neural-cost report</h1>\n<p class=\"meta\">" + html_text(results.path) + " &middot; " +
          html_text(hardware) + " &middot; " + std::to_string(results.runs.size()) + " runs &middot; neural-cost " +
          html_text(std::string(kVersion)) + "</p>\n";
  body += "<h2>Findings</h2>\n<ul class=\"findings\">\n";
  for (const std::string& s : report::findings_sentences(input)) body += "<li>" + html_text(s) + "</li>\n";
  body += "</ul>\n";
  std::string note;
  for (const std::string& n : roofline_notes) note += (note.empty() ? "" : " ") + n;
  note +=
      " Points: one per measured run (arithmetic intensity of its captured graph, achieved FLOP/s; red outline: "
      "mistrusted); triangles: the layers of the run chosen above (hover for layer, kind, FLOPs, bytes, intensity, "
      "time, efficiency, limit).";
  std::size_t k = 0;
  body += report::chart_section("Roofline", charts[k++], note);
  body +=
      report::chart_section("Latency per model, framework and mode", charts[k++],
                            "Median time per forward pass with its 95% confidence interval; hollow red: mistrusted.");
  body += report::chart_section("Roofline efficiency", charts[k++],
                                "Lower bound / median per cell (red outline and '?': mistrusted; grey: failed).");
  body += report::chart_section("Batch scaling", charts[k++],
                                "Throughput against batch size, log axes; hollow: mistrusted.");
  if (speedups) {
    body += report::chart_section(
        "Compiled over eager", charts[k++],
        "Eager median / compiled median per framework (hover: whether the time saved was dispatch "
        "outside the layers or the layers themselves).");
  }
  if (input.cost) body += "<h2>Cost</h2>\n" + cost_section(results, *input.cost);
  if (input.comparison) {
    body += report::chart_section("Compared with " + input.comparison->before_path, charts[k++],
                                  report::comparison_sentence(*input.comparison));
    body += comparison_table(*input.comparison);
  }
  body += "<h2>Runs</h2>\n" + runs_table(results);
  body += "<h2>Failed cells</h2>\n" + failed_list(results);
  if (!results.warnings.empty()) {
    body += "<h2>Lines skipped</h2>\n<ul>\n";
    for (const std::string& w : results.warnings) body += "<li>" + html_text(w) + "</li>\n";
    body += "</ul>\n";
  }

  // the charts, and the cost as `cost --format json` prints it (what the tests read back)
  json data{{"results", results.path}};
  if (input.cost) data["cost"] = cost_json(results, *input.cost);
  const std::string page = report::html_page("neural-cost report: " + results.path, body, charts, data, vega_script);
  return page;
}

}  // namespace neuralcost
