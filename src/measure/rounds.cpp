// A cell's estimate from its rounds (see rounds.hpp).
#include "neuralcost/measure/rounds.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr double kMadToSigma = 1.4826;        // MAD of a normal distribution -> its sigma
constexpr double kMedianEfficiency = 1.2533;  // sqrt(pi / 2): the median's standard error in sigmas / sqrt(n)

double robust_relative_spread(const std::vector<double>& values) {
  const double m = median(values);
  return m > 0 ? kMadToSigma * mad(values) / m : 0.0;
}

}  // namespace

MachineLevel machine_level(const std::vector<LevelPoint>& points) {
  MachineLevel level;
  std::map<std::size_t, std::vector<const LevelPoint*>> by_cell;
  std::map<std::int64_t, std::vector<const LevelPoint*>> by_tick;
  for (const LevelPoint& p : points) {
    if (!std::isfinite(p.log_median)) continue;
    by_cell[p.cell].push_back(&p);
    by_tick[p.tick].push_back(&p);
  }
  if (by_cell.size() < kLevelMinCells || by_tick.size() < 2 * kLevelBatches) return level;
  // median polish: cell + pace, alternating medians (ten sweeps settle it)
  std::map<std::size_t, double> cell;
  std::map<std::int64_t, double> pace;
  for (const auto& [c, ps] : by_cell) {
    std::vector<double> v;
    for (const LevelPoint* p : ps) v.push_back(p->log_median);
    cell[c] = median(v);
  }
  for (int sweep = 0; sweep < 10; ++sweep) {
    for (const auto& [t, ps] : by_tick) {
      std::vector<double> v;
      for (const LevelPoint* p : ps) v.push_back(p->log_median - cell[p->cell]);
      pace[t] = median(v);
    }
    for (const auto& [c, ps] : by_cell) {
      std::vector<double> v;
      for (const LevelPoint* p : ps) v.push_back(p->log_median - pace[p->tick]);
      cell[c] = median(v);
    }
  }
  struct Tick {
    double seconds, pace, rounds;
  };
  std::vector<Tick> ticks;
  for (const auto& [t, ps] : by_tick) {
    std::vector<double> when;
    for (const LevelPoint* p : ps) when.push_back(p->seconds);
    ticks.push_back({median(when), pace[t], static_cast<double>(ps.size())});
  }
  std::stable_sort(ticks.begin(), ticks.end(), [](const Tick& a, const Tick& b) { return a.seconds < b.seconds; });
  // batch means, each tick weighed by its rounds (the study's mean pace is over its rounds)
  const std::size_t n = ticks.size();
  double sum = 0;
  for (std::size_t b = 0; b < kLevelBatches; ++b) {
    double paced = 0, rounds = 0;
    for (std::size_t i = b * n / kLevelBatches; i < (b + 1) * n / kLevelBatches; ++i) {
      paced += ticks[i].pace * ticks[i].rounds;
      rounds += ticks[i].rounds;
    }
    level.batch_means.push_back(paced / rounds);
    sum += level.batch_means.back();
  }
  const double mean = sum / kLevelBatches;
  double squares = 0;
  for (double m : level.batch_means) squares += (m - mean) * (m - mean);
  const double batches = static_cast<double>(kLevelBatches);
  level.spread = std::sqrt(squares / (batches - 1)) / std::sqrt(batches);
  level.ticks = n;
  level.cells = by_cell.size();
  return level;
}

