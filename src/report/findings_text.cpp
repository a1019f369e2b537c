// Findings in sentences (see findings_text.hpp).
#include "report/findings_text.hpp"

#include <cmath>

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/statistics.hpp"
#include "report/si_format.hpp"

namespace neuralcost::report {
namespace {

std::string plural(std::size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

double layer_seconds(const ResultRun& r) {
  double s = 0;
  for (const ResultLayer& l : r.layers) s += l.measured_seconds;
  return s;
}

std::string mistrust_mark(const ResultRun& r) { return r.mistrusted() ? " (mistrusted)" : ""; }

std::string speedup_sentence(const ResultsFile& results, const Findings& f) {
  const Speedup& s = f.speedups[*f.largest_speedup];
  const ResultRun& e = results.runs[s.eager];
  const ResultRun& c = results.runs[s.compiled];
  std::string out;
  if (s.speedup < 1) {
    return fmt::format(
        "Compiling made every cell slower: the best compiled mode, {} on {}, batch {}, runs at {:.2f}x "
        "eager ({} against {}).",
        config_name(c), c.model, c.batch, s.speedup, si(c.median_seconds, "s"), si(e.median_seconds, "s"));
  }
  out = fmt::format(
      "The largest compiled-over-eager speedup is {} on {}, batch {}: {:.2f}x, 95% CI {:.2f}x to {:.2f}x "
      "{} ({} eager, {} {}){}.",
      config_name(c), c.model, c.batch, s.speedup, s.ci95.low, s.ci95.high,
      s.pairs > 0 ? fmt::format("from {} rounds taken side by side", s.pairs)
                  : std::string("from the two runs' intervals"),
      si(e.median_seconds, "s"), si(c.median_seconds, "s"), c.mode,
      c.mistrusted() || e.mistrusted() ? ", with a mistrusted run" : "");
  const std::string flops = e.flops == c.flops
                                ? fmt::format("the same {} per pass", si(static_cast<double>(c.flops), "FLOP"))
                                : fmt::format("{} against {} per pass", si(static_cast<double>(c.flops), "FLOP"),
                                              si(static_cast<double>(e.flops), "FLOP"));
  const std::string rate = fmt::format("achieved {} against {} eager, on {}", si(c.achieved_flops_per_second, "FLOP/s"),
                                       si(e.achieved_flops_per_second, "FLOP/s"), flops);
  switch (s.source) {
    case SpeedupSource::kDispatch:
      out += fmt::format(
          " Most of the time saved was dispatch and framework time outside the layers (unattributed {} "
          "-> {}), not faster math: the layers took {} -> {}; {}.",
          si(e.unattributed_seconds, "s"), si(c.unattributed_seconds, "s"), si(layer_seconds(e), "s"),
          si(layer_seconds(c), "s"), rate);
      break;
    case SpeedupSource::kLayers:
      out += fmt::format(
          " Most of it came from the layers themselves ({} -> {}: faster or fused kernels), less from "
          "dispatch (unattributed {} -> {}); {}.",
          si(layer_seconds(e), "s"), si(layer_seconds(c), "s"), si(e.unattributed_seconds, "s"),
          si(c.unattributed_seconds, "s"), rate);
      break;
    case SpeedupSource::kUnknown:
      out += fmt::format(
          " Whether dispatch or math got faster needs per-layer times of both runs, which {} not have "
          "(compiled programs are timed whole); {}.",
          e.layers.empty() && c.layers.empty() ? "they do"
          : e.layers.empty()                   ? "the eager run does"
                                               : "the compiled run does",
          rate);
      break;
  }
  // slower only where the interval says so; below 1 inside an interval that holds 1: a tie
  std::size_t slower = 0, tied = 0;
  const Speedup* worst = nullptr;
  for (const Speedup& x : f.speedups) {
    if (x.speedup >= 1) continue;
    if (x.ci95.high < 1) {
      ++slower;
      if (!worst || x.speedup < worst->speedup) worst = &x;
    } else {
      ++tied;
    }
  }
  if (slower > 0) {
    const ResultRun& w = results.runs[worst->compiled];
    out += fmt::format(
        " Compiling was slower than eager in {} of {} (worst: {} on {}, batch {}, {:.2f}x, 95% CI "
        "{:.2f}x to {:.2f}x).",
        slower, plural(f.speedups.size(), "cell", "cells"), config_name(w), w.model, w.batch, worst->speedup,
        worst->ci95.low, worst->ci95.high);
  }
  if (tied > 0) {
    out += fmt::format(" In {} of {} compiled and eager are a tie within the 95% interval.", tied,
                       plural(f.speedups.size(), "cell", "cells"));
  }
  return out;
}

}  // namespace

std::string run_name(const ResultRun& r) { return cell_name(cell_of(r)); }

std::string config_name(const ResultRun& r) { return r.backend + " " + r.mode; }

std::string money(double value, const std::string& currency) { return fmt::format("{:.3g} {}", value, currency); }

std::string money_interval(const Money& m, const std::string& currency) {
  return fmt::format("{:.3g} ({:.3g} - {:.3g}) {}", m.value, m.low, m.high, currency);
}

std::vector<std::string> findings_sentences(const ReportInput& input) {
  const ResultsFile& results = *input.results;
  const Findings& f = input.findings;
  std::vector<std::string> out;
  out.push_back(
      fmt::format("{}: {} ok, {} mistrusted, {} failed.", plural(f.runs, "run", "runs"), f.ok, f.mistrusted, f.failed));
  if (f.models_compared > 0 && !f.wins.empty()) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < f.wins.size(); ++i) {
      const ConfigWins& w = f.wins[i];
      parts.push_back(fmt::format(
          "{} {} is fastest on {} of {} ({}{})", w.config.backend, w.config.mode, w.models.size(),
          plural(f.models_compared, "model", "models"), list(w.models),
          w.mistrusted.empty() ? std::string()
                               : fmt::format("; its run mistrusted on {}, see its verdict", list(w.mistrusted))));
    }
    out.push_back(list(parts) +
                  ", each model at its largest batch (a win: the runner-up's 95% interval lies "
                  "above the winner's time).");
  }
  if (!f.tied_models.empty()) {
    out.push_back(fmt::format("No winner on {} of {} ({}): the fastest two are a tie within their 95% interval.",
                              f.tied_models.size(), plural(f.models_compared, "model", "models"), list(f.tied_models)));
  }
  if (f.largest_speedup) out.push_back(speedup_sentence(results, f));
  const std::size_t measured = f.ok + f.mistrusted;
  if (measured > 0) {
    out.push_back(
        fmt::format("{} of {} measured runs are memory-bound (their lower bound is set by the bytes they "
                    "move, not their FLOPs){}.",
                    f.memory_bound, measured,
                    f.memory_bound == measured ? ": fewer FLOPs would not help them, fusion and fewer "
                                                 "materialised tensors would"
                                               : ""));
  }
  if (f.best_efficiency && f.worst_efficiency) {
    const ResultRun& b = results.runs[*f.best_efficiency];
    const ResultRun& w = results.runs[*f.worst_efficiency];
    out.push_back(fmt::format("The best roofline efficiency is {} ({}, {}-bound); the worst is {} ({}, {}-bound).",
                              percent(b.efficiency), run_name(b), b.bound, percent(w.efficiency), run_name(w),
                              w.bound));
  }
  if (f.mistrusted > 0) {
    out.push_back(
        fmt::format("{} mistrusted: {} figures are shown, marked, but cannot be believed (the reasons are in "
                    "the table of runs).",
                    f.mistrusted == 1 ? "1 run is" : fmt::format("{} runs are", f.mistrusted),
                    f.mistrusted == 1 ? "its" : "their"));
  }
  if (f.level_spread > 0) {
    out.push_back(fmt::format(
        "Every interval carries the machine's level over this study, ±{:.1f}% (95%): how far the study's mean pace "
        "may lie from the machine's, which a rerun draws again (the standard error of the study's mean pace, from "
        "batch means of its ticks; docs/profiling.md §2a).",
        100 * kZ95 * f.level_spread));
  }
  if (f.failed > 0) out.push_back(fmt::format("{} failed (listed below).", plural(f.failed, "cell", "cells")));
  if (input.cost) {
    const CostReport& cost = *input.cost;
    std::optional<std::size_t> cheapest;
    std::optional<std::pair<std::size_t, LayerCost>> costliest_layer;
    for (std::size_t i = 0; i < cost.runs.size(); ++i) {
      if (!cost.runs[i]) continue;
      if (!cheapest || cost.runs[i]->per_sample.value < cost.runs[*cheapest]->per_sample.value) cheapest = i;
      if (!cost.runs[i]->layers.empty()) {
        const LayerCost& top = cost.runs[i]->layers.front();
        if (!costliest_layer ||
            top.above_bound_per_million_samples > costliest_layer->second.above_bound_per_million_samples) {
          costliest_layer = {{i, top}};
        }
      }
    }
    if (cheapest) {
      const ResultRun& r = results.runs[*cheapest];
      const RunCost& c = *cost.runs[*cheapest];
      out.push_back(fmt::format("At {} per hour, the cheapest run per sample is {}: {} per million samples{}.",
                                money(c.price_per_hour, cost.currency), run_name(r),
                                money_interval(c.per_million_samples, cost.currency), mistrust_mark(r)));
    }
    if (costliest_layer) {
      const ResultRun& r = results.runs[costliest_layer->first];
      const ResultLayer& l = r.layers[costliest_layer->second.layer];
      out.push_back(
          fmt::format("The layer that costs most to leave as it is: {} ({}) of {}, {} per million samples "
                      "above its roofline lower bound ({} measured against a bound of {}).",
                      l.label(), l.kind.empty() ? "no op records" : l.kind, run_name(r),
                      money(costliest_layer->second.above_bound_per_million_samples, cost.currency),
                      si(l.measured_seconds, "s"), si(l.lower_bound_seconds, "s")));
    }
  }
  if (input.comparison) out.push_back(comparison_sentence(*input.comparison));
  return out;
}

