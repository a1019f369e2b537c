// Load on the machine around a measurement (see load.hpp): /proc/stat for the CPUs' time,
// /proc/<pid>/stat for this process tree's, read under a root so that tests feed canned trees.
#include "neuralcost/measure/load.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace neuralcost {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

double ticks_per_second() {
  const long t = sysconf(_SC_CLK_TCK);
  return t > 0 ? static_cast<double>(t) : 100.0;
}

/// The stat of every numbered entry of `dir`, never throwing: processes and threads come and go
/// while the folder is read (a vanished one reads as empty text and is skipped).
std::vector<TaskTicks> read_stats(const fs::path& dir) {
  std::vector<TaskTicks> stats;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!all_digits(it->path().filename().string())) continue;
    if (const auto t = parse_task_stat(read_text(it->path() / "stat"))) stats.push_back(*t);
  }
  return stats;
}

int running_threads(const fs::path& proc, int pid) {
  const std::vector<TaskTicks> threads = read_stats(proc / std::to_string(pid) / "task");
  return static_cast<int>(
      std::count_if(threads.begin(), threads.end(), [](const TaskTicks& t) { return t.state == 'R'; }));
}

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100 * fraction); }

}  // namespace

ProcStat parse_proc_stat(std::string_view text) {
  ProcStat s;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "procs_running") {
      words >> s.procs_running;
      continue;
    }
    if (key.rfind("cpu", 0) != 0) continue;
    const std::string number = key.substr(3);
    if (!number.empty() && !all_digits(number)) continue;
    std::uint64_t f[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // user nice system idle iowait irq softirq steal
    int read = 0;
    while (read < 8 && words >> f[read]) ++read;
    if (read < 4) continue;
    CpuTicks t;
    t.busy = f[0] + f[1] + f[2] + f[5] + f[6];
    t.idle = f[3] + f[4];
    t.steal = f[7];
    s.cpus[number.empty() ? -1 : std::atoi(number.c_str())] = t;
  }
  return s;
}

std::optional<TaskTicks> parse_task_stat(std::string_view text) {
  // "pid (comm) state ppid ...": the name may hold spaces and ')', so fields start after the last ')'
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  TaskTicks t;
  const std::string pid(text.substr(0, open));
  t.pid = std::atoi(pid.c_str());
  std::istringstream fields{std::string(text.substr(close + 1))};
  std::vector<std::string> f;
  for (std::string w; fields >> w && f.size() < 15;) f.push_back(w);
  // after the name: state(0) ppid(1) pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime(11) stime(12) cutime(13) cstime(14)
  if (t.pid <= 0 || f.size() < 15 || f[0].size() != 1) return std::nullopt;
  t.state = f[0][0];
  t.ppid = std::atoi(f[1].c_str());
  auto ticks = [&](std::size_t i) { return static_cast<std::uint64_t>(std::max(0LL, std::atoll(f[i].c_str()))); };
  t.own = ticks(11) + ticks(12);
  t.children = ticks(13) + ticks(14);
  return t;
}

LoadReading read_load(const std::string& proc_root, int pid) {
  const fs::path proc = proc_root.empty() ? fs::path("/proc") : fs::path(proc_root);
  if (pid <= 0) pid = static_cast<int>(::getpid());
  LoadReading r;
  r.when = Clock::now();
  r.stat = parse_proc_stat(read_text(proc / "stat"));
  std::map<int, TaskTicks> tasks;
  for (const TaskTicks& t : read_stats(proc)) tasks[t.pid] = t;
  // the tree: `pid` and every process whose parent is in it
  std::map<int, std::vector<int>> children;
  for (const auto& [p, t] : tasks) children[t.ppid].push_back(p);
  std::vector<int> tree = {pid};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    for (int c : children[tree[i]]) tree.push_back(c);
  }
  for (int p : tree) {
    const auto t = tasks.find(p);
    if (t == tasks.end()) continue;
    r.tree_ticks += t->second.own + t->second.children;
    r.tree_running += running_threads(proc, p);
  }
  return r;
}

