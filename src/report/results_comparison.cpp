// Cell-by-cell comparison of two results files (see results_comparison.hpp).
#include "neuralcost/report/results_comparison.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

/// The last run of each cell (a study may have re-run one), warning about repeats.
std::map<CellKey, const ResultRun*> last_run_per_cell(const ResultsFile& file, std::vector<CellKey>* order,
                                                      std::vector<std::string>& warnings) {
  std::map<CellKey, const ResultRun*> cells;
  for (const ResultRun& run : file.runs) {
    const CellKey key = cell_of(run);
    auto [it, inserted] = cells.try_emplace(key, &run);
    if (!inserted) {
      warnings.push_back(fmt::format("{}: {} appears again ({}): the later run is compared", run.source, cell_name(key),
                                     it->second->source));
      it->second = &run;
    } else if (order) {
      order->push_back(key);
    }
  }
  return cells;
}

void compare_cell(CellChange& c, double alpha, double min_effect) {
  if (c.before.failed() || c.after.failed()) {
    c.change = Change::kNotComparable;
    if (c.before.failed()) c.notes.push_back("before failed: " + c.before.error);
    if (c.after.failed()) c.notes.push_back("after failed: " + c.after.error);
    return;
  }
  for (const auto* run : {&c.before, &c.after}) {
    if (run->mistrusted()) {
      std::string why;
      for (const std::string& r : run->reasons) why += (why.empty() ? "" : "; ") + r;
      c.notes.push_back(fmt::format("{} is mistrusted: {}", run == &c.before ? "before" : "after", why));
    }
  }
  if (c.before.hardware_id != c.after.hardware_id) {
    c.notes.push_back(fmt::format("measured against different hardware specs ('{}' before, '{}' after)",
                                  c.before.hardware_id, c.after.hardware_id));
  }
  if (c.before.median_seconds <= 0) {
    c.change = Change::kNotComparable;
    c.notes.push_back("the median before is 0");
    return;
  }
  c.ratio = c.after.median_seconds / c.before.median_seconds;
  const auto decide = [&] {
    if (c.test->p_value >= alpha || std::abs(c.ratio - 1) < min_effect)
      c.change = Change::kNoChange;
    else
      c.change = c.ratio < 1 ? Change::kFaster : Change::kSlower;
  };
  if (c.before.rounds.size() >= 2 && c.after.rounds.size() >= 2) {
    const std::vector<double> before = c.before.round_medians(), after = c.after.round_medians();
    c.ratio_ci95 = bootstrap_median_ratio_ci95(before, after);
    c.ratio_ci_from_samples = true;
    c.tested_on = "rounds";
    c.test = mann_whitney_u(before, after);
    decide();
    if (std::min(before.size(), after.size()) < 5) {
      c.notes.push_back(
          fmt::format("{} and {} rounds: too few for the U test to find a change at alpha {} "
                      "(5 or more each)",
                      before.size(), after.size(), alpha));
    }
    return;
  }
  const bool samples = c.before.samples_seconds.size() >= 2 && c.after.samples_seconds.size() >= 2;
  if (samples) {
    c.ratio_ci95 = bootstrap_median_ratio_ci95(c.before.samples_seconds, c.after.samples_seconds);
    c.ratio_ci_from_samples = true;
    c.tested_on = "passes";
    c.test = mann_whitney_u(c.before.samples_seconds, c.after.samples_seconds);
    decide();
    c.notes.push_back(
        "no rounds in the results (an older file): tested on the passes of one window each, which "
        "understates the noise between windows (the test is overconfident)");
    return;
  }
  // no samples (a file written before they were kept): the widest ratio the two CIs allow
  c.ratio_ci95 = {c.before.ci95_high_seconds > 0 ? c.after.ci95_low_seconds / c.before.ci95_high_seconds : 0,
                  c.before.ci95_low_seconds > 0 ? c.after.ci95_high_seconds / c.before.ci95_low_seconds : 0};
  c.change = Change::kNotTested;
  c.notes.push_back("no per-sample times in the results: not tested, the interval is from the two CIs");
}

