// The worker backends with the real frameworks (JAX, TensorFlow, PyTorch 2 from the project's
// .venv): the compiled mode runs the compiled program, model files and bad requests. (That each
// builds the five reference networks as the C++ static model is tested in layer_names_test.)
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/python_worker/worker_backend.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

// The five reference networks in each worker are checked against the static model (parameters,
// contraction FLOPs, every op modeled, no compiled program in eager mode) by layer_names_test,
// in the runs that check their layer names: one framework process for both.

class CompiledModes : public testing::TestWithParam<std::string> {};

TEST_P(CompiledModes, RunAndCaptureTheSameProgram) {
  ModelRequest request;
  request.model = "transformer";
  request.batch = 2;
  RunOptions run;
  run.threads = 1;
  const Backend& backend = backend_named(GetParam());
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  auto compiled = backend.prepare(request, "compiled", run);
  compiled->run();
  ASSERT_TRUE(compiled->last_run_seconds().has_value());
  const Analysis a = analyze(compiled->captured_graph(), hw, {2});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 26216960u);
  // the passes ran the framework's compiled program (not just a mode read back): by its own
  // count, one program, compiled once and reused by every pass
  const auto env = compiled->environment();
  EXPECT_EQ(env.at("execution.compiled_programs"), "1") << env.at("execution.compiler");
  EXPECT_THAT(env.at("execution.compiler"), testing::Not(testing::StartsWith("none")));
  if (GetParam() == "torch") EXPECT_EQ(env.at("execution.graph_breaks"), "0");
}

INSTANTIATE_TEST_SUITE_P(Workers, CompiledModes, testing::Values("jax", "tensorflow", "torch"));

TEST(WorkerBackendTest, TensorflowXlaModeRuns) {
  ModelRequest request;
  request.model = "ff";
  request.batch = 4;
  auto model = backend_named("tensorflow").prepare(request, "xla");
  model->run();
  // XLA compiled the traced function (must-compile: no silent fallback to the graph) into a
  // non-empty program, and the passes ran that one function
  const auto env = model->environment();
  EXPECT_EQ(env.at("execution.compiled_programs"), "1");
  EXPECT_EQ(env.at("execution.xla_must_compile"), "true");
  EXPECT_GT(std::stoi(env.at("execution.xla_hlo_instructions")), 0);
}

TEST(WorkerBackendTest, RunRequestsCarryAbout2msOfPasses) {
  EXPECT_EQ(worker::passes_per_request(0), 1);  // nothing measured yet
  EXPECT_EQ(worker::passes_per_request(1e-4), 20);
  EXPECT_EQ(worker::passes_per_request(1e-3), 2);
  EXPECT_EQ(worker::passes_per_request(0.1), 1);      // a long pass: one per request
  EXPECT_EQ(worker::passes_per_request(1e-7), 1000);  // at most 1000
}

TEST(WorkerBackendTest, TorchEagerHasPerOpTimesOfTheCapturedOps) {
  ModelRequest request;
  request.model = "lstm";
  request.batch = 2;
  // a CPU's spec for these CPU runs (a GPU's is refused), far above this machine's roof
  const HardwareSpec hw = HardwareDatabase::builtin().get("epyc-9654");
  ProfileOptions options;
  options.timing.budget_seconds = 0.2;
  options.timing.warmup_seconds = 0;
  const auto torch_runs = profile(backend_named("torch"), request, hw, {{"eager"}, {2}, options.timing, 3});
  ASSERT_EQ(torch_runs.size(), 1u);
  ASSERT_FALSE(torch_runs[0].outcome.failed()) << torch_runs[0].outcome.error();
  EXPECT_EQ(torch_runs[0].profiled_passes, 3);
  bool lstm_timed = false;
  for (const LayerMeasurement& l : torch_runs[0].layers)
    lstm_timed = lstm_timed || (l.name == "aten::lstm" && l.measured_seconds > 0);
  EXPECT_TRUE(lstm_timed);
}

TEST(WorkerBackendTest, TorchExportProgramsCountLikeTheBuiltInNetwork) {
  // a user's model file: the reference cnn written by torch.export.save
  // written by CTest's fixture worker_model_files (tests/workers/make_model_files.sh)
  const std::string file = NEURALCOST_MODEL_FILES "/cnn.pt2";
  ModelRequest request;
  request.model = file;
  request.input_shapes = {{2, 3, 32, 32}};
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  auto model = backend_named("torch").prepare(request, "eager");  // compile: CompiledModes
  const Analysis a = analyze(model->captured_graph(), hw, {2});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 77322u);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 41290240u);
  request.input_shapes = {{2, 3, 16}};  // the program's input is 4-D
  try {
    backend_named("torch").prepare(request, "eager");
    FAIL() << "a wrong input shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("forward failed for input shape(s) 2x3x16"), std::string::npos) << e.what();
  }
  std::remove(file.c_str());
}

TEST(WorkerBackendTest, UnknownModelsAndModesNameTheProblem) {
  ModelRequest request;
  request.model = "resnet";
  try {
    backend_named("jax").prepare(request, "eager");
    FAIL() << "an unknown model was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'resnet'"), std::string::npos) << what;
    // the hidden test models of tests/workers/jax_loops_test.cpp are not offered to users
    EXPECT_EQ(what.find("lstm_while"), std::string::npos) << what;
    EXPECT_EQ(what.find("ff_cond"), std::string::npos) << what;
  }
  request.model = "ff";
  EXPECT_THROW(backend_named("torch").prepare(request, "jit"), Error);
}

}  // namespace
}  // namespace neuralcost