LoadFigures load_between(const LoadReading& before, const LoadReading& after, const std::vector<int>& cpus,
                         double tps) {
  LoadFigures f;
  f.seconds = std::chrono::duration<double>(after.when - before.when).count();
  std::set<int> wanted(cpus.begin(), cpus.end());
  std::int64_t busy = 0, idle = 0, steal = 0;
  int counted = 0, machine = 0;
  for (const auto& [cpu, a] : after.stat.cpus) {
    if (cpu < 0) continue;
    ++machine;
    const auto b = before.stat.cpus.find(cpu);
    if (b == before.stat.cpus.end() || (!wanted.empty() && !wanted.count(cpu))) continue;
    ++counted;
    busy += static_cast<std::int64_t>(a.busy - b->second.busy);
    idle += static_cast<std::int64_t>(a.idle - b->second.idle);
    steal += static_cast<std::int64_t>(a.steal - b->second.steal);
  }
  if (counted == 0) {
    // no per-CPU lines for these CPUs: the machine's line
    const auto a = after.stat.cpus.find(-1), b = before.stat.cpus.find(-1);
    if (a != after.stat.cpus.end() && b != before.stat.cpus.end()) {
      busy = static_cast<std::int64_t>(a->second.busy - b->second.busy);
      idle = static_cast<std::int64_t>(a->second.idle - b->second.idle);
      steal = static_cast<std::int64_t>(a->second.steal - b->second.steal);
    }
    counted = std::max(1, machine);
  }
  f.cpus = counted;
  const std::int64_t own = static_cast<std::int64_t>(after.tree_ticks) - static_cast<std::int64_t>(before.tree_ticks);
  const std::int64_t others = std::max<std::int64_t>(0, busy - own);
  f.other_cpu_seconds = static_cast<double>(others) / tps;
  f.steal_cpu_seconds = static_cast<double>(std::max<std::int64_t>(0, steal)) / tps;
  if (f.seconds > 0) f.other_cpus = f.other_cpu_seconds / f.seconds;
  const std::int64_t all = busy + idle + steal;
  if (all > 0) f.steal_fraction = static_cast<double>(std::max<std::int64_t>(0, steal)) / static_cast<double>(all);
  // procs_running counts the whole machine: it says something only when every CPU is ours
  if (after.stat.procs_running >= 0 && counted == machine) {
    f.other_runnable = std::max(0, after.stat.procs_running - after.tree_running);
  }
  return f;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

LoadFigures load_since(const LoadReading& start) {
  return load_between(start, read_load(), affinity_cpus(), ticks_per_second());
}

LoadFigures idle_load(double seconds, int snapshots) {
  snapshots = std::max(1, snapshots);
  const LoadReading before = read_load();
  LoadReading after = before;
  double runnable = 0;
  int counted = 0;
  for (int i = 0; i < snapshots; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds / snapshots));
    after = read_load();
    const LoadFigures step = load_between(before, after, affinity_cpus(), ticks_per_second());
    if (step.other_runnable >= 0) {
      runnable += step.other_runnable;
      ++counted;
    }
  }
  LoadFigures f = load_between(before, after, affinity_cpus(), ticks_per_second());
  f.other_runnable = counted > 0 ? runnable / counted : -1;
  return f;
}

