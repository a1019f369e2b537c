// A worker that is missing, exits, crashes, is killed, hangs, runs out of memory or writes
// garbage fails its run with a message saying which; the profile pipeline records the failure
// and goes on. The faults are injected into the real JAX worker (tests/workers/faulty/).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using neuralcost::testing::CliResult;
using neuralcost::testing::run_cli;
using ::testing::HasSubstr;

/// Sets the worker environment of one fault for the life of the object.
class Fault {
 public:
  explicit Fault(const std::string& fault) {
    setenv("NEURALCOST_WORKER_DIR", NEURALCOST_SOURCE_DIR "/tests/workers/faulty", 1);
    setenv("NEURALCOST_REAL_WORKER_DIR", NEURALCOST_SOURCE_DIR "/python", 1);
    setenv("NEURALCOST_FAULT", fault.c_str(), 1);
  }
  ~Fault() {
    unsetenv("NEURALCOST_WORKER_DIR");
    unsetenv("NEURALCOST_FAULT");
    unsetenv("NEURALCOST_PYTHON");
  }
};

ModelRequest ff() {
  ModelRequest r;
  r.model = "ff";
  r.batch = 2;
  return r;
}

/// Run options with a worker deadline of `seconds`.
RunOptions deadline(double seconds = 60) {
  RunOptions run;
  run.worker_timeout_seconds = seconds;
  return run;
}

std::string failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(WorkerFaultsTest, MissingInterpreterMakesTheBackendUnavailable) {
  Fault fault("");
  setenv("NEURALCOST_PYTHON", "/nonexistent/python3", 1);
  const auto why = backend_named("jax").unavailable_reason();
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("no Python environment at /nonexistent/python3 ($NEURALCOST_PYTHON)"));
}

TEST(WorkerFaultsTest, ExitAtStartIsReportedWithItsLastWords) {
  Fault fault("exit-at-hello");
  const std::string e = failure_of([] { backend_named("jax").prepare(ff(), "eager", deadline()); });
  EXPECT_THAT(e, HasSubstr("the jax worker exited with status 3 while answering 'hello'"));
  EXPECT_THAT(e, HasSubstr("faulty worker: exiting at hello"));
}

TEST(WorkerFaultsTest, CrashIsReportedWithItsSignal) {
  Fault fault("abort-at-build");
  const std::string e = failure_of([] { backend_named("jax").prepare(ff(), "eager", deadline()); });
  EXPECT_THAT(e, HasSubstr("the jax worker was killed by signal 6"));
  EXPECT_THAT(e, HasSubstr("while answering 'build'"));
}

TEST(WorkerFaultsTest, KillIsReportedAsPossiblyOutOfMemory) {
  Fault fault("sigkill-at-run");
  auto model = backend_named("jax").prepare(ff(), "eager", deadline());
  const std::string e = failure_of([&] { model->run(); });
  EXPECT_THAT(e, HasSubstr("was killed by signal 9"));
  EXPECT_THAT(e, HasSubstr("out-of-memory killer"));
}

