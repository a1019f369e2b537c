// The report in Markdown (see report_views.hpp): the HTML report's words and tables, no charts.
#include <fmt/format.h>

#include "neuralcost/report/report_views.hpp"
#include "neuralcost/version.hpp"
#include "report/findings_text.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using report::Cell;

report::Table runs_table(const ResultsFile& results) {
  report::Table t;
  t.headers = {"#",      "model", "framework", "mode",   "batch",      "device", "median",
               "95% CI", "CV",    "samples/s", "FLOP/s", "efficiency", "limit",  "verdict"};
  t.right_align = {true, false, false, false, true, false, true, true, true, true, true, true, false, false};
  for (std::size_t i = 0; i < results.runs.size(); ++i) {
    const ResultRun& r = results.runs[i];
    std::vector<Cell> row = {{std::to_string(i + 1), ""},   {r.model, ""}, {r.backend, ""}, {r.mode, ""},
                             {std::to_string(r.batch), ""}, {r.device, ""}};
    if (r.failed()) {
      for (int k = 0; k < 7; ++k) row.push_back({"-", ""});
      row.push_back({"**failed**", ""});
    } else {
      std::string verdict = r.verdict;
      if (r.mistrusted()) {
        verdict = "**mistrusted**:";
        for (const std::string& why : r.reasons) verdict += " " + why;
      }
      row.insert(
          row.end(),
          {{report::si(r.median_seconds, "s"), ""},
           {fmt::format("{} - {}", report::si(r.ci95_low_seconds, "s"), report::si(r.ci95_high_seconds, "s")), ""},
           {report::percent(r.cv), ""},
           {report::si(r.samples_per_second, ""), ""},
           {report::si(r.achieved_flops_per_second, "FLOP/s"), ""},
           {report::percent(r.efficiency), ""},
           {r.bound, ""},
           {verdict, ""}});
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

static std::string report_markdown_view(const ReportInput& input) {
  const ResultsFile& results = *input.results;
  std::string hardware;
  for (const HardwareSpec& h : results.hardware)
    hardware += (hardware.empty() ? "" : "; ") + h.name + " [" + h.id + "]";
  std::string out = "# neural-cost report\n\n";
  out += report::markdown_text(fmt::format("{} · {} · {} runs · neural-cost {}", results.path,
                                           hardware.empty() ? "no readable hardware spec" : hardware,
                                           results.runs.size(), kVersion)) +
         "\n\n## Findings\n\n";
  for (const std::string& s : report::findings_sentences(input)) out += "- " + report::markdown_text(s) + "\n";
  out += "\n(The charts are in the HTML report: `neural-cost report RESULTS -o report.html`.)\n\n## Runs\n\n";
  out += report::render_table(runs_table(results), Format::kMarkdown);
  out += "\n## Failed cells\n\n";
  std::string failed;
  for (const ResultRun& r : results.runs) {
    if (r.failed()) failed += "- " + report::markdown_text(report::run_name(r) + ": " + r.error) + "\n";
  }
  out += failed.empty() ? "None: every cell ran.\n" : failed;
  if (input.cost) out += "\n## Cost\n\n" + render_cost(results, *input.cost, Format::kMarkdown);
  if (input.comparison) {
    out += "\n## Compared with " + report::markdown_text(input.comparison->before_path) + "\n\n" +
           render_results_comparison(*input.comparison, Format::kMarkdown);
  }
  if (!results.warnings.empty()) {
    out += "\n## Lines skipped\n\n";
    for (const std::string& w : results.warnings) out += "- " + report::markdown_text(w) + "\n";
  }
  return out;
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_report_markdown(const ReportInput& input) {
  return report::noting_invalid_utf8(Format::kMarkdown, [&] { return report_markdown_view(input); });
}

}  // namespace neuralcost
