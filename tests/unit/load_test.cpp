// Load detection (measure/load.hpp) on canned /proc text and a canned /proc tree: what other
// processes and the hypervisor took, this process tree's own time left out, the thresholds and
// the reasons; then the verdict of a profile run under a synthetic load (a busy loop pinned to
// one CPU, started and stopped here), which must be mistrusted with the reason.
#include "neuralcost/measure/load.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "synthetic_load.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// two CPUs: user nice system idle iowait irq softirq steal guest guest_nice
const char* kStatBefore =
    "cpu  1000 0 200 5000 10 0 5 40 0 0\n"
    "cpu0 500 0 100 2500 5 0 2 20 0 0\n"
    "cpu1 500 0 100 2500 5 0 3 20 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n"
    "procs_running 3\n"
    "procs_blocked 0\n";

TEST(LoadTest, ProcStatIsReadPerCpu) {
  const ProcStat s = parse_proc_stat(kStatBefore);
  ASSERT_EQ(s.cpus.size(), 3u);          // the machine's line and two CPUs
  EXPECT_EQ(s.cpus.at(-1).busy, 1205u);  // user + nice + system + irq + softirq
  EXPECT_EQ(s.cpus.at(-1).idle, 5010u);  // idle + iowait
  EXPECT_EQ(s.cpus.at(-1).steal, 40u);
  EXPECT_EQ(s.cpus.at(1).busy, 603u);
  EXPECT_EQ(s.procs_running, 3);
  // old kernels without steal, and text that is not /proc/stat
  const ProcStat old = parse_proc_stat("cpu0 10 0 5 100\n");
  EXPECT_EQ(old.cpus.at(0).busy, 15u);
  EXPECT_EQ(old.cpus.at(0).steal, 0u);
  EXPECT_EQ(old.procs_running, -1);
  EXPECT_TRUE(parse_proc_stat("nonsense\ncpufreq 1 2 3 4\n").cpus.empty());
}

TEST(LoadTest, TaskStatSurvivesNamesWithSpacesAndParentheses) {
  const auto t = parse_task_stat(
      "4242 (my (odd) name) R 4200 4242 4200 0 -1 4194304 99 0 0 0 150 30 7 3 20 0 1 0 171352 3133440 413");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->pid, 4242);
  EXPECT_EQ(t->ppid, 4200);
  EXPECT_EQ(t->state, 'R');
  EXPECT_EQ(t->own, 180u);
  EXPECT_EQ(t->children, 10u);
  EXPECT_FALSE(parse_task_stat("4242 no parentheses R 1").has_value());
  EXPECT_FALSE(parse_task_stat("").has_value());
  EXPECT_FALSE(parse_task_stat("12 (short) R 1 2").has_value());
}