TEST(WorkerFaultsTest, RealOutOfMemoryIsReportedAsSuch) {
  Fault fault("oom-at-build");
  try {
    backend_named("jax").prepare(ff(), "eager", deadline());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
    EXPECT_THAT(std::string(e.what()), HasSubstr("MemoryError"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("(out of memory)"));
  }
}

TEST(WorkerFaultsTest, RepliesWithoutEnvironmentOrTelemetryLeaveThoseFactsOutAndTheRunGoesOn) {
  // a missing key of a const reply was read with operator[] (undefined behaviour once asserts are
  // compiled out); a reply without them is answered, with the facts they would have given absent
  setenv("NEURALCOST_FAULT_KEY", "environment", 1);
  for (const char* fault_name : {"without-at-hello", "without-at-build"}) {
    Fault fault(fault_name);
    auto model = backend_named("jax").prepare(ff(), "eager", deadline());
    model->run();
    const auto env = model->environment();
    EXPECT_EQ(env.at("framework_mode"), "eager") << fault_name;
    EXPECT_EQ(env.count(std::string(fault_name) == "without-at-hello" ? "python" : "blas_library"), 0u) << fault_name;
  }
  setenv("NEURALCOST_FAULT_KEY", "telemetry", 1);
  Fault fault("without-at-memory");
  auto model = backend_named("jax").prepare(ff(), "eager", deadline());
  model->run();
  const auto env = model->environment();
  EXPECT_EQ(env.count("memory.process_peak_rss_bytes"), 0u);
  EXPECT_EQ(env.count("memory"), 0u);  // not a failure: the reply had nothing to say
  EXPECT_EQ(env.count("blas_library"), 1u);
  unsetenv("NEURALCOST_FAULT_KEY");
}

TEST(WorkerFaultsTest, AWorkerSilentAtHelloIsKilledAtTheTimeoutWithOneErrorLine) {
  Fault fault("hang-at-hello");
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = run_cli(
      "profile --backend jax --model ff --batch 2 --budget 0.2 --layer-runs 0 "
      "--warmup-seconds 0 --hardware epyc-9654 --allow-hardware-mismatch --worker-timeout 2");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 2 + 5);  // hello waited 120 s whatever --worker-timeout said
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: ff (jax eager, batch 2): the jax worker did not answer 'hello' "
                                           "within 2 s (--worker-timeout); it was killed"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(WorkerFaultsTest, HangIsKilledAtTheDeadline) {
  Fault fault("hang-at-run");
  // the start (importing JAX) and the build must fit in the deadline too, on a busy machine
  auto model = backend_named("jax").prepare(ff(), "eager", deadline(10));
  const auto start = std::chrono::steady_clock::now();
  const std::string e = failure_of([&] { model->run(); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(e, HasSubstr("the jax worker did not answer 'run' within 10 s (--worker-timeout); it was killed"));
  EXPECT_GE(waited, 9.9);
  EXPECT_LT(waited, 15);
}

TEST(WorkerFaultsTest, ARunRequestWaitsForItsPassesPlusTheTimeoutNotTheTimeoutPerPass) {
  Fault fault("hangsecond-at-run");
  auto model = backend_named("jax").prepare(ff(), "eager", deadline(10));
  model->run();  // answered: the pass time is known, so the next request carries many passes
  const auto start = std::chrono::steady_clock::now();
  const std::string e = failure_of([&] {
    for (int i = 0; i < 5000; ++i) model->run();
  });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(e, HasSubstr("did not answer 'run'"));
  EXPECT_LT(waited, 10 + 5);  // was 10 s x the request's passes (up to 1000)
}

/// The session ids of the processes alive now that belong to session `sid`.
std::vector<int> processes_of_session(pid_t sid) {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) continue;
    if (session == sid && state != 'Z') pids.push_back(std::stoi(name));
  }
  return pids;
}

bool alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && line[close + 2] != 'Z';
}