std::vector<std::string> load_reasons(const LoadFigures& f, std::string_view what) {
  std::vector<std::string> reasons;
  const bool others = f.other_cpu_seconds >= kLoadResolvableCpuSeconds && f.other_cpus >= kLoadOtherCpusLimit;
  const bool runnable = f.other_runnable >= kLoadRunnableLimit;
  if (others || runnable) {
    const std::string tasks =
        f.other_runnable >= 0 ? fmt::format("; {:.1f} other runnable task(s) on average", f.other_runnable) : "";
    reasons.push_back(fmt::format(
        "other processes used {} of a CPU during {} ({:.2f} CPU-seconds in {:.2f} s on {} CPU(s){}): they competed "
        "for the cores this measures; rerun on an idle machine",
        percent(f.other_cpus), what, f.other_cpu_seconds, f.seconds, f.cpus, tasks));
  }
  if (f.steal_cpu_seconds >= kLoadResolvableCpuSeconds && f.steal_fraction >= kLoadStealLimit) {
    reasons.push_back(fmt::format(
        "the hypervisor took {} of the CPUs' time (steal time) during {}: other virtual machines ran on the same "
        "physical cores; rerun when the host is quieter, or on dedicated cores",
        percent(f.steal_fraction), what));
  }
  return reasons;
}

namespace {

/// The CPU's load sampler (make_load_sampler).
class LoadSampler final : public Sampler {
 public:
  LoadSampler() : early_(read_load()) {}
  void start() override { before_ = read_load(); }
  void stop(int, double, Counters& out) override {
    if (!before_) return;
    const LoadReading after = read_load();
    const bool short_phase = std::chrono::duration<double>(after.when - before_->when).count() < kLoadMinWindowSeconds;
    const LoadFigures f = load_between(short_phase ? early_ : *before_, after, affinity_cpus(), ticks_per_second());
    out.push_back({"cpus_used_by_others", f.other_cpus, "CPUs", Counter::Kind::kTotal});
    out.push_back({"steal_time", 100 * f.steal_fraction, "%", Counter::Kind::kTotal});
    out.push_back({"load_window_seconds", f.seconds, "s", Counter::Kind::kTotal});
    // runnable tasks beyond ours at both ends of the phase (procs_running counts the machine)
    const LoadFigures at_start = load_between(*before_, *before_, affinity_cpus(), ticks_per_second());
    if (f.other_runnable >= 0 && at_start.other_runnable >= 0) {
      out.push_back({"other_runnable_tasks", std::min(f.other_runnable, at_start.other_runnable), "tasks",
                     Counter::Kind::kTotal});
    }
  }

 private:
  LoadReading early_;
  std::optional<LoadReading> before_;
};

}  // namespace

std::unique_ptr<Sampler> make_load_sampler() { return std::make_unique<LoadSampler>(); }

void check_load(TimingResult& result) {
  const Counter* others = find_counter(result.counters, "cpus_used_by_others");
  const Counter* steal = find_counter(result.counters, "steal_time");
  if (!others && !steal) return;
  const Counter* window = find_counter(result.counters, "load_window_seconds");
  const Counter* runnable = find_counter(result.counters, "other_runnable_tasks");
  // the sampler's figures again, over its window
  LoadFigures f;
  f.seconds = window ? window->value : result.sampling_seconds;
  f.cpus = std::max<int>(1, static_cast<int>(affinity_cpus().size()));
  if (others) {
    f.other_cpus = others->value;
    f.other_cpu_seconds = others->value * f.seconds;
  }
  if (steal) {
    f.steal_fraction = steal->value / 100;
    f.steal_cpu_seconds = f.steal_fraction * f.seconds * f.cpus;
  }
  const bool warmup = f.seconds > 1.5 * result.sampling_seconds + 0.01;
  std::vector<std::string> reasons = load_reasons(f, warmup ? "warm-up and sampling" : "sampling");
  if (f.seconds < kLoadMinWindowSeconds && runnable && runnable->value >= 1) {
    // too short for the CPU time to show: other tasks runnable at both ends of sampling
    reasons.push_back(fmt::format(
        "{:.0f} other task(s) were runnable at the start and at the end of sampling ({:.3g} s, too short for CPU-time "
        "accounting): they competed for the cores this measures; rerun on an idle machine",
        runnable->value, result.sampling_seconds));
  }
  for (std::string& why : reasons) {
    result.reasons.push_back(std::move(why));
    result.verdict = Verdict::kMistrusted;
  }
}

}  // namespace neuralcost
