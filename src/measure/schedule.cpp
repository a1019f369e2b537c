// The interleaved schedule of rounds (see schedule.hpp).
#include "neuralcost/measure/schedule.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <tuple>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "measure/cell_session.hpp"

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
  Schedule(const std::vector<CellPlan>& cells, const HardwareSpec& hw, const ProfileOptions& options, ScheduleHooks hooks)
      : hw_(hw), options_(options), hooks_(std::move(hooks)), start_(Clock::now()) {
    sessions_.resize(cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      sessions_[i].plan = cells[i];
      ProfileRun& r = sessions_[i].run;
      r.backend = std::string(cells[i].backend->name());
      r.mode = cells[i].mode;
      r.model = cells[i].request.model;
      r.batch = cells[i].request.batch;
      r.device = options.run.device;
      if (i < hooks_.done.size()) sessions_[i].rounds = hooks_.done[i];
    }
    finished_.resize(cells.size());
    preparation_seconds_.resize(cells.size(), 0.0);
    processes_ = std::clamp(options.rounds.processes, 1, std::max(1, options.rounds.rounds));
  }

  std::vector<ProfileRun> run(const std::vector<std::vector<std::size_t>>& groups) {
    // the regular sweeps, then one more for the cells whose rounds disagree, in a fresh preparation
    for (int sweep = 0; sweep <= processes_ && !interrupted(); ++sweep) {
      const std::vector<std::size_t> order = seeded_order(groups.size(), options_.rounds.seed, 1000003ULL * sweep);
      for (std::size_t g = 0; g < order.size() && !interrupted(); ++g) visit(groups[order[g]], sweep, order[g]);
    }
    if (interrupted() && hooks_.finish_partial_cells) {
      for (std::size_t i = 0; i < sessions_.size(); ++i) {
        CellSession& s = sessions_[i];
        if (!finished_[i] && s.opened && !s.rounds.empty()) {
          finish(i, fmt::format("interrupted by {} after {} of {} rounds", interrupt_name(), s.rounds.size(),
                                options_.rounds.rounds));
        }
      }
    }
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

  /// Sweep `sweep` over one group: prepare its cells, take their rounds in seeded passes, release
  /// them. After the last regular sweep a cell is finished unless its rounds disagree and more
  /// can be had; the extra sweep (sweep == processes_) prepares those afresh and finishes them.
  void visit(const std::vector<std::size_t>& group, int sweep, std::size_t group_index) {
    const bool extra = sweep == processes_;
    const bool last = sweep == processes_ - 1;
    std::vector<std::size_t> live;
    for (std::size_t i : group) {
      CellSession& s = sessions_[i];
      if (finished_[i] || interrupted()) continue;
      const bool wanted = extra ? wants_more(i) : needed(s, sweep) > 0 || (last && !s.opened);
      if (!wanted) {
        if (extra || last) live.push_back(i);  // nothing to time: finished below (or after the extra sweep)
        continue;
      }
      try {
        const auto t0 = Clock::now();
        if (!s.opened) open_session(s, hw_, options_);
        else prepare_again(s, options_);
        preparation_seconds_[i] = std::chrono::duration<double>(Clock::now() - t0).count();
        live.push_back(i);
      } catch (const std::exception& e) {
        if (interrupted()) return;
        close_model(s);
        if (!s.opened) {
          finished_[i] = failed_cell(s.plan, options_, preparation_error(e));
          s.failed = true;
          if (hooks_.on_run) hooks_.on_run(*finished_[i], i);
        } else {
          s.run.warnings.push_back(fmt::format("preparation {} failed ({}): its rounds are missing",
                                               s.preparations + 1, e.what()));
          if (last || extra) live.push_back(i);
        }
      }
    }
    std::vector<char> fresh(sessions_.size(), 1);
    for (int pass = 0; !interrupted(); ++pass) {
      std::vector<std::size_t> todo;
      for (std::size_t i : live) {
        const CellSession& s = sessions_[i];
        if (!s.model) continue;
        if (extra ? (fresh[i] || still_disagrees(s)) && time_left() : needed(s, sweep) > 0) todo.push_back(i);
      }
      if (todo.empty()) break;
      const std::vector<std::size_t> order =
          seeded_order(todo.size(), options_.rounds.seed, (group_index + 1) * 7919ULL + sweep * 104729ULL + pass);
      for (std::size_t k : order) {
        if (interrupted()) break;
        const std::size_t i = todo[k];
        take_round(i, sweep, pass, fresh[i] != 0);
        fresh[i] = 0;
      }
    }
    for (std::size_t i : group) close_model(sessions_[i]);
    for (std::size_t i : live) {
      if (interrupted()) break;
      if (!finished_[i] && (extra || (last && !wants_more(i)))) finish(i, "");
    }
  }

  bool time_left() const {
    return hooks_.time_limit_seconds <= 0 ||
           std::chrono::duration<double>(Clock::now() - start_).count() < hooks_.time_limit_seconds;
  }

  bool still_disagrees(const CellSession& s) const {
    return static_cast<int>(s.rounds.size()) < options_.rounds.max_rounds && !s.rounds.empty() &&
           !rounds_agree(estimate_rounds(s.rounds), options_.rounds);
  }

  /// The extra sweep's question: the cell's rounds disagree, it may have more, and a fresh
  /// preparation and a round fit in the time left (its first preparation's time as the guess).
  bool wants_more(std::size_t i) const {
    const CellSession& s = sessions_[i];
    if (!s.opened || s.failed || !still_disagrees(s)) return false;
    if (hooks_.time_limit_seconds <= 0) return true;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    return elapsed + preparation_seconds_[i] < hooks_.time_limit_seconds;
  }

  void take_round(std::size_t i, int sweep, int pass, bool fresh) {
    CellSession& s = sessions_[i];
    try {
      Round r = time_round(s, options_, fresh);
      r.sweep = sweep;
      r.pass = pass;
      r.start_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
      s.rounds.push_back(r);
      if (hooks_.on_round) hooks_.on_round(s.rounds.back(), i);
    } catch (const std::exception& e) {
      if (interrupted()) return;
      // a model that stops running: its preparation is done for
      s.round_error = e.what();
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
      why = fmt::format("only {} of {} rounds could be timed (see the warnings)", s.rounds.size(), options_.rounds.rounds);
    }
    finished_[i] = finish_session(s, hw_, options_, why);
    if (hooks_.on_run) hooks_.on_run(*finished_[i], i);
  }

  const HardwareSpec& hw_;
  const ProfileOptions& options_;
  ScheduleHooks hooks_;
  Clock::time_point start_;
  std::vector<CellSession> sessions_;
  std::vector<std::optional<ProfileRun>> finished_;
  std::vector<double> preparation_seconds_;  ///< of each cell's last preparation
  int processes_ = 1;
};

}  // namespace

std::vector<ProfileRun> measure_cells(const std::vector<CellPlan>& cells, const HardwareSpec& hardware,
                                      const ProfileOptions& options, ScheduleHooks hooks) {
  Schedule schedule(cells, hardware, options, std::move(hooks));
  return schedule.run(group_cells(cells));
}

}  // namespace neuralcost