RoundsEstimate estimate_rounds(const std::vector<Round>& rounds, const MachineLevel& level) {
  if (rounds.empty()) throw Error(ErrorCode::kInvalidArgument, "a cell without rounds has no estimate");
  RoundsEstimate e;
  e.rounds = rounds.size();
  std::vector<double> medians, within;
  double passes = 0;
  for (const Round& r : rounds) {
    medians.push_back(r.summary.median);
    within.push_back(r.summary.median > 0 ? kMadToSigma * r.summary.mad / r.summary.median : 0.0);
    passes += static_cast<double>(r.summary.n);
  }
  e.median_seconds = median(medians);
  e.interval = order_statistic_median_ci(medians);
  e.rounds_interval = e.interval.interval;
  e.level_spread = level.spread;
  e.level_ticks = level.ticks;
  if (level.spread > 0 && e.median_seconds > 0 && e.interval.interval.low > 0) {
    const double m = std::log(e.median_seconds), add = kZ95 * level.spread;
    const double below = m - std::log(e.interval.interval.low), above = std::log(e.interval.interval.high) - m;
    e.interval.interval.low = std::exp(m - std::sqrt(below * below + add * add));
    e.interval.interval.high = std::exp(m + std::sqrt(above * above + add * add));
  }
  if (e.median_seconds > 0) {
    e.relative_half_width =
        std::max(e.median_seconds - e.interval.interval.low, e.interval.interval.high - e.median_seconds) /
        e.median_seconds;
  }
  e.within_round_spread = median(within);
  e.between_round_spread = robust_relative_spread(medians);
  const double passes_per_round = std::max(1.0, passes / static_cast<double>(rounds.size()));
  e.expected_between_spread = kMedianEfficiency * e.within_round_spread / std::sqrt(passes_per_round);
  e.dominant = e.between_round_spread > e.expected_between_spread ? "between rounds" : "within rounds";
  std::vector<double> machine;
  for (const Round& r : rounds) {
    if (r.machine_seconds > 0) machine.push_back(r.machine_seconds);
  }
  if (!machine.empty()) {
    e.machine_seconds = median(machine);
    e.machine_spread = robust_relative_spread(machine);
  }
  return e;
}

bool rounds_agree(const RoundsEstimate& e, const RoundOptions& o) {
  return e.interval.coverage >= 0.95 && e.relative_half_width <= o.ok_half_width;
}

std::string rounds_disagreement(const RoundsEstimate& e, const RoundOptions& o, int intra_op_threads) {
  if (rounds_agree(e, o)) return "";
  const double m = e.median_seconds;
  const double own_half = m > 0 ? std::max(m - e.rounds_interval.low, e.rounds_interval.high - m) / m : 0.0;
  if (e.interval.coverage >= 0.95 && e.level_spread > 0 && own_half <= o.ok_half_width) {
    return fmt::format(
        "the machine's level moved over the study: its rounds agree (within {:+.1f}% to {:+.1f}%), but the study's "
        "mean pace is uncertain by +-{:.1f}% (95%, batch means of the pace of {} ticks), which every cell's interval "
        "carries, and together they span {:+.1f}% to {:+.1f}%, beyond the +-{:.0f}% that `ok` allows: a rerun may "
        "land there (docs/profiling.md, \"The machine's level\"); a quieter machine narrows it",
        100 * (e.rounds_interval.low / m - 1), 100 * (e.rounds_interval.high / m - 1), 100 * kZ95 * e.level_spread,
        e.level_ticks, 100 * (e.interval.interval.low / m - 1), 100 * (e.interval.interval.high / m - 1),
        100 * o.ok_half_width);
  }
  if (e.interval.coverage < 0.95) {
    return fmt::format(
        "too few rounds: {} round(s) give an interval of {:.1f}% coverage, not 95% (6 or more do); "
        "raise --rounds",
        e.rounds, 100 * e.interval.coverage);
  }
  std::string why = fmt::format(
      "rounds disagree: the 95% interval of {} rounds spans {:+.1f}% to {:+.1f}% of the median, "
      "beyond the +-{:.0f}% that `ok` allows (spread between rounds {:.1f}%, within a round {:.1f}%: "
      "the variance lives {}); more --rounds narrow it, an idle machine more so",
      e.rounds, 100 * (e.interval.interval.low / e.median_seconds - 1),
      100 * (e.interval.interval.high / e.median_seconds - 1), 100 * o.ok_half_width, 100 * e.between_round_spread,
      100 * e.within_round_spread, e.dominant == "between rounds" ? "between windows of time" : "within a window");
  if (e.level_spread > 0) {
    why += fmt::format("; the interval carries the machine's level over the study, +-{:.1f}% (95%)",
                       100 * kZ95 * e.level_spread);
  }
  if (intra_op_threads > 1) {
    // measured on the 2-vCPU VM: two threads split a torch cell's rounds into modes 0.5x-1.5x apart
    why += fmt::format(
        "; it ran {} intra-op threads, whose wake-ups split rounds into modes on a machine with few CPUs "
        "(docs/profiling.md §2a): --threads 1 measures without them",
        intra_op_threads);
  }
  if (e.machine_spread >= 0.05) {
    why += fmt::format(
        "; the machine itself moved: its memory canary spread {:.1f}% over these rounds (docs/profiling.md §2a)",
        100 * e.machine_spread);
  }
  return why;
}

