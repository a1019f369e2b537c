// The side-by-side view of one workload across backends (see profile_views.hpp): a row per
// model, batch and mode, a column per backend, and a check that the backends ran the same
// model (the same parameters and contraction FLOPs), without which the comparison measures
// nothing.
#include <fmt/format.h>

#include <set>

#include "neuralcost/report/profile_views.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

struct Workload {
  std::string model, mode;
  std::int64_t batch;
  auto operator<=>(const Workload&) const = default;
};

std::vector<std::string> backends_of(const std::vector<ProfileRun>& runs) {
  std::vector<std::string> names;
  for (const ProfileRun& r : runs) {
    if (std::find(names.begin(), names.end(), r.backend) == names.end()) names.push_back(r.backend);
  }
  return names;
}

std::vector<Workload> workloads_of(const std::vector<ProfileRun>& runs) {
  std::vector<Workload> w;
  for (const ProfileRun& r : runs) {
    const Workload k{r.model, r.mode, r.batch};
    if (std::find(w.begin(), w.end(), k) == w.end()) w.push_back(k);
  }
  return w;
}

const ProfileRun* find_run(const std::vector<ProfileRun>& runs, const Workload& w, const std::string& backend) {
  for (const ProfileRun& r : runs) {
    if (r.backend == backend && r.model == w.model && r.mode == w.mode && r.batch == w.batch) return &r;
  }
  return nullptr;
}

/// The model's trainable parameters as its framework counts them (the contract's
/// framework_parameters), else as the captured graph reads them. A compiler may merge
/// identical frozen weights, so the captured count can be lower for the same model.
std::uint64_t parameters_of(const ProfileRun& r) {
  auto it = r.contract.find("framework_parameters");
  if (it != r.contract.end()) {
    try {
      return std::stoull(it->second);
    } catch (const std::exception&) {
      // not a number: fall back on the captured graph
    }
  }
  return r.analysis.totals.parameter_count;
}

/// Whether the runs that succeeded agree on parameters and contraction FLOPs; `detail` lists them.
bool same_model(const std::vector<const ProfileRun*>& runs, std::string& detail) {
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
  for (const ProfileRun* r : runs) {
    if (!r || r->failed) continue;
    seen.insert({parameters_of(*r), r->analysis.totals.contraction_flops});
    detail += fmt::format("{}{}: {} parameters, {} contraction FLOPs", detail.empty() ? "" : "; ", r->backend,
                          parameters_of(*r), r->analysis.totals.contraction_flops);
  }
  return seen.size() <= 1;
}

}  // namespace

bool has_comparison(const std::vector<ProfileRun>& runs) { return backends_of(runs).size() > 1; }

std::string render_comparison(const std::vector<ProfileRun>& runs, Format format) {
  const std::vector<std::string> backends = backends_of(runs);
  report::Table t;
  t.headers = {"model", "batch", "mode"};
  t.raw_headers = {"model", "batch", "mode"};
  t.right_align = {false, true, false};
  for (const std::string& b : backends) {
    t.headers.push_back(b);
    t.raw_headers.push_back(b + "_median_seconds");
    t.right_align.push_back(true);
  }
  t.headers.push_back("same model");
  t.raw_headers.push_back("same_model");
  t.right_align.push_back(false);
  std::string warnings;
  for (const Workload& w : workloads_of(runs)) {
    std::vector<report::Cell> row = {{w.model, ""}, {std::to_string(w.batch), ""}, {w.mode, ""}};
    std::vector<const ProfileRun*> these;
    for (const std::string& b : backends) {
      const ProfileRun* r = find_run(runs, w, b);
      these.push_back(r);
      if (!r) {
        row.push_back({"-", ""});
      } else if (r->failed) {
        row.push_back({"failed", "failed"});
      } else {
        const double median = r->timing.summary.median;
        row.push_back({fmt::format("{} ({}{})", report::si(median, "s"), report::percent(r->efficiency),
                                   r->timing.verdict == Verdict::kOk ? "" : ", mistrusted"),
                       fmt::format("{}", median)});
      }
    }
    std::string detail;
    const bool same = same_model(these, detail);
    row.push_back({same ? "yes" : "NO", same ? "yes" : "no"});
    if (!same) warnings += fmt::format("warning: {} batch {}: the backends ran different models ({})\n", w.model, w.batch, detail);
    t.rows.push_back(std::move(row));
  }
  if (format == Format::kCsv) return report::render_table(t, format);
  const std::string title = "comparison: median latency (roofline efficiency) per backend";
  return (format == Format::kMarkdown ? "### " + title + "\n\n" : title + "\n") + report::render_table(t, format) + warnings;
}

json comparison_json(const std::vector<ProfileRun>& runs) {
  json out = json::array();
  const std::vector<std::string> backends = backends_of(runs);
  for (const Workload& w : workloads_of(runs)) {
    json row{{"model", w.model}, {"batch", w.batch}, {"mode", w.mode}, {"backends", json::object()}};
    std::vector<const ProfileRun*> these;
    for (const std::string& b : backends) {
      const ProfileRun* r = find_run(runs, w, b);
      these.push_back(r);
      if (!r) continue;
      if (r->failed) {
        row["backends"][b] = {{"failed", true}, {"error", r->error}};
        continue;
      }
      row["backends"][b] = {{"failed", false},
                            {"median_seconds", r->timing.summary.median},
                            {"efficiency", r->efficiency},
                            {"verdict", std::string(verdict_name(r->timing.verdict))},
                            {"parameter_count", parameters_of(*r)},
                            {"contraction_flops", r->analysis.totals.contraction_flops}};
    }
    std::string detail;
    row["same_model"] = same_model(these, detail);
    out.push_back(row);
  }
  return out;
}

}  // namespace neuralcost