/// The machine's pace over the ticks of one file's runs (PaceDrift), when 3 or more ticks hold 8
/// rounds or more.
std::optional<PaceDrift> pace_of(const std::vector<const ResultRun*>& runs) {
  std::map<std::pair<int, int>, std::vector<double>> ticks;
  for (const ResultRun* run : runs) {
    if (run->failed() || !(run->median_seconds > 0)) continue;
    for (const ResultRound& r : run->rounds) ticks[{r.sweep, r.pass}].push_back(r.median_seconds / run->median_seconds);
  }
  std::vector<double> paces;
  for (const auto& [tick, values] : ticks) {
    if (values.size() >= 8) paces.push_back(median(values));
  }
  if (paces.size() < 3) return std::nullopt;
  std::sort(paces.begin(), paces.end());
  const auto at = [&](double q) { return paces[static_cast<std::size_t>(q * static_cast<double>(paces.size() - 1))]; };
  PaceDrift d;
  d.ticks = paces.size();
  d.low = at(0.1);
  d.high = at(0.9);
  return d;
}

/// Each group of `ratios` (its tested cells' after / before ratios) against the cells of the others.
std::vector<GroupChange> compare_group(const std::map<std::string, std::vector<double>>& ratios, double alpha,
                                       double min_effect) {
  std::vector<GroupChange> out;
  for (const auto& [name, mine] : ratios) {
    std::vector<double> others;
    for (const auto& [n, r] : ratios) {
      if (n != name) others.insert(others.end(), r.begin(), r.end());
    }
    GroupChange g;
    g.name = name;
    g.cells = mine.size();
    g.other_cells = others.size();
    if (mine.size() >= 3 && others.size() >= 3) {
      g.ratio = median(mine) / median(others);
      g.ratio_ci95 = bootstrap_median_ratio_ci95(others, mine);
      g.test = mann_whitney_u(others, mine);
      g.change = g.test->p_value >= alpha || std::abs(g.ratio - 1) < min_effect ? Change::kNoChange
                 : g.ratio < 1                                                  ? Change::kFaster
                                                                                : Change::kSlower;
    }
    out.push_back(std::move(g));
  }
  return out;
}

/// Each backend's cells against the other backends', then each mode's against the other modes'
/// (GroupChange), where two or more backends (modes) have cells.
std::vector<GroupChange> compare_groups(const std::vector<CellChange>& cells, double alpha, double min_effect) {
  std::vector<GroupChange> out;
  for (const char* dimension : {"backend", "mode"}) {
    std::map<std::string, std::vector<double>> ratios;  // per group: its tested cells' ratios
    for (const CellChange& c : cells) {
      if (c.test && c.ratio > 0)
        ratios[dimension == std::string("mode") ? c.cell.mode : c.cell.backend].push_back(c.ratio);
    }
    if (ratios.size() < 2) continue;
    for (GroupChange& g : compare_group(ratios, alpha, min_effect)) {
      g.dimension = dimension;
      out.push_back(std::move(g));
    }
  }
  return out;
}

