// The findings of a set of results (see findings.hpp).
#include "neuralcost/report/findings.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace neuralcost {
namespace {

double layer_seconds(const ResultRun& r) {
  double s = 0;
  for (const ResultLayer& l : r.layers) s += l.measured_seconds;
  return s;
}

SpeedupSource source_of(const ResultRun& eager, const ResultRun& compiled) {
  if (eager.layers.empty() || compiled.layers.empty()) return SpeedupSource::kUnknown;
  // the layers and the unattributed time add up to each run's median: compare the two parts
  const double outside = eager.unattributed_seconds - compiled.unattributed_seconds;
  const double inside = layer_seconds(eager) - layer_seconds(compiled);
  return std::abs(outside) >= std::abs(inside) ? SpeedupSource::kDispatch : SpeedupSource::kLayers;
}

}  // namespace

Findings find_findings(const ResultsFile& results) {
  Findings f;
  const std::vector<ResultRun>& runs = results.runs;
  f.runs = runs.size();
  // cells per (model, batch, device): the measured runs of every configuration
  std::map<std::tuple<std::string, std::int64_t, std::string>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ResultRun& r = runs[i];
    if (r.failed()) {
      ++f.failed;
      continue;
    }
    (r.mistrusted() ? f.mistrusted : f.ok) += 1;
    (r.bound == "compute" ? f.compute_bound : f.memory_bound) += 1;
    groups[{r.model, r.batch, r.device}].push_back(i);
    if (!r.mistrusted()) {
      if (!f.best_efficiency || r.efficiency > runs[*f.best_efficiency].efficiency) f.best_efficiency = i;
      if (!f.worst_efficiency || r.efficiency < runs[*f.worst_efficiency].efficiency) f.worst_efficiency = i;
    }
  }
  // winners: the fastest configuration per group, in the order of the groups' first runs
  std::map<std::string, std::int64_t> largest_batch;  // per model, among groups with 2+ configurations
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::size_t best = members.front();
    for (std::size_t i : members) {
      if (runs[i].median_seconds < runs[best].median_seconds) best = i;
    }
    f.winners.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), best, members.size(), runs[best].mistrusted()});
    std::int64_t& b = largest_batch[std::get<0>(key)];
    b = std::max(b, std::get<1>(key));
  }
  std::stable_sort(f.winners.begin(), f.winners.end(),
                   [](const Winner& a, const Winner& b) { return a.run < b.run; });
  std::map<Config, std::vector<std::string>> wins;
  std::vector<std::string> counted;  // one win per model (the first device at its largest batch)
  for (const Winner& w : f.winners) {
    if (w.batch != largest_batch[w.model]) continue;
    if (std::find(counted.begin(), counted.end(), w.model) != counted.end()) continue;
    counted.push_back(w.model);
    wins[{runs[w.run].backend, runs[w.run].mode}].push_back(w.model);
  }
  f.models_compared = counted.size();
  for (auto& [config, models] : wins) f.wins.push_back({config, models});
  std::stable_sort(f.wins.begin(), f.wins.end(),
                   [](const ConfigWins& a, const ConfigWins& b) { return a.models.size() > b.models.size(); });
  // compiled over eager: each non-eager run against the eager run of its cell
  for (std::size_t c = 0; c < runs.size(); ++c) {
    const ResultRun& compiled = runs[c];
    if (compiled.failed() || compiled.mode == "eager" || compiled.median_seconds <= 0) continue;
    for (std::size_t e = 0; e < runs.size(); ++e) {
      const ResultRun& eager = runs[e];
      if (eager.failed() || eager.mode != "eager" || eager.model != compiled.model ||
          eager.backend != compiled.backend || eager.batch != compiled.batch || eager.device != compiled.device) {
        continue;
      }
      f.speedups.push_back({e, c, eager.median_seconds / compiled.median_seconds, source_of(eager, compiled)});
    }
  }
  // the largest among pairs whose runs are both trusted; among all only when there are none
  for (bool trusted_only : {true, false}) {
    for (std::size_t i = 0; i < f.speedups.size(); ++i) {
      const Speedup& s = f.speedups[i];
      if (trusted_only && (runs[s.eager].mistrusted() || runs[s.compiled].mistrusted())) continue;
      if (!f.largest_speedup || s.speedup > f.speedups[*f.largest_speedup].speedup) f.largest_speedup = i;
    }
    if (f.largest_speedup) break;
  }
  return f;
}

}  // namespace neuralcost