/// Sends `sig` to a profile of ff (runs normally) and cnn (its worker hangs with a child in a
/// session of its own) while cnn runs; expects every process of ours ended, ff's run in the -o
/// file and the exit status 128 + sig.
void expect_signal_ends_everything_and_keeps_what_finished(int sig) {
  Fault fault("orphan-at-run");
  const std::string dir = ::testing::TempDir() + "/nc_signal_" + std::to_string(sig) + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string pidfile = dir + "/pids", out = dir + "/out.json";
  setenv("NEURALCOST_FAULT_MODEL", "cnn", 1);
  setenv("NEURALCOST_FAULT_PIDFILE", pidfile.c_str(), 1);
  const pid_t cli = ::fork();
  ASSERT_GE(cli, 0);
  if (cli == 0) {
    ::setsid();  // a session of its own: every process it starts is found by session id
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(NEURALCOST_CLI, NEURALCOST_CLI, "profile", "--backend", "jax", "--model", "ff,cnn", "--batch", "2",
            "--budget", "0.2", "--layer-runs", "0", "--warmup-seconds", "0", "--hardware", "epyc-9654",
            "--allow-hardware-mismatch", "--worker-timeout", "120", "-o", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  unsetenv("NEURALCOST_FAULT_MODEL");
  unsetenv("NEURALCOST_FAULT_PIDFILE");
  int worker = 0, child = 0;
  for (int i = 0; i < 1200 && !(std::ifstream(pidfile) >> worker >> child); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(child, 0) << "the hanging worker never started";
  ASSERT_TRUE(alive(worker) && alive(child));
  ::kill(cli, sig);
  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  while (::waitpid(cli, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "still running 20 s after signal " << sig;
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(alive(worker));
  EXPECT_FALSE(alive(child));  // out of the worker's process group, ended all the same
  EXPECT_THAT(processes_of_session(cli), ::testing::IsEmpty());
  // the finished run (ff) is in the result file; the interrupted one is not
  const auto j = nlohmann::json::parse(std::ifstream(out));
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["model"], "ff");
  EXPECT_FALSE(j["runs"][0]["failed"].get<bool>());
  std::filesystem::remove_all(dir);
}

TEST(WorkerFaultsTest, CtrlCEndsTheRunAndEveryProcessOfOursAndKeepsWhatFinished) {
  expect_signal_ends_everything_and_keeps_what_finished(SIGINT);
}

TEST(WorkerFaultsTest, SigtermEndsTheRunAndEveryProcessOfOursAndKeepsWhatFinished) {
  expect_signal_ends_everything_and_keeps_what_finished(SIGTERM);
}

TEST(WorkerFaultsTest, AWorkersLastWordsCutInsideACharacterKeepTheJsonReportValid) {
  // its last line is cut at 500 bytes, in the middle of a two-byte character: one invalid byte
  // made the whole JSON report unwritable (exit 2, no output)
  Fault fault("babble-at-build");
  const CliResult r = run_cli(
      "profile --backend jax --model ff --batch 2 --budget 0.2 --layer-runs 0 "
      "--warmup-seconds 0 --hardware epyc-9654 --allow-hardware-mismatch --format json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // throws on invalid UTF-8
  ASSERT_EQ(j["runs"].size(), 1u);
  const std::string error = j["runs"][0]["error"].get<std::string>();
  EXPECT_THAT(error, HasSubstr("the jax worker exited with status 3 while answering 'build'"));
  EXPECT_THAT(error, HasSubstr("faulty worker: \u00e9\u00e9"));
  EXPECT_THAT(error, ::testing::EndsWith("\u00e9\ufffd"));  // the cut character, replaced
}

TEST(WorkerFaultsTest, MemoryThatGrowsEveryPassMistrustsTheCellWithItsGrowth) {
  // a forward pass, and a training step (issue 27: memory that grows from step to step)
  for (const char* workload : {"", " --train"}) {
    SCOPED_TRACE(workload);
    const std::string cmd =
        std::string(
            "profile --model ff --backend torch --batch 2 --threads 1 --rounds 6 --budget 0.3 "
            "--layer-runs 1 --format json --hardware " NEURALCOST_TEST_INPUTS "/good/test_cpu_2core.json") +
        workload;
    CliResult leaking;
    {
      Fault leak("leak-at-build");
      leaking = run_cli(cmd);
    }
    ASSERT_EQ(leaking.exit_code, 0) << leaking.err;
    EXPECT_THAT(leaking.out, HasSubstr("memory grows pass by pass: the model's process grew by"));
    EXPECT_THAT(leaking.out, HasSubstr("\"verdict\": \"mistrusted\""));
    // the same cell without the leak: its memory does not grow pass by pass
    const CliResult steady = run_cli(cmd);
    ASSERT_EQ(steady.exit_code, 0) << steady.err;
    EXPECT_THAT(steady.out, ::testing::Not(HasSubstr("memory grows pass by pass")));
  }
}

TEST(WorkerFaultsTest, AWorkerSlowToExitIsReportedByItsOwnStatusNotAsKilledForMemory) {
  // it closed its output and exited 1.5 s later: waiting 0.5 s for the status, the core killed
  // it and reported "killed by signal 9: the kernel's out-of-memory killer does this" (seen in
  // a loaded suite, where JAX's teardown took that long)
  Fault fault("linger-at-build");
  const CliResult r = run_cli(
      "profile --backend jax --model ff --batch 2 --budget 0.2 --layer-runs 0 "
      "--warmup-seconds 0 --hardware epyc-9654 --allow-hardware-mismatch");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the jax worker exited with status 3 while answering 'build'"));
  EXPECT_THAT(r.err, Not(HasSubstr("out-of-memory")));
}

TEST(WorkerFaultsTest, GarbageIsNotAReply) {
  Fault fault("garbage-at-capture");
  auto model = backend_named("jax").prepare(ff(), "eager", deadline());
  const std::string e = failure_of([&] { model->captured_graph(); });
  EXPECT_THAT(e, HasSubstr("answered 'capture' with a line that is not a protocol reply: 'Traceback"));
}

TEST(WorkerFaultsTest, AnotherProtocolIsRefused) {
  Fault fault("protocol-at-hello");
  const std::string e = failure_of([] { backend_named("jax").prepare(ff(), "eager", deadline()); });
  EXPECT_THAT(e, HasSubstr("the jax worker answered hello with protocol 99 and framework 'jax'; expected protocol 4"));
}

TEST(WorkerFaultsTest, AFailedRunIsRecordedAndTheOthersGoOn) {
  // killed at its first run request: fails at once (a hang's deadline is HangIsKilledAtTheDeadline's)
  Fault fault("sigkill-at-run");
  ModelRequest base = ff();
  ProfileOptions options;
  options.run = deadline(10);
  options.modes = {"eager", "jit"};
  options.batches = {2};
  options.layer_runs = 0;
  options.timing.budget_seconds = 0.2;
  options.timing.warmup_seconds = 0;
  // the fault kills every run's worker, so both fail, each on its own, with the reason recorded
  const auto runs = profile(backend_named("jax"), base, HardwareDatabase::builtin().get("epyc-9654"), options);
  ASSERT_EQ(runs.size(), 2u);
  for (const ProfileRun& r : runs) {
    EXPECT_TRUE(r.outcome.failed());
    EXPECT_THAT(r.outcome.error(), HasSubstr("was killed by signal 9"));
  }
  EXPECT_EQ(runs[0].mode, "eager");
  EXPECT_EQ(runs[1].mode, "jit");
}

TEST(WorkerPoolTest, ModelsOfOnePoolShareAProcessAndOneThatEndsItEndsTheOtherAsAVictim) {
  Fault fault("sigkill-at-run");
  setenv("NEURALCOST_FAULT_MODEL", "cnn", 1);
  RunOptions pooled = deadline(30);
  pooled.process_pool = "test pool";
  ModelRequest cnn = ff();
  cnn.model = "cnn";
  const Backend& jax = backend_named("jax");
  auto a = jax.prepare(ff(), "eager", pooled);
  auto b = jax.prepare(cnn, "eager", pooled);
  EXPECT_TRUE(a->shares_process() && b->shares_process());
  EXPECT_THAT(a->environment().at("worker_process"), HasSubstr("shared: one jax eager process"));
  EXPECT_THAT(b->environment().at("worker_process"), HasSubstr("(this one: 1)"));
  a->run();
  EXPECT_TRUE(a->last_run_seconds().has_value());
  // cnn's run kills the process: its own failure; ff's next run finds it gone: not ff's
  EXPECT_THAT(failure_of([&] { b->run(); }), HasSubstr("was killed by signal 9"));
  EXPECT_FALSE(b->lost_its_process());
  EXPECT_NE(failure_of([&] {
              for (int i = 0; i < 1000; ++i) a->run();
            }),
            "(no error)");
  EXPECT_TRUE(a->lost_its_process());
  // the pool starts a new process for the next model; a model without a pool has its own
  auto c = jax.prepare(ff(), "eager", pooled);
  c->run();
  EXPECT_FALSE(c->lost_its_process());
  auto own = jax.prepare(ff(), "eager", deadline(30));
  EXPECT_FALSE(own->shares_process());
  EXPECT_EQ(own->environment().at("worker_process"), "its own");
  unsetenv("NEURALCOST_FAULT_MODEL");
}

TEST(StudyTest, ACellThatKillsItsSharedWorkerFailsAloneAndItsNeighbourKeepsAllItsRounds) {
  const std::string out = ::testing::TempDir() + "/nc_pool_" + std::to_string(::getpid()) + ".jsonl";
  std::filesystem::remove(out);
  Fault fault("sigkill-at-run");
  setenv("NEURALCOST_FAULT_MODEL", "cnn", 1);
  const CliResult r = run_cli(
      "study --backend jax --model ff,cnn --mode eager --batch 1 --budget 0.1 --layer-runs 0 "
      "--warmup-seconds 0 --hardware epyc-9654 --allow-hardware-mismatch --worker-timeout 60 "
      "--seed 1 --rounds 5 --max-rounds 5 -o " +
      out);
  unsetenv("NEURALCOST_FAULT_MODEL");
  std::map<std::string, nlohmann::json> cells;
  std::map<std::string, int> rounds;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("model")) cells[j["model"].get<std::string>()] = j;
    if (j.contains("round")) ++rounds[j["round"]["cell"].get<std::string>().substr(0, 3)];
  }
  ASSERT_EQ(cells.size(), 2u) << r.err;
  EXPECT_FALSE(cells["ff"].contains("error")) << cells["ff"].dump();
  EXPECT_EQ(rounds["ff|"], 5);  // one ended by cnn's kill, taken again in the shared process's successor
  EXPECT_THAT(cells["cnn"].value("error", ""), HasSubstr("was killed by signal 9")) << cells["cnn"].dump();
  EXPECT_EQ(rounds["cnn"], 0);
  std::filesystem::remove(out);
}

/// The cells (model|backend|mode|batch) of a results file's run lines, and whether every line is whole.
std::multiset<std::string> cells_of(const std::string& path, bool* whole = nullptr) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (whole) *whole = text.empty() || text.back() == '\n';
  std::multiset<std::string> cells;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("model"))
      cells.insert(fmt::format("{}|{}|{}|{}", j["model"].get<std::string>(), j["backend"].get<std::string>(),
                               j["mode"].get<std::string>(), j["batch"].get<int>()));
  }
  return cells;
}

