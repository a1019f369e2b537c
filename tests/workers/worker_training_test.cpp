// Measured training steps in the torch worker (PyTorch 2 of the project's .venv): the step trains
// (the loss falls, eager and torch.compile), its peak memory comes from torch.profiler's memory
// events and holds what a step must hold, the phases are timed, and the worker refuses bad
// training settings with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

ModelRequest small(const std::string& model) {
  ModelRequest r;
  r.model = model;
  r.batch = 2;
  r.seq = 4;
  r.width = 16;
  r.depth = 1;
  return r;
}

RunOptions training() {
  RunOptions run;
  run.threads = 1;
  TrainRun t;
  t.hyper.learning_rate = 1e-2;
  run.train = t;
  return run;
}

double number(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  if (it == env.end()) throw std::runtime_error("no " + key);
  return std::stod(it->second);
}

TEST(TorchWorkerTraining, EagerStepTrainsReportsItsPeakAndPhases) {
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  auto model = backend_named("torch").prepare(small("ff"), "eager", training());
  const OpGraph forward = model->captured_graph();
  const Analysis f = analyze(forward, hw, {2});
  const Analysis step = analyze(training_step(forward, TrainingOptions{}), hw, {2});
  EXPECT_GT(step.totals.contraction_flops, f.totals.contraction_flops);
  for (int i = 0; i < 30; ++i) model->run();
  const std::optional<StepMemory> m = model->step_memory();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->start_bytes.has_value());
  EXPECT_THAT(m->source, HasSubstr("torch.profiler(profile_memory=True)"));
  const std::uint64_t params = f.totals.parameter_count * 4;
  EXPECT_GE(*m->start_bytes, 3 * params);            // parameters and Adam's two moments
  EXPECT_GE(m->peak_bytes, *m->start_bytes + params);  // every gradient at once
  const auto env = model->environment();
  EXPECT_EQ(env.at("train_loss"), "cross_entropy");  // the keys LibTorch writes too
  EXPECT_THAT(env.at("train_labels"), HasSubstr("integers(0, 10, "));
  EXPECT_THAT(env.at("train_applied"), ::testing::StartsWith("adam, learning_rate "));
  EXPECT_LT(number(env, "train_loss_last"), 0.8 * number(env, "train_loss_first"));
  const LayerTiming t = model->profile_layers(2);
  EXPECT_TRUE(t.step_phases);
  EXPECT_EQ(t.event_names, (std::vector<std::string>{"forward", "backward", "optimizer"}));
}

TEST(TorchWorkerTraining, CompiledStepTrainsThroughTheCompiledProgram) {
  auto model = backend_named("torch").prepare(small("ff"), "compiled", training());
  for (int i = 0; i < 30; ++i) model->run();
  const auto env = model->environment();
  EXPECT_LT(number(env, "train_loss_last"), 0.8 * number(env, "train_loss_first"));
  EXPECT_GE(number(env, "execution.compiled_programs"), 1);
  EXPECT_THAT(env.at("model_origin"), HasSubstr("torch.compile"));
}

TEST(TorchWorkerTraining, ModelFilesAreRefused) {
  ModelRequest file = small("/nonexistent/model.pt2");
  try {
    backend_named("torch").prepare(file, "eager", training());
    FAIL() << "a file trained";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("built-in networks only"), HasSubstr("neither a built-in")));
  }
}

}  // namespace
}  // namespace neuralcost