/// The between-study deviation of the cells (StudyEffect), and each tested cell's change tested
/// against it: p from |log ratio| / sqrt(own variance + between²) (normal), its interval widened to
/// match, and its change no longer significant where that p is not below alpha.
std::optional<StudyEffect> account_for_studies(std::vector<CellChange>& cells, double alpha, double min_effect) {
  constexpr double z95 = kZ95;
  std::vector<CellChange*> tested;
  std::vector<double> logs, own;
  for (CellChange& c : cells) {
    if (!c.test || !(c.ratio > 0) || !(c.ratio_ci95.low > 0) || !(c.ratio_ci95.high >= c.ratio_ci95.low)) continue;
    tested.push_back(&c);
    logs.push_back(std::log(c.ratio));
    own.push_back((std::log(c.ratio_ci95.high) - std::log(c.ratio_ci95.low)) / (2 * z95));
  }
  if (tested.size() < 10) return std::nullopt;
  StudyEffect e;
  e.cells = tested.size();
  const double m = median(logs);
  std::vector<double> deviations;
  for (double d : logs) deviations.push_back(std::abs(d - m));
  e.shift = std::exp(m) - 1;
  e.spread = 1.4826 * median(deviations);
  e.within = median(own);
  std::vector<double> level_before, level_after;
  for (const CellChange* c : tested) {
    level_before.push_back(c->before.level_spread);
    level_after.push_back(c->after.level_spread);
  }
  e.level_before = median(level_before);
  e.level_after = median(level_after);
  const double of_median = 1.2533 * e.spread / std::sqrt(static_cast<double>(tested.size()));
  e.shift_sd = std::sqrt(e.level_before * e.level_before + e.level_after * e.level_after + of_median * of_median);
  e.shift_p_value = e.shift_sd > 0 ? std::erfc(std::abs(m) / e.shift_sd / std::sqrt(2.0)) : (m == 0 ? 1.0 : 0.0);
  e.shift_ci95 = {std::exp(m - z95 * e.shift_sd), std::exp(m + z95 * e.shift_sd)};
  // the between-study sd tau: the smallest at which the cells' deviations from the shift, each over
  // sqrt(own² + tau²), have a robust sd (1.4826 MAD) of at most 1 (each cell weighed by its own
  // noise: a robust random-effects estimate); 0 when the cells' own intervals already explain them
  const auto robust_sd = [&](double tau) {
    std::vector<double> z;
    for (std::size_t i = 0; i < logs.size(); ++i) {
      const double sd = std::sqrt(own[i] * own[i] + tau * tau);
      z.push_back(sd > 0 ? std::abs(logs[i] - m) / sd : 0);
    }
    return 1.4826 * median(z);
  };
  if (robust_sd(0) > 1) {
    double low = 0, high = std::max(e.spread, 1e-6);
    while (robust_sd(high) > 1) high *= 2;
    for (int i = 0; i < 60; ++i) {
      const double mid = (low + high) / 2;
      (robust_sd(mid) > 1 ? low : high) = mid;
    }
    e.between = high;
  }
  for (std::size_t i = 0; i < tested.size(); ++i) {
    CellChange& c = *tested[i];
    const double sd = std::sqrt(own[i] * own[i] + e.between * e.between);
    if (!(sd > 0)) continue;
    c.relative = std::exp(logs[i] - m);
    c.study_p_value = std::erfc(std::abs(logs[i] - m) / sd / std::sqrt(2.0));
    c.ratio_ci95.low = std::min(c.ratio_ci95.low, std::exp(logs[i] - z95 * sd));
    c.ratio_ci95.high = std::max(c.ratio_ci95.high, std::exp(logs[i] + z95 * sd));
    if (c.change != Change::kNotTested && c.change != Change::kNotComparable) {
      c.change = c.p_value() >= alpha || std::abs(c.relative - 1) < min_effect ? Change::kNoChange
                 : c.relative < 1                                              ? Change::kFaster
                                                                               : Change::kSlower;
      if (c.change != Change::kNoChange) {
        c.notes.push_back(fmt::format("{:+.1f}% relative to the files' common shift of {:+.1f}%",
                                      100 * (c.relative - 1), 100 * e.shift));
      }
    }
  }
  return e;
}

/// Holm-Bonferroni at `alpha` over the p values `p`: the indices of the significant ones.
std::set<std::size_t> holm(const std::vector<double>& p, double alpha) {
  std::vector<std::size_t> order(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] < p[b]; });
  std::set<std::size_t> significant;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (p[order[k]] >= alpha / static_cast<double>(order.size() - k)) break;
    significant.insert(order[k]);
  }
  return significant;
}

/// How much a cell changed relative to the others (over the common shift); a backend, against the others.
double changed_by(const CellChange& c) { return c.relative; }
double changed_by(const GroupChange& g) { return g.ratio; }

