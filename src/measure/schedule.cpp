// The interleaved schedule of rounds (see schedule.hpp).
#include "neuralcost/measure/schedule.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "measure/canary.hpp"
#include "measure/cell_session.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

/// The cells of each (model, batch), in the order their first cell appears.
std::vector<std::vector<std::size_t>> group_cells(const std::vector<CellPlan>& cells) {
  std::map<std::pair<std::string, std::int64_t>, std::size_t> index;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto key = std::make_pair(cells[i].request.model, cells[i].request.batch);
    const auto [it, added] = index.try_emplace(key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

/// Rounds each preparation takes: `rounds` split over `processes`, the first ones one more.
int quota(const RoundOptions& o, int process) {
  const int p = std::clamp(o.processes, 1, std::max(1, o.rounds));
  return o.rounds / p + (process < o.rounds % p ? 1 : 0);
}

class Schedule {
 public:
  Schedule(const std::vector<CellPlan>& cells, const HardwareSpec& hw, const ProfileOptions& options,
           ScheduleHooks hooks)
      : hw_(hw), options_(options), sweep_options_(options), hooks_(std::move(hooks)), start_(Clock::now()) {
    sessions_.resize(cells.size());
    if (options.run.device.is_cpu()) canary_ = std::make_unique<detail::MachineCanary>();
    for (std::size_t i = 0; i < cells.size(); ++i) {
      sessions_[i].plan = cells[i];
      ProfileRun& r = sessions_[i].run;
      r.backend = std::string(cells[i].backend->name());
      r.mode = cells[i].mode;
      r.model = cells[i].request.model;
      r.batch = cells[i].request.batch;
      r.device = options.run.device.name();
      if (i < hooks_.done.size()) sessions_[i].rounds = hooks_.done[i];
    }
    finished_.resize(cells.size());
    preparation_seconds_.resize(cells.size(), 0.0);
    first_tick_.resize(cells.size(), 0);
    quota_.resize(cells.size(), 0);
    taken_.resize(cells.size(), 0);
    processes_ = std::clamp(options.rounds.processes, 1, std::max(1, options.rounds.rounds));
  }

  std::vector<ProfileRun> run(const std::vector<std::vector<std::size_t>>& groups) {
    partners_.assign(sessions_.size(), {});
    group_of_.assign(sessions_.size(), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t i : groups[g]) group_of_[i] = g;
    }
    for (const std::vector<std::size_t>& group : groups) {
      for (std::size_t i : group) {
        for (std::size_t j : group) {
          if (j != i && sessions_[j].run.backend == sessions_[i].run.backend) partners_[i].push_back(j);
        }
      }
    }
    // the regular sweeps, then one more for the cells whose rounds disagree, in a fresh preparation
    for (int sweep = 0; sweep <= processes_ && !interrupted(); ++sweep) run_sweep(groups, sweep);
    if (interrupted() && hooks_.finish_partial_cells) {
      for (std::size_t i = 0; i < sessions_.size(); ++i) {
        CellSession& s = sessions_[i];
        if (!finished_[i] && s.opened && !s.rounds.empty()) {
          finish(i, fmt::format("interrupted by {} after {} of {} rounds", interrupt_name(), s.rounds.size(),
                                options_.rounds.rounds));
        }
      }
    }
    for (CellSession& s : sessions_) close_model(s);
    std::vector<ProfileRun> runs;
    for (auto& r : finished_) {
      if (r) runs.push_back(std::move(*r));
    }
    return runs;
  }

 private:
  /// Rounds the cell still needs from preparation `process` (the last one takes what earlier
  /// ones could not: a failed preparation, rounds of a resumed file).
  int needed(const CellSession& s, int process) const {
    int want = 0;
    for (int p = 0; p <= process; ++p) want += quota(options_.rounds, p);
    if (process == processes_ - 1) want = options_.rounds.rounds;
    return std::max(0, want - static_cast<int>(s.rounds.size()));
  }

  /// One sweep: every cell it measures is prepared, group by group in a seeded order, and stays
  /// prepared until the sweep ends (a worker's models share one process per framework and mode).
  /// After each group is prepared comes a tick: a pass over the prepared cells that are due, each
  /// group's cells side by side in a seeded order. A cell's rounds are due at ticks spread evenly
  /// from its preparation to the sweep's last planned tick, so each cell's rounds sample the
  /// machine across the whole sweep, not one window of it; ticks go on until no cell needs more.
  void run_sweep(const std::vector<std::vector<std::size_t>>& groups, int sweep) {
    const bool extra = sweep == processes_;
    const bool last = sweep == processes_ - 1;
    sweep_options_.run.process_pool = fmt::format("sweep {}", sweep);
    generation_ = 0;
    std::vector<std::vector<std::size_t>> members(groups.size());
    int most = 0;
    std::size_t active = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t i : groups[g]) {
        const CellSession& s = sessions_[i];
        if (finished_[i] || s.failed) continue;
        const bool wanted = extra ? wants_more(i) : needed(s, sweep) > 0 || (last && !s.opened);
        if (!wanted) continue;
        members[g].push_back(i);
        quota_[i] = extra ? options_.rounds.max_rounds - static_cast<int>(s.rounds.size()) : needed(s, sweep);
        taken_[i] = 0;
        most = std::max(most, quota_[i]);
      }
      if (!members[g].empty()) ++active;
    }
    // Training: one group prepared at a time, as a step's measured peak is that of the process
    // (an in-process backend's allocator, a worker's) and other prepared models would add to it.
    const bool one_group_at_a_time = sweep_options_.run.train.has_value();
    planned_ticks_ = one_group_at_a_time ? most : static_cast<int>(active) + std::max(0, most - 1);
    open_.clear();
    int tick = 0;
    const std::vector<std::size_t> order = seeded_order(groups.size(), options_.rounds.seed, 1000003ULL * sweep);
    auto close_open = [&] {
      while (!interrupted() && take_pass(groups, sweep, tick, extra)) ++tick;
      for (std::size_t i : open_) close_model(sessions_[i]);
      open_.clear();
    };
    for (std::size_t g : order) {
      if (members[g].empty() || interrupted()) continue;
      for (std::size_t i : members[g]) {
        if (interrupted()) break;
        if (extra && !wants_more(i)) continue;  // the time left no longer holds its preparation
        if (prepare(i)) {
          first_tick_[i] = one_group_at_a_time ? 0 : tick;
          open_.push_back(i);
        }
      }
      if (one_group_at_a_time) {
        tick = 0;  // a group's own ticks: its rounds pair within it
        close_open();
      } else {
        take_pass(groups, sweep, tick++, extra);
      }
    }
    close_open();
    if (interrupted()) return;
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
      const CellSession& s = sessions_[i];
      if (finished_[i] || s.failed || !s.opened) continue;
      if (extra || (last && !wants_more(i))) finish(i, "");
    }
  }

  /// Prepares cell i for this sweep (the first time: opened, with capture, analysis and per-layer
  /// times). False when it could not be (a cell never prepared is a failed run).
  bool prepare(std::size_t i) {
    CellSession& s = sessions_[i];
    try {
      const auto t0 = Clock::now();
      s.pool = s.alone ? std::string() : current_pool();
      ProfileOptions o = sweep_options_;
      o.run.process_pool = s.pool;
      if (!s.opened)
        open_session(s, hw_, o);
      else
        prepare_again(s, o);
      s.fresh = true;
      preparation_seconds_[i] = std::chrono::duration<double>(Clock::now() - t0).count();
      return true;
    } catch (const std::exception& e) {
      if (interrupted()) return false;
      close_model(s);
      if (!s.opened) {
        finished_[i] = failed_cell(s.plan, options_, preparation_error(e));
        s.failed = true;
        if (hooks_.on_run) hooks_.on_run(*finished_[i], i);
      } else {
        s.run.warnings.push_back(
            fmt::format("preparation {} failed ({}): its rounds are missing", s.preparations + 1, e.what()));
      }
      return false;
    }
  }

  /// Whether cell i's next round is due at `tick` (its rounds spread evenly from its first tick
  /// to the last planned one; past that, every tick).
  bool due(std::size_t i, int tick) const {
    const int q = std::max(1, quota_[i]), k = std::min(taken_[i], q - 1), t0 = first_tick_[i];
    const int span = std::max(0, planned_ticks_ - 1 - t0);
    const int at = q == 1 ? t0 : t0 + static_cast<int>(std::lround(static_cast<double>(k) * span / (q - 1)));
    return tick >= at;
  }

  /// A pass at `tick` over the prepared cells that are due; false when no cell needs more.
  bool take_pass(const std::vector<std::vector<std::size_t>>& groups, int sweep, int tick, bool extra) {
    bool wanting = false;
    std::vector<char> todo(sessions_.size(), 0);
    for (std::size_t i : open_) {
      const CellSession& s = sessions_[i];
      if (!s.model) continue;
      const bool wants = extra ? (s.fresh || still_disagrees(i, true)) && time_left() : needed(s, sweep) > 0;
      if (!wants) continue;
      wanting = true;
      if (extra || due(i, tick)) todo[i] = 1;
    }
    if (!wanting) return false;
    const std::uint64_t salt = 104729ULL * sweep + 7919ULL * tick;
    for (std::size_t g : seeded_order(groups.size(), options_.rounds.seed, salt)) {
      std::vector<std::size_t> cells;
      for (std::size_t i : groups[g]) {
        if (todo[i]) cells.push_back(i);
      }
      const std::vector<std::size_t> order = side_by_side(cells, salt + g + 1);
      if (canary_ && order.size() > 1) {
        take_interleaved(order, sweep, tick);  // a CPU's cells: pass by pass
        continue;
      }
      for (std::size_t i : order) {
        if (interrupted()) return false;
        take_round(i, sweep, tick);
      }
    }
    return true;
  }

  bool time_left() const {
    return hooks_.time_limit_seconds <= 0 ||
           std::chrono::duration<double>(Clock::now() - start_).count() < hooks_.time_limit_seconds;
  }

  /// Whether cell i may take more rounds and should: its own rounds disagree, or the speedup the
  /// findings state between it and another mode of its backend (their paired rounds' ratio) has an
  /// interval wider than the verdict's threshold. Both cells of such a pair go on together, so
  /// their new rounds pair too. With `open_partners`, only a partner prepared now counts (one that
  /// takes no rounds in this sweep cannot pair new ones).
  bool still_disagrees(std::size_t i, bool open_partners = false) const {
    const CellSession& s = sessions_[i];
    const int max_rounds = options_.rounds.max_rounds;
    if (static_cast<int>(s.rounds.size()) >= max_rounds || s.rounds.empty()) return false;
    if (!rounds_agree(estimate_rounds(s.rounds), options_.rounds)) return true;
    for (std::size_t j : partners_[i]) {
      const CellSession& t = sessions_[j];
      // a partner that cannot take more rounds (finished, failed, at the most) cannot pair new ones
      if (finished_[j] || t.failed || t.rounds.empty() || static_cast<int>(t.rounds.size()) >= max_rounds) continue;
      if (open_partners && !t.model) continue;
      if (!paired_ratio_agrees(paired_ratio(t.rounds, s.rounds), options_.rounds)) return true;
    }
    return false;
  }

  /// The extra sweep's question: the cell's rounds disagree, it may have more, and a fresh
  /// preparation and a round fit in the time left (its last preparation's time as the guess).
  bool wants_more(std::size_t i) const {
    const CellSession& s = sessions_[i];
    if (!s.opened || s.failed || !still_disagrees(i)) return false;
    if (hooks_.time_limit_seconds <= 0) return true;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    return elapsed + preparation_seconds_[i] < hooks_.time_limit_seconds;
  }

  /// The cells of a group in a seeded order, a backend's modes next to each other (the pairs the
  /// findings compare most: compiled over eager).
  std::vector<std::size_t> side_by_side(const std::vector<std::size_t>& cells, std::uint64_t salt) const {
    std::vector<std::size_t> order;
    for (std::size_t k : seeded_order(cells.size(), options_.rounds.seed, salt)) order.push_back(cells[k]);
    std::map<std::string, std::size_t> first;  // backend -> its first place in the seeded order
    for (std::size_t k = 0; k < order.size(); ++k) first.try_emplace(sessions_[order[k]].run.backend, k);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return first.at(sessions_[a].run.backend) < first.at(sessions_[b].run.backend);
    });
    return order;
  }

  /// The canaries' readings before a round (CPU runs): memory, cores.
  struct Canaries {
    double memory = 0, cpu = 0;
  };
  Canaries read_canaries() {
    if (!canary_) return {};
    Canaries c;
    c.memory = canary_->read();
    c.cpu = canary_->read_cpu();
    return c;
  }

  void record_round(std::size_t i, Round r, Canaries machine, int sweep, int tick) {
    CellSession& s = sessions_[i];
    r.machine_seconds = machine.memory;
    r.cpu_canary_seconds = machine.cpu;
    s.fresh = false;
    r.sweep = sweep;
    r.pass = tick;
    r.start_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    s.rounds.push_back(std::move(r));
    ++taken_[i];
    if (hooks_.on_round) hooks_.on_round(s.rounds.back(), i);
  }

  void take_round(std::size_t i, int sweep, int tick) {
    CellSession& s = sessions_[i];
    try {
      // the machine's pace just before the round (CPU runs: a GPU's rounds do not wait on host memory)
      const Canaries machine = read_canaries();
      record_round(i, time_round(s, options_, s.fresh), machine, sweep, tick);
    } catch (const std::exception& e) {
      round_failed(i, e, sweep, tick);
    }
  }

  /// The rounds of a group's cells taken together: each warmed up, then visits of
  /// kInterleavedVisitSeconds in turn until every window's stopping rule holds, so that the cells
  /// see the same stretches of the machine (a cell whose window is done drops out of the turns).
  void take_interleaved(const std::vector<std::size_t>& cells, int sweep, int tick) {
    const Canaries machine = read_canaries();
    std::vector<std::unique_ptr<TimingWindow>> windows(cells.size());
    auto fail = [&](std::size_t k, const std::exception& e) {
      windows[k].reset();
      round_failed(cells[k], e, sweep, tick);
    };
    for (std::size_t k = 0; k < cells.size(); ++k) {
      if (interrupted()) break;
      try {
        windows[k] = begin_round(sessions_[cells[k]], options_, sessions_[cells[k]].fresh);
      } catch (const std::exception& e) {
        fail(k, e);
      }
    }
    for (bool any = true; any && !interrupted();) {
      any = false;
      for (std::size_t k = 0; k < cells.size() && !interrupted(); ++k) {
        if (!windows[k] || windows[k]->done()) continue;
        any = true;
        try {
          windows[k]->visit(kInterleavedVisitSeconds, /*prime=*/true);
        } catch (const std::exception& e) {
          fail(k, e);
        }
      }
    }
    for (std::size_t k = 0; k < cells.size(); ++k) {
      if (!windows[k]) continue;
      CellSession& s = sessions_[cells[k]];
      if (interrupted()) {
        if (s.model) s.model->pause();
        continue;
      }
      try {
        record_round(cells[k], end_round(s, *windows[k]), machine, sweep, tick);
      } catch (const std::exception& e) {
        fail(k, e);
      }
    }
  }

  /// A round of cell i failed with `e`.
  void round_failed(std::size_t i, const std::exception& e, int sweep, int tick) {
    CellSession& s = sessions_[i];
    {
      if (interrupted()) return;
      s.round_error = e.what();
      if (s.model && s.model->shares_process()) {
        // A shared process ended under another model (a victim), or under this one's own request
        // (the culprit, or a failure that was its own). Both are prepared again; the culprit in a
        // process of its own from then on, so a model that keeps crashing its process ends no
        // other cell's rounds twice, and its next failure ends its preparation (below).
        const bool victim = s.model->lost_its_process();
        if (s.pool == current_pool()) ++generation_;  // that process is gone: the others start a new one
        if (!victim) s.alone = true;
        s.run.warnings.push_back(fmt::format("a round failed in a shared worker process ({}{}): prepared again{}",
                                             e.what(), victim ? ", ended by another model" : "",
                                             victim ? "" : " in a process of its own"));
        close_model(s);
        if (prepare(i)) take_round(i, sweep, tick);
        return;
      }
      // a model that stops running: its preparation is done for
      s.run.warnings.push_back(fmt::format("a round failed ({}): preparation {} ended", e.what(), s.preparations));
      close_model(s);
    }
  }

  std::string preparation_error(const std::exception& e) const {
    if (dynamic_cast<const std::bad_alloc*>(&e)) {
      return "out of memory (the model or the worker's reply is too large for this machine)";
    }
    return e.what();
  }

  void finish(std::size_t i, const std::string& cut_short) {
    CellSession& s = sessions_[i];
    std::string why = cut_short;
    if (why.empty() && static_cast<int>(s.rounds.size()) < options_.rounds.rounds && !s.rounds.empty()) {
      why = fmt::format("only {} of {} rounds could be timed (see the warnings)", s.rounds.size(),
                        options_.rounds.rounds);
    }
    finished_[i] = finish_session(s, hw_, options_, why, machine_level(level_points()));
    if (hooks_.on_run) hooks_.on_run(*finished_[i], i);
  }

  /// Every round of the study so far, for the machine's level. A tick is a pass of a sweep over
  /// the cells; in training, a group's own passes (its groups take their ticks one after another).
  std::vector<LevelPoint> level_points() const {
    const bool by_group = sweep_options_.run.train.has_value();
    std::vector<LevelPoint> points;
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
      for (const Round& r : sessions_[i].rounds) {
        if (!(r.summary.median > 0)) continue;
        const std::int64_t group = by_group ? static_cast<std::int64_t>(group_of_[i]) + 1 : 0;
        points.push_back({(static_cast<std::int64_t>(r.sweep) * 4096 + group) * 65536 + r.pass, i, r.start_seconds,
                          std::log(r.summary.median)});
      }
    }
    return points;
  }

  const HardwareSpec& hw_;
  const ProfileOptions& options_;
  ProfileOptions sweep_options_;  ///< options_ with the sweep's worker-process pool
  ScheduleHooks hooks_;
  Clock::time_point start_;
  std::vector<CellSession> sessions_;
  std::vector<std::optional<ProfileRun>> finished_;
  std::vector<double> preparation_seconds_;  ///< of each cell's last preparation
  std::vector<int> first_tick_;              ///< the tick of each cell's preparation in this sweep
  std::vector<int> quota_;                   ///< the rounds each cell is to take in this sweep
  std::vector<int> taken_;                   ///< the rounds each cell took in this sweep
  std::vector<std::size_t> open_;            ///< the cells prepared in this sweep
  /// Of each cell, the other modes of its backend in its group: the speedups the findings state
  std::vector<std::vector<std::size_t>> partners_;
  std::vector<std::size_t> group_of_;  ///< each cell's (model, batch) group
  int planned_ticks_ = 0;              ///< the sweep's groups plus the most rounds a cell takes, less one
  int generation_ = 0;                 ///< of the sweep's worker processes: a failed shared one is replaced
  std::string current_pool() const { return sweep_options_.run.process_pool + fmt::format(" #{}", generation_); }
  int processes_ = 1;
  std::unique_ptr<detail::MachineCanary> canary_;
};

}  // namespace

std::vector<ProfileRun> measure_cells(const std::vector<CellPlan>& cells, const HardwareSpec& hardware,
                                      const ProfileOptions& options, ScheduleHooks hooks) {
  Schedule schedule(cells, hardware, options, std::move(hooks));
  return schedule.run(group_cells(cells));
}

}  // namespace neuralcost
