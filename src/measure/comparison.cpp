// The comparison of backends (see comparison.hpp).
#include "neuralcost/measure/comparison.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace neuralcost {
namespace {

std::vector<std::string> backends_of(const std::vector<ProfileRun>& runs) {
  std::vector<std::string> names;
  for (const ProfileRun& r : runs) {
    if (std::find(names.begin(), names.end(), r.backend) == names.end()) names.push_back(r.backend);
  }
  return names;
}

}  // namespace

bool has_comparison(const std::vector<ProfileRun>& runs) { return backends_of(runs).size() > 1; }

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

Comparison compare_backends(const std::vector<ProfileRun>& runs) {
  Comparison c;
  c.backends = backends_of(runs);
  for (const ProfileRun& r : runs) {
    const bool seen = std::any_of(c.rows.begin(), c.rows.end(), [&](const ComparisonRow& row) {
      return row.model == r.model && row.mode == r.mode && row.batch == r.batch;
    });
    if (seen) continue;
    ComparisonRow row{r.model, r.mode, r.batch, {}, true, ""};
    std::set<std::pair<std::uint64_t, std::uint64_t>> agree;
    for (const std::string& b : c.backends) {
      const ProfileRun* found = nullptr;
      for (const ProfileRun& o : runs) {
        if (o.backend == b && o.model == r.model && o.mode == r.mode && o.batch == r.batch) {
          found = &o;
          break;
        }
      }
      row.runs.push_back(found);
      if (!found || found->outcome.failed()) continue;
      agree.insert({parameters_of(*found), found->analysis.totals.contraction_flops});
      row.detail += fmt::format("{}{}: {} parameters, {} contraction FLOPs", row.detail.empty() ? "" : "; ", b,
                                parameters_of(*found), found->analysis.totals.contraction_flops);
    }
    row.same_model = agree.size() <= 1;
    c.rows.push_back(std::move(row));
  }
  return c;
}

}  // namespace neuralcost