/// The items (cells or groups) slower by more than `threshold` among those Holm finds
/// significant at `alpha` over all the tested ones.
template <typename T>
std::vector<const T*> significantly_slower(const std::vector<T>& items, double alpha, double threshold) {
  std::vector<const T*> tested;
  std::vector<double> p;
  for (const T& x : items) {
    if (!x.test) continue;
    tested.push_back(&x);
    p.push_back(x.p_value());
  }
  std::vector<const T*> slower;
  for (std::size_t i : holm(p, alpha)) {
    const T& x = *tested[i];
    if (x.change == Change::kSlower && changed_by(x) > 1 + threshold) slower.push_back(&x);
  }
  return slower;
}

}  // namespace

std::string_view change_name(Change change) {
  switch (change) {
    case Change::kFaster: return "faster";
    case Change::kSlower: return "slower";
    case Change::kNoChange: return "no significant change";
    case Change::kNotTested: return "not tested";
    case Change::kNotComparable: return "not comparable";
  }
  return "?";
}

ResultsComparison compare_results(const ResultsFile& before, const ResultsFile& after, double alpha,
                                  double min_effect) {
  if (!(alpha > 0 && alpha < 1)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("significance level {} must be between 0 and 1", alpha));
  }
  if (!(min_effect >= 0 && min_effect < 1)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("minimum effect {}% must be at least 0 and below 100%", 100 * min_effect));
  }
  ResultsComparison out;
  out.before_path = before.path;
  out.after_path = after.path;
  out.alpha = alpha;
  out.min_effect = min_effect;
  std::vector<CellKey> before_order, after_order;
  const auto before_cells = last_run_per_cell(before, &before_order, out.warnings);
  const auto after_cells = last_run_per_cell(after, &after_order, out.warnings);
  for (const CellKey& key : after_order) {
    const auto b = before_cells.find(key);
    if (b == before_cells.end()) {
      out.only_after.push_back(key);
      continue;
    }
    CellChange c;
    c.cell = key;
    c.before = *b->second;
    c.after = *after_cells.at(key);
    compare_cell(c, alpha, min_effect);
    c.relative = c.ratio;
    out.cells.push_back(std::move(c));
  }
  for (const CellKey& key : before_order) {
    if (!after_cells.count(key)) out.only_before.push_back(key);
  }
  out.studies = account_for_studies(out.cells, alpha, min_effect);
  out.groups = compare_groups(out.cells, alpha, min_effect);
  // the machine's pace within each file, from the cells' rounds: a move larger than the cells'
  // intervals makes a cell's change between the files the machine's as much as the code's
  std::vector<const ResultRun*> before_runs, after_runs;
  for (const CellChange& c : out.cells) {
    before_runs.push_back(&c.before);
    after_runs.push_back(&c.after);
  }
  out.before_pace = pace_of(before_runs);
  out.after_pace = pace_of(after_runs);
  for (const auto& [pace, which] : {std::pair{out.before_pace, "before"}, std::pair{out.after_pace, "after"}}) {
    if (!pace || pace->spread() < kPaceWarningSpread) continue;
    out.warnings.push_back(fmt::format(
        "the machine's pace moved within the {} file: in its slow ticks every cell ran {:.0f}% slower than in its "
        "fast ones (10th to 90th percentile over {} ticks of the median round / estimate); a cell's estimate there "
        "mixes the two, and its change between the files may be the machine's, not the code's (docs/profiling.md §2a)",
        which, 100 * pace->spread(), pace->ticks));
  }
  // the machine's own pace in each file: a change of the host between the two runs moves every
  // cell with it, and a cell's test cannot tell it from a change of the code. Two canaries: the
  // memory's (a 64 MiB stream) and the cores' (a chain of multiply-adds)
  const auto change_of = [&](double ResultRound::*field) -> std::optional<MachineChange> {
    std::vector<double> before, after;
    for (const CellChange& c : out.cells) {
      for (const ResultRound& r : c.before.rounds) {
        if (r.*field > 0) before.push_back(r.*field);
      }
      for (const ResultRound& r : c.after.rounds) {
        if (r.*field > 0) after.push_back(r.*field);
      }
    }
    if (before.empty() || after.empty()) return std::nullopt;
    MachineChange m;
    m.before_seconds = median(before);
    m.after_seconds = median(after);
    m.before_rounds = before.size();
    m.after_rounds = after.size();
    m.change = m.before_seconds > 0 ? m.after_seconds / m.before_seconds - 1 : 0;
    return m;
  };
  out.machine = change_of(&ResultRound::machine_seconds);
  out.cpu = change_of(&ResultRound::cpu_canary_seconds);
  for (const auto& [m, what] : {std::pair{out.machine, "memory canary (a 64 MiB stream read before every round)"},
                                std::pair{out.cpu, "CPU canary (a chain of multiply-adds before every round)"}}) {
    if (!m || std::abs(m->change) < min_effect) continue;
    out.warnings.push_back(fmt::format(
        "the machine itself changed: its {} took {:+.1f}% in the after file (median of {} rounds, {} before); "
        "cells {} by about that much may be the machine's, not the code's, and a gate can fail on it "
        "(docs/profiling.md §2a)",
        what, 100 * m->change, m->after_rounds, m->before_rounds, m->change > 0 ? "slower" : "faster"));
  }
  return out;
}

