// A worker that is missing, exits, crashes, is killed, hangs, runs out of memory or writes
// garbage fails its run with a message saying which; the profile pipeline records the failure
// and goes on. The faults are injected into the real JAX worker (tests/workers/faulty/).
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using testing::HasSubstr;

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

TEST(WorkerFaultsTest, HangIsKilledAtTheDeadline) {
  Fault fault("hang-at-run");
  // the build must fit in the deadline too, on a busy machine
  auto model = backend_named("jax").prepare(ff(), "eager", deadline(6));
  const auto start = std::chrono::steady_clock::now();
  const std::string e = failure_of([&] { model->run(); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(e, HasSubstr("the jax worker did not answer 'run' within 6 s (--worker-timeout); it was killed"));
  EXPECT_GE(waited, 5.9);
  EXPECT_LT(waited, 15);
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
  EXPECT_THAT(e, HasSubstr("the jax worker answered hello with protocol 99 and framework 'jax'; expected protocol 2"));
}

TEST(WorkerFaultsTest, AFailedRunIsRecordedAndTheOthersGoOn) {
  Fault fault("hang-at-run");
  ModelRequest base = ff();
  ProfileOptions options;
  options.run = deadline(6);
  options.modes = {"eager", "jit"};
  options.batches = {2};
  options.layer_runs = 0;
  options.timing.budget_seconds = 0.2;
  options.timing.warmup_seconds = 0;
  // the fault hangs every run, so both fail, each on its own, with the reason recorded
  const auto runs = profile(backend_named("jax"), base, HardwareDatabase::builtin().get("epyc-9654"), options);
  ASSERT_EQ(runs.size(), 2u);
  for (const ProfileRun& r : runs) {
    EXPECT_TRUE(r.outcome.failed());
    EXPECT_THAT(r.outcome.error(), HasSubstr("did not answer 'run' within 6 s"));
  }
}

}  // namespace
}  // namespace neuralcost
