// The findings of a set of results (see findings.hpp).
#include "neuralcost/report/findings.hpp"

#include <algorithm>
#include <map>

#include <tuple>
#include "neuralcost/measure/rounds.hpp"

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

/// b / a with its 95% interval: from rounds of a and b taken side by side (the same sweep and
/// pass of one study; the median of the pairs' ratios), else the ratio of the medians with the
/// widest ratio the two runs' intervals allow.
struct Ratio {
  double value = 0;
  Interval ci95;
  std::size_t pairs = 0;
  bool holds95 = false;  ///< the interval covers 95% (enough pairs, or two round-based intervals)
};
Ratio ratio_of(const ResultRun& a, const ResultRun& b) {
  Ratio r;
  r.value = a.median_seconds > 0 ? b.median_seconds / a.median_seconds : 0;
  const auto ticks = [](const ResultRun& run) {
    std::vector<std::pair<int, int>> t;
    for (const ResultRound& z : run.rounds) t.emplace_back(z.sweep, z.pass);
    return t;
  };
  std::vector<double> x, y;
  if (one_round_a_tick(ticks(a)) && one_round_a_tick(ticks(b))) {  // else no round has one partner
    std::map<std::pair<int, int>, double> first;
    for (const ResultRound& z : a.rounds) first[{z.sweep, z.pass}] = z.median_seconds;
    for (const ResultRound& z : b.rounds) {
      const auto it = first.find({z.sweep, z.pass});
      if (it == first.end()) continue;
      x.push_back(it->second);
      y.push_back(z.median_seconds);
    }
  }
  const PairedRatio p = paired_ratio(x, y);
  if (p.pairs >= 2) {
    r.value = p.ratio;  // the estimate its interval belongs to: the median of the pairs' ratios
    r.ci95 = p.interval.interval;
    r.pairs = p.pairs;
    r.holds95 = p.interval.coverage >= 0.95;
    return r;
  }
  r.ci95 = {a.ci95_high_seconds > 0 ? b.ci95_low_seconds / a.ci95_high_seconds : 0,
            a.ci95_low_seconds > 0 ? b.ci95_high_seconds / a.ci95_low_seconds : 0};
  r.holds95 = a.interval_coverage >= 0.95 && b.interval_coverage >= 0.95;
  return r;
}

}  // namespace

Findings find_findings(const ResultsFile& results) {
  Findings f;
  const std::vector<ResultRun>& runs = results.runs;
  std::vector<double> levels;
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
    if (r.level_spread > 0) levels.push_back(r.level_spread);
    (r.bound == "compute" ? f.compute_bound : f.memory_bound) += 1;
    groups[{r.model, r.batch, r.device}].push_back(i);
    if (!r.mistrusted()) {
      if (!f.best_efficiency || r.efficiency > runs[*f.best_efficiency].efficiency) f.best_efficiency = i;
      if (!f.worst_efficiency || r.efficiency < runs[*f.worst_efficiency].efficiency) f.worst_efficiency = i;
    }
  }
  if (!levels.empty()) f.level_spread = median(levels);
  // winners: the fastest configuration per group, in the order of the groups' first runs
  std::map<std::string, std::int64_t> largest_batch;  // per model, among groups with 2+ configurations
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<std::size_t> by_time = members;
    std::stable_sort(by_time.begin(), by_time.end(),
                     [&](std::size_t a, std::size_t b) { return runs[a].median_seconds < runs[b].median_seconds; });
    Winner w;
    w.model = std::get<0>(key);
    w.batch = std::get<1>(key);
    w.device = std::get<2>(key);
    w.run = by_time[0];
    w.contenders = members.size();
    w.mistrusted = runs[by_time[0]].mistrusted();
    w.runner_up = by_time[1];
    const Ratio margin = ratio_of(runs[w.run], runs[w.runner_up]);
    w.margin = margin.value;
    w.margin_ci95 = margin.ci95;
    w.pairs = margin.pairs;
    w.decided = margin.holds95 && margin.ci95.low > 1;
    f.winners.push_back(w);
    std::int64_t& b = largest_batch[std::get<0>(key)];
    b = std::max(b, std::get<1>(key));
  }
  std::stable_sort(f.winners.begin(), f.winners.end(), [](const Winner& a, const Winner& b) { return a.run < b.run; });
  std::map<Config, ConfigWins> wins;
  std::vector<std::string> counted;  // one win per model (the first device at its largest batch)
  for (const Winner& w : f.winners) {
    if (w.batch != largest_batch[w.model]) continue;
    if (std::find(counted.begin(), counted.end(), w.model) != counted.end()) continue;
    counted.push_back(w.model);
    if (w.decided) {
      ConfigWins& c = wins[{runs[w.run].backend, runs[w.run].mode}];
      c.models.push_back(w.model);
      if (w.mistrusted) c.mistrusted.push_back(w.model);
    } else {
      f.tied_models.push_back(w.model);
    }
  }
  f.models_compared = counted.size();
  for (auto& [config, c] : wins) {
    c.config = config;
    f.wins.push_back(std::move(c));
  }
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
      Speedup s;
      s.eager = e;
      s.compiled = c;
      s.speedup = eager.median_seconds / compiled.median_seconds;
      s.source = source_of(eager, compiled);
      // eager / compiled per pair of rounds: the ratio of compiled to eager, inverted
      const Ratio r = ratio_of(compiled, eager);
      s.speedup = r.value;  // the pairs' median where rounds pair: the estimate its interval belongs to
      s.ci95 = r.ci95;
      s.pairs = r.pairs;
      f.speedups.push_back(s);
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
