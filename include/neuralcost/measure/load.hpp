// Load on the machine during a measurement: how much of the CPUs this process runs on other
// processes used, how much the hypervisor took (steal time), and how many other tasks were
// runnable, read from /proc/stat and /proc/<pid>/stat around a phase (a profile run's sampling,
// a calibration). CPU time of this process and of every process it started (a framework worker)
// is its own, never load. The readers take file text or a /proc root, so tests feed canned ones.
//
// Thresholds (docs/profiling.md, "Load"): other processes' CPU time of at least a quarter of a
// CPU on average over the phase, steal of at least 5 % of the CPUs' time, or (before a
// calibration, over several snapshots) at least half a runnable task beyond our own on average.
// A figure of fewer than 3 clock ticks (30 ms of CPU time at Linux's 100 Hz) is below what the
// tick accounting resolves and never counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/counters.hpp"
#include "neuralcost/measure/timing.hpp"

namespace neuralcost {

/// Other processes' CPU time, in CPUs averaged over the phase, at or above which it is load.
inline constexpr double kLoadOtherCpusLimit = 0.25;
/// The share of the CPUs' time the hypervisor took, at or above which it is load.
inline constexpr double kLoadStealLimit = 0.05;
/// Runnable tasks beyond our own, averaged over snapshots, at or above which it is load.
inline constexpr double kLoadRunnableLimit = 0.5;
/// CPU time below which a figure is not resolved by tick accounting (3 ticks of 10 ms).
inline constexpr double kLoadResolvableCpuSeconds = 0.03;
/// The shortest window in which kLoadOtherCpusLimit is resolved: 0.12 s.
inline constexpr double kLoadMinWindowSeconds = kLoadResolvableCpuSeconds / kLoadOtherCpusLimit;

/// One CPU line of /proc/stat in clock ticks (USER_HZ). Guest time is inside user time.
struct CpuTicks {
  std::uint64_t busy = 0;   ///< user + nice + system + irq + softirq
  std::uint64_t idle = 0;   ///< idle + iowait
  std::uint64_t steal = 0;  ///< time the hypervisor ran other guests on this CPU
};

struct ProcStat {
  std::map<int, CpuTicks> cpus;  ///< by CPU number ("cpu3"); -1 is the all-CPU line ("cpu")
  int procs_running = -1;        ///< runnable tasks of the whole machine, the reader included; -1 when absent
};

/// Parses the text of /proc/stat; lines it does not know are skipped, so text without CPU lines
/// gives an empty map.
ProcStat parse_proc_stat(std::string_view text);

/// One task as /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat) gives it.
struct TaskTicks {
  int pid = 0;
  int ppid = 0;
  char state = '?';            ///< R running or runnable, S sleeping, ...
  std::uint64_t own = 0;       ///< utime + stime, in ticks
  std::uint64_t children = 0;  ///< cutime + cstime: children it waited for
};

/// Parses one /proc/<pid>/stat line (the command name may hold spaces and parentheses);
/// std::nullopt when it is not one.
std::optional<TaskTicks> parse_task_stat(std::string_view text);

/// The machine at one instant, as seen by one process tree.
struct LoadReading {
  ProcStat stat;
  std::uint64_t tree_ticks = 0;  ///< CPU time of the process, its descendants and their waited-for children
  int tree_running = 0;          ///< threads of the tree in state R (the reader is one)
  std::chrono::steady_clock::time_point when;
};

/// Reads /proc/stat and the tree of process `pid` (0: this process) under `proc` ("/proc"; tests
/// pass a canned tree).
LoadReading read_load(const std::string& proc = "/proc", int pid = 0);

/// What a window between two readings saw on a set of CPUs.
struct LoadFigures {
  double seconds = 0;            ///< wall time of the window
  int cpus = 0;                  ///< CPUs the figures cover
  double other_cpus = 0;         ///< other processes' CPU time on them / window: CPUs' worth
  double other_cpu_seconds = 0;  ///< the same in CPU seconds
  double steal_fraction = 0;     ///< steal / all time of those CPUs
  double steal_cpu_seconds = 0;
  /// Runnable tasks beyond the tree's (averaged when several snapshots were taken); -1 unknown
  /// (procs_running counts the whole machine, and this process may not use all of its CPUs).
  double other_runnable = -1;
};

/// The figures between `before` and `after` on `cpus` (CPU numbers of /proc/stat; empty: all of
/// them), with `ticks_per_second` clock ticks (sysconf(_SC_CLK_TCK)).
LoadFigures load_between(const LoadReading& before, const LoadReading& after, const std::vector<int>& cpus,
                         double ticks_per_second);

/// The figures from `start` until now, on the CPUs this process may run on.
LoadFigures load_since(const LoadReading& start);

/// The CPUs this process may run on (its affinity mask).
std::vector<int> affinity_cpus();

/// Watches the machine for `seconds` while this process sleeps: what other work runs before a
/// measurement starts. Takes `snapshots` runnable-task counts along the way and averages them.
LoadFigures idle_load(double seconds, int snapshots = 10);

/// Why `figures` say the machine was busy during `what` ("sampling", "calibration"), each reason
/// naming the cause and the fix; empty when it was idle by every threshold above.
std::vector<std::string> load_reasons(const LoadFigures& figures, std::string_view what);

/// A sampler of the CPU device: reads the machine when it is made (before the warm-up), at
/// start() and at stop(), and adds the counters `cpus_used_by_others` (CPUs), `steal_time` (%),
/// `load_window_seconds` (s) and, when known, `other_runnable_tasks` (the fewer of the counts at
/// start and stop: tasks runnable throughout), all of kind total. The window is the sampling
/// phase, or, when that is shorter than kLoadMinWindowSeconds, the warm-up and the sampling.
std::unique_ptr<Sampler> make_load_sampler();

/// Mistrusts `result` when its load counters show load: load_reasons over the counters' window;
/// a window still shorter than kLoadMinWindowSeconds is judged by the runnable tasks instead (at
/// least one other task runnable at both ends). A result without the counters is left as it is.
void check_load(TimingResult& result);

}  // namespace neuralcost