std::vector<std::size_t> seeded_order(std::size_t n, std::uint64_t seed, std::uint64_t salt) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + salt);
  // Fisher-Yates with our own draw: std::shuffle's algorithm is the library's, not fixed
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw Error(ErrorCode::kInvalidArgument, "paired values of unequal count");
  PairedRatio p;
  std::vector<double> ratios;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] > 0) ratios.push_back(b[i] / a[i]);
  }
  p.pairs = ratios.size();
  if (ratios.empty()) return p;
  p.ratio = median(ratios);
  p.interval = order_statistic_median_ci(ratios);
  return p;
}

bool one_round_a_tick(const std::vector<std::pair<int, int>>& ticks) {
  std::set<std::pair<int, int>> seen;
  for (const auto& t : ticks) {
    if (!seen.insert(t).second) return false;
  }
  return true;
}

PairedRatio paired_ratio(const std::vector<Round>& a, const std::vector<Round>& b) {
  const auto ticks = [](const std::vector<Round>& rounds) {
    std::vector<std::pair<int, int>> t;
    for (const Round& r : rounds) t.emplace_back(r.sweep, r.pass);
    return t;
  };
  if (!one_round_a_tick(ticks(a)) || !one_round_a_tick(ticks(b))) return {};
  std::map<std::pair<int, int>, double> first;
  for (const Round& r : a) first[{r.sweep, r.pass}] = r.summary.median;
  std::vector<double> x, y;
  for (const Round& r : b) {
    const auto it = first.find({r.sweep, r.pass});
    if (it == first.end()) continue;
    x.push_back(it->second);
    y.push_back(r.summary.median);
  }
  return paired_ratio(x, y);
}

bool paired_ratio_agrees(const PairedRatio& p, const RoundOptions& o) {
  if (p.pairs == 0) return true;
  const Interval& i = p.interval.interval;
  return p.interval.coverage >= 0.95 && std::max(p.ratio - i.low, i.high - p.ratio) <= o.ok_half_width * p.ratio;
}

MemoryGrowth memory_growth(const std::vector<Round>& rounds) {
  MemoryGrowth g;
  const std::size_t from = rounds.size() / 2;
  if (rounds.size() - from < 2) return g;
  double bytes = 0;
  std::size_t passes = 0, grew = 0, rounds_read = 0;
  for (std::size_t i = from; i < rounds.size(); ++i) {
    const Round& r = rounds[i];
    bytes += r.memory_growth_bytes;
    passes += r.samples_seconds.size();
    ++rounds_read;
    if (r.memory_growth_bytes > 0) ++grew;
  }
  if (passes == 0) return g;
  g.bytes_per_pass = bytes / static_cast<double>(passes);
  if (g.bytes_per_pass >= kGrowthPerPassLimit && 4 * grew >= 3 * rounds_read) {
    g.reason = fmt::format(
        "memory grows pass by pass: the model's process grew by {:.3g} MB over the {} passes of its last {} rounds "
        "({} a pass, in {} of the {} rounds): something keeps every pass's tensors (a retained graph, losses "
        "kept with their graphs); its times and peak are not a steady state's",
        bytes / 1e6, passes, rounds_read,
        g.bytes_per_pass >= 1e6 ? fmt::format("{:.3g} MB", g.bytes_per_pass / 1e6)
                                : fmt::format("{:.3g} kB", g.bytes_per_pass / 1e3),
        grew, rounds_read);
  }
  return g;
}

}  // namespace neuralcost
