// The side-by-side view of one workload across backends (see profile_views.hpp). Rendering
// only: which runs belong together and whether they ran the same model is decided in
// measure/comparison.cpp.
#include <fmt/format.h>

#include "neuralcost/report/profile_views.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {

using nlohmann::json;

std::string render_comparison(const std::vector<ProfileRun>& runs, Format format) {
  const Comparison c = compare_backends(runs);
  report::Table t;
  t.headers = {"model", "batch", "mode"};
  t.raw_headers = {"model", "batch", "mode"};
  t.right_align = {false, true, false};
  for (const std::string& b : c.backends) {
    t.headers.push_back(b);
    t.raw_headers.push_back(b + "_median_seconds");
    t.right_align.push_back(true);
  }
  t.headers.push_back("same model");
  t.raw_headers.push_back("same_model");
  t.right_align.push_back(false);
  std::string warnings;
  for (const ComparisonRow& w : c.rows) {
    std::vector<report::Cell> row = {{w.model, ""}, {std::to_string(w.batch), ""}, {w.mode, ""}};
    for (const ProfileRun* r : w.runs) {
      if (!r) {
        row.push_back({"-", ""});
      } else if (r->outcome.failed()) {
        row.push_back({"failed", "failed"});
      } else {
        const double median = r->timing.summary.median;
        row.push_back({fmt::format("{} ({}{})", report::si(median, "s"), report::percent(r->efficiency),
                                   r->outcome.ok() ? "" : ", mistrusted"),
                       fmt::format("{}", median)});
      }
    }
    row.push_back({w.same_model ? "yes" : "NO", w.same_model ? "yes" : "no"});
    if (!w.same_model) {
      warnings +=
          fmt::format("warning: {} batch {}: the backends ran different models ({})\n", w.model, w.batch, w.detail);
    }
    t.rows.push_back(std::move(row));
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const std::string title = "comparison: median latency (roofline efficiency) per backend";
  return (format == Format::kMarkdown ? "### " + title + "\n\n" : title + "\n") + report::render_table(t, format) +
         warnings;
}

json comparison_json(const std::vector<ProfileRun>& runs) {
  json out = json::array();
  const Comparison c = compare_backends(runs);
  for (const ComparisonRow& w : c.rows) {
    json row{{"model", w.model}, {"batch", w.batch}, {"mode", w.mode}, {"backends", json::object()}};
    for (std::size_t i = 0; i < w.runs.size(); ++i) {
      const ProfileRun* r = w.runs[i];
      if (!r) continue;
      json& b = row["backends"][c.backends[i]];
      if (r->outcome.failed()) {
        b = {{"failed", true}, {"error", r->outcome.error()}};
        continue;
      }
      b = {{"failed", false},
           {"median_seconds", r->timing.summary.median},
           {"efficiency", r->efficiency},
           {"verdict", std::string(verdict_name(r->outcome.verdict))},
           {"parameter_count", parameters_of(*r)},
           {"contraction_flops", r->analysis.totals.contraction_flops}};
    }
    row["same_model"] = w.same_model;
    out.push_back(row);
  }
  return out;
}

}  // namespace neuralcost