/// A /proc tree under a temporary folder: /proc/stat and processes (pid, ppid, state, ticks).
class CannedProc {
 public:
  CannedProc() : root_(fs::temp_directory_path() / ("neuralcost_proc_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~CannedProc() { fs::remove_all(root_); }
  void stat(const std::string& text) { std::ofstream(root_ / "stat") << text; }
  void process(int pid, int ppid, char state, int utime, int cutime = 0) {
    const std::string line = fmt::format("{} (proc {}) {} {} 1 1 0 -1 0 0 0 0 0 {} 0 {} 0 20 0 1 0 1 1 1", pid, pid,
                                         state, ppid, utime, cutime);
    fs::create_directories(root_ / std::to_string(pid) / "task" / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "stat") << line;
    std::ofstream(root_ / std::to_string(pid) / "task" / std::to_string(pid) / "stat") << line;
  }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST(LoadTest, TheTreeOfAProcessIsItsOwnTimeAndTheRestIsLoad) {
  CannedProc proc;
  proc.stat(kStatBefore);
  proc.process(100, 1, 'R', 50);       // the run: this process...
  proc.process(101, 100, 'S', 20, 5);  // ...its worker, and the worker's waited-for child
  proc.process(200, 1, 'R', 1000);     // someone else
  LoadReading before = read_load(proc.path(), 100);
  EXPECT_EQ(before.tree_ticks, 75u);
  EXPECT_EQ(before.tree_running, 1);
  EXPECT_EQ(before.stat.procs_running, 3);
  // 2 s later: the CPUs were busy 300 ticks more; our tree used 100 of them (the worker 60)
  proc.stat(
      "cpu  1300 0 200 5100 10 0 5 40 0 0\n"
      "cpu0 650 0 100 2550 5 0 2 20 0 0\n"
      "cpu1 650 0 100 2550 5 0 3 20 0 0\n"
      "procs_running 2\n");
  proc.process(100, 1, 'R', 90);
  proc.process(101, 100, 'S', 80, 5);
  proc.process(200, 1, 'R', 1200);
  LoadReading after = read_load(proc.path(), 100);
  after.when = before.when + std::chrono::seconds(2);
  const LoadFigures f = load_between(before, after, {0, 1}, 100);
  EXPECT_EQ(f.cpus, 2);
  EXPECT_DOUBLE_EQ(f.seconds, 2.0);
  EXPECT_DOUBLE_EQ(f.other_cpu_seconds, 2.0);  // (300 - 100) ticks at 100 Hz
  EXPECT_DOUBLE_EQ(f.other_cpus, 1.0);
  EXPECT_DOUBLE_EQ(f.steal_fraction, 0.0);
  EXPECT_DOUBLE_EQ(f.other_runnable, 1.0);  // procs_running 2, one of them ours
  // one of the two CPUs: the figures of that CPU only, and procs_running says nothing
  const LoadFigures one = load_between(before, after, {0}, 100);
  EXPECT_EQ(one.cpus, 1);
  EXPECT_DOUBLE_EQ(one.other_runnable, -1);
}

TEST(LoadTest, ReasonsNameTheCauseAndTheFix) {
  LoadFigures idle;
  idle.seconds = 2;
  idle.cpus = 2;
  idle.other_cpus = 0.02;
  idle.other_cpu_seconds = 0.04;
  idle.other_runnable = 0.1;
  EXPECT_TRUE(load_reasons(idle, "sampling").empty());

  LoadFigures busy = idle;
  busy.other_cpus = 0.96;
  busy.other_cpu_seconds = 1.92;
  const auto reasons = load_reasons(busy, "sampling");
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_THAT(reasons[0], HasSubstr("other processes used 96% of a CPU during sampling"));
  EXPECT_THAT(reasons[0], HasSubstr("rerun on an idle machine"));

  // a quarter of a CPU is the limit; below the ticks the accounting resolves nothing counts
  LoadFigures limit = idle;
  limit.other_cpus = kLoadOtherCpusLimit;
  limit.other_cpu_seconds = 0.5;
  EXPECT_EQ(load_reasons(limit, "sampling").size(), 1u);
  limit.other_cpus = 0.24;
  EXPECT_TRUE(load_reasons(limit, "sampling").empty());
  LoadFigures short_window = busy;
  short_window.seconds = 0.02;
  short_window.other_cpu_seconds = 0.02;
  EXPECT_TRUE(load_reasons(short_window, "sampling").empty());

  LoadFigures steal = idle;
  steal.steal_fraction = 0.12;
  steal.steal_cpu_seconds = 0.48;
  const auto stolen = load_reasons(steal, "calibration");
  ASSERT_EQ(stolen.size(), 1u);
  EXPECT_THAT(stolen[0], HasSubstr("the hypervisor took 12% of the CPUs' time (steal time) during calibration"));

  LoadFigures queued = idle;
  queued.other_runnable = 1.5;
  ASSERT_EQ(load_reasons(queued, "the idle check").size(), 1u);
  EXPECT_THAT(load_reasons(queued, "the idle check")[0], HasSubstr("1.5 other runnable task(s) on average"));
}

TEST(LoadTest, APhaseTooShortForCpuTimeIsJudgedByRunnableTasks) {
  TimingResult r;
  r.sampling_seconds = 0.002;
  r.counters = {{"cpus_used_by_others", 0.0, "CPUs", Counter::Kind::kTotal},
                {"steal_time", 0.0, "%", Counter::Kind::kTotal},
                {"load_window_seconds", 0.002, "s", Counter::Kind::kTotal},
                {"other_runnable_tasks", 0.0, "tasks", Counter::Kind::kTotal}};
  check_load(r);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  r.counters.back().value = 2;  // two other tasks runnable at both ends
  check_load(r);
  EXPECT_EQ(r.verdict, Verdict::kMistrusted);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_THAT(r.reasons[0], HasSubstr("2 other task(s) were runnable at the start and at the end of sampling"));
  // a window that took in the warm-up says so
  TimingResult w;
  w.sampling_seconds = 0.002;
  w.counters = {{"cpus_used_by_others", 0.9, "CPUs", Counter::Kind::kTotal},
                {"load_window_seconds", 0.25, "s", Counter::Kind::kTotal}};
  check_load(w);
  ASSERT_EQ(w.reasons.size(), 1u);
  EXPECT_THAT(w.reasons[0], HasSubstr("90% of a CPU during warm-up and sampling"));
}

TEST(LoadTest, TheLoadCountersMistrustATimingResult) {
  TimingResult r;
  r.sampling_seconds = 1.0;
  check_load(r);  // no load counters: nothing to say
  EXPECT_EQ(r.verdict, Verdict::kOk);
  r.counters = {{"cpus_used_by_others", 0.96, "CPUs", Counter::Kind::kTotal},
                {"steal_time", 0.0, "%", Counter::Kind::kTotal}};
  check_load(r);
  EXPECT_EQ(r.verdict, Verdict::kMistrusted);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_THAT(r.reasons[0], HasSubstr("other processes used 96% of a CPU during sampling"));
}

/// A model whose pass is 2 ms of real work on this CPU.
class SpinningModel final : public PreparedModel {
 public:
  void run() override {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < end) {
    }
  }
  OpGraph captured_graph() override {
    ReferenceOptions o;
    o.model = "ff";
    o.batch = 1;
    return build_reference_model(o);
  }
};

class SpinningBackend final : public Backend {
 public:
  std::string_view name() const override { return "spinning"; }
  std::string_view description() const override { return "a backend of the tests whose passes spin"; }
  std::optional<std::string> unavailable_reason() const override { return std::nullopt; }
  std::vector<std::string> modes() const override { return {"eager"}; }
  std::vector<Device> devices() const override { return {Device::cpu()}; }
  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest&, const std::string&, const RunOptions&) const override {
    return std::make_unique<SpinningModel>();
  }
};

TEST(LoadTest, AProfileRunUnderSyntheticLoadIsMistrustedWithTheReason) {
  load_testing::SyntheticLoad load;
  ASSERT_TRUE(load.running());
  ProfileOptions o;
  o.layer_runs = 0;
  o.timing.warmup_iterations = 1;
  o.timing.warmup_seconds = 0;
  o.timing.budget_seconds = 0.4;
  o.timing.min_samples = 5;
  o.timing.target_relative_ci = 1e-6;  // sample for the whole budget
  o.rounds = {1, 1, 1};                // one window: the load is what it judges
  ModelRequest request;
  request.model = "ff";
  const auto runs = profile(SpinningBackend(), request, HardwareDatabase::builtin().get("epyc-9654"), o);
  load.stop();
  ASSERT_EQ(runs.size(), 1u);
  const ProfileRun& r = runs[0];
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  EXPECT_EQ(r.outcome.verdict, Verdict::kMistrusted);
  EXPECT_THAT(r.outcome.reasons, ::testing::Contains(HasSubstr("of a CPU during sampling")));
  EXPECT_THAT(r.outcome.reasons, ::testing::Contains(HasSubstr("rerun on an idle machine")));
  // the figures are counters of the run too
  const Counter* others = find_counter(r.timing.counters, "cpus_used_by_others");
  ASSERT_NE(others, nullptr);
  EXPECT_GE(others->value, kLoadOtherCpusLimit);
  EXPECT_EQ(others->unit, "CPUs");
  EXPECT_NE(find_counter(r.timing.counters, "steal_time"), nullptr);
  EXPECT_GE(find_counter(r.timing.counters, "load_window_seconds")->value, kLoadMinWindowSeconds);
}

TEST(LoadTest, AShortProfileRunUnderSyntheticLoadIsMistrustedToo) {
  // 5 passes of 2 ms: the sampling alone is too short for CPU-time accounting, so the window
  // takes in the 0.2 s warm-up
  load_testing::SyntheticLoad load;
  ASSERT_TRUE(load.running());
  ProfileOptions o;
  o.layer_runs = 0;
  o.timing.warmup_iterations = 1;
  o.timing.warmup_seconds = 0.2;
  o.timing.budget_seconds = 0.001;
  o.timing.min_samples = 5;
  o.timing.target_relative_ci = 0.5;
  o.rounds = {1, 1, 1};  // one window: the load is what it judges
  ModelRequest request;
  request.model = "ff";
  const auto runs = profile(SpinningBackend(), request, HardwareDatabase::builtin().get("epyc-9654"), o);
  load.stop();
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_FALSE(runs[0].outcome.failed()) << runs[0].outcome.error();
  EXPECT_LT(runs[0].timing.sampling_seconds, kLoadMinWindowSeconds);
  EXPECT_EQ(runs[0].outcome.verdict, Verdict::kMistrusted);
  EXPECT_THAT(runs[0].outcome.reasons, ::testing::Contains(HasSubstr("during warm-up and sampling")));
}

}  // namespace
}  // namespace neuralcost