std::string comparison_sentence(const ResultsComparison& c) {
  std::size_t faster = 0, slower = 0, same = 0, untested = 0, incomparable = 0;
  const CellChange* biggest = nullptr;
  for (const CellChange& x : c.cells) {
    switch (x.change) {
      case Change::kFaster: ++faster; break;
      case Change::kSlower: ++slower; break;
      case Change::kNoChange: ++same; break;
      case Change::kNotTested: ++untested; break;
      case Change::kNotComparable: ++incomparable; break;
    }
    if ((x.change == Change::kFaster || x.change == Change::kSlower) &&
        (!biggest || std::abs(std::log(x.ratio)) > std::abs(std::log(biggest->ratio)))) {
      biggest = &x;
    }
  }
  const bool on_passes =
      std::any_of(c.cells.begin(), c.cells.end(), [](const CellChange& x) { return x.tested_on == "passes"; });
  std::string out = fmt::format(
      "Against {}, {} {}: {} got faster and {} slower (two-sided Mann-Whitney U on round "
      "medians{}, p < {}, by at least {:.0f}%), {} show no significant change",
      c.before_path, plural(c.cells.size(), "cell", "cells"), c.cells.size() == 1 ? "matches" : "match", faster, slower,
      on_passes ? ", or passes where a file has no rounds" : "", c.alpha, 100 * c.min_effect, same);
  if (untested > 0) out += fmt::format(", {} could not be tested (no per-sample times)", untested);
  if (incomparable > 0) out += fmt::format(", {} failed on one side", incomparable);
  out += ".";
  if (biggest) {
    out += fmt::format(" The largest significant change: {} got {}, {:+.1f}% (95% CI {:+.1f}% to {:+.1f}%).",
                       cell_name(biggest->cell), biggest->ratio < 1 ? "faster" : "slower", (biggest->ratio - 1) * 100,
                       (biggest->ratio_ci95.low - 1) * 100, (biggest->ratio_ci95.high - 1) * 100);
  }
  if (!c.only_before.empty() || !c.only_after.empty()) {
    out += fmt::format(" {} only before, {} only after.", plural(c.only_before.size(), "cell", "cells"),
                       plural(c.only_after.size(), "cell", "cells"));
  }
  return out;
}

}  // namespace neuralcost::report