int run_cli_status(const std::vector<std::string>& args, pid_t* pid_out = nullptr, bool wait = true) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    std::vector<char*> argv = {const_cast<char*>(NEURALCOST_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(NEURALCOST_CLI, argv.data());
    ::_exit(127);
  }
  if (pid_out) *pid_out = pid;
  if (!wait) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(StudyTest, AnInterruptedStudyResumesToTheSameCellsAndNeverTruncatesALine) {
  const std::string dir = ::testing::TempDir() + "/nc_study_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> study = {"study", "--backend", "jax", "--model", "ff,cnn", "--mode", "eager",
                                          "--batch", "1", "--budget", "0.1", "--layer-runs", "0", "--warmup-seconds",
                                          "0", "--hardware", "epyc-9654", "--allow-hardware-mismatch",
                                          "--worker-timeout", "120",
                                          // seed 1 prepares ff's group first, so ff has a round before
                                          // cnn's first one; the rounds of both cells interleave
                                          "--seed", "1", "--max-rounds", "6"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = study;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // the uninterrupted study: 2 cells
  const std::string whole = dir + "/whole.jsonl";
  ASSERT_EQ(run_cli_status(with({"-o", whole})), 0);
  const auto expected = cells_of(whole);
  ASSERT_EQ(expected.size(), 2u);
  // again into the same file: refused without --resume; --resume with other settings: refused
  EXPECT_EQ(run_cli_status(with({"-o", whole})), 1);
  EXPECT_EQ(run_cli_status(with({"-o", whole, "--resume", "--budget", "0.3"})), 1);
  EXPECT_EQ(cells_of(whole), expected);
  // interrupted while cnn's worker hangs (ff has rounds, no cell is done), then resumed without the fault
  const std::string part = dir + "/part.jsonl", pidfile = dir + "/pids";
  pid_t cli = 0;
  {
    Fault fault("orphan-at-run");
    setenv("NEURALCOST_FAULT_MODEL", "cnn", 1);
    setenv("NEURALCOST_FAULT_PIDFILE", pidfile.c_str(), 1);
    run_cli_status(with({"-o", part}), &cli, false);
    unsetenv("NEURALCOST_FAULT_MODEL");
    unsetenv("NEURALCOST_FAULT_PIDFILE");
  }
  int worker = 0, child = 0;
  for (int i = 0; i < 1200 && !(std::ifstream(pidfile) >> worker >> child); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(child, 0);
  ::kill(cli, SIGINT);
  int status = 0;
  ::waitpid(cli, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  bool complete_lines = false;
  const auto before = cells_of(part, &complete_lines);
  EXPECT_TRUE(complete_lines);
  EXPECT_TRUE(before.empty());  // the rounds interleave: no cell has all of its rounds yet
  EXPECT_FALSE(alive(child));
  std::vector<std::string> kept;  // the header and ff's rounds so far, kept for the resumed study
  int rounds = 0;
  {
    std::ifstream in(part);
    for (std::string line; std::getline(in, line);) {
      kept.push_back(line);
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("round")) continue;
      ++rounds;
      EXPECT_EQ(j["round"].value("cell", "").rfind("ff|", 0), 0u) << line;
    }
  }
  EXPECT_GE(rounds, 1);
  // a write cut short is dropped on resume
  { std::ofstream(part, std::ios::app) << "{\"model\": \"cnn\", \"back"; }
  ASSERT_EQ(run_cli_status(with({"-o", part, "--resume"})), 0);
  EXPECT_EQ(cells_of(part, &complete_lines), expected);
  EXPECT_TRUE(complete_lines);
  {
    // the resumed study kept every whole line and took ff's rounds as its first ones
    std::ifstream in(part);
    std::size_t i = 0;
    int ff_rounds = 0;
    for (std::string line; std::getline(in, line); ++i) {
      if (i < kept.size()) EXPECT_EQ(line, kept[i]);
      const auto j = nlohmann::json::parse(line);
      ff_rounds += j.contains("round") && j["round"].value("cell", "").rfind("ff|", 0) == 0 ? 1 : 0;
    }
    EXPECT_GE(i, kept.size());
    EXPECT_EQ(ff_rounds, 6);  // --max-rounds 6: the kept ones and the rest, none twice
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace neuralcost