std::vector<const CellChange*> slower_than(const ResultsComparison& comparison, double threshold) {
  // Holm-Bonferroni over every tested cell at alpha / 2 (the other half is the backends'): the
  // family-wise chance that an A/A fails the gate stays at most alpha, where one U test per cell
  // at alpha would fail it in most A/A runs of 80 cells
  return significantly_slower(comparison.cells, comparison.alpha / 2, threshold);
}

namespace {

/// The groups' half of the gate: Holm at alpha / 2 over the tested backends, the tested modes and
/// the common shift. The significant ones: indices into groups, and groups.size() for the shift.
std::set<std::size_t> backend_family(const ResultsComparison& comparison) {
  std::vector<double> p;
  std::vector<std::vector<std::size_t>> which;             // the groups (or the shift) each test decides
  std::map<std::string, std::vector<std::size_t>> tested;  // per dimension
  for (std::size_t i = 0; i < comparison.groups.size(); ++i) {
    if (comparison.groups[i].test) tested[comparison.groups[i].dimension].push_back(i);
  }
  for (const auto& [dimension, groups] : tested) {
    // two groups (eager and compiled): each against the other is one test, counted once
    if (groups.size() == 2) {
      p.push_back(comparison.groups[groups[0]].p_value());
      which.push_back(groups);
      continue;
    }
    for (std::size_t i : groups) {
      p.push_back(comparison.groups[i].p_value());
      which.push_back({i});
    }
  }
  if (comparison.studies) {
    p.push_back(comparison.studies->shift_p_value);
    which.push_back({comparison.groups.size()});
  }
  std::set<std::size_t> significant;
  for (std::size_t k : holm(p, comparison.alpha / 2)) significant.insert(which[k].begin(), which[k].end());
  return significant;
}

}  // namespace

std::vector<const GroupChange*> groups_slower_than(const ResultsComparison& comparison, double threshold) {
  const std::set<std::size_t> significant = backend_family(comparison);
  std::vector<const GroupChange*> slower;
  for (std::size_t i = 0; i < comparison.groups.size(); ++i) {
    const GroupChange& g = comparison.groups[i];
    if (g.change == Change::kSlower && g.ratio > 1 + threshold && significant.count(i)) slower.push_back(&g);
  }
  return slower;
}

bool shift_slower_than(const ResultsComparison& comparison, double threshold) {
  return comparison.studies && comparison.studies->shift > threshold &&
         backend_family(comparison).count(comparison.groups.size()) > 0;
}

std::size_t tested_cells(const ResultsComparison& comparison) {
  return static_cast<std::size_t>(std::count_if(comparison.cells.begin(), comparison.cells.end(),
                                                [](const CellChange& c) { return c.test.has_value(); }));
}

}  // namespace neuralcost
