// Measured training steps in the torch worker (PyTorch 2 of the project's .venv): the step trains
// (the loss falls, eager and torch.compile), its peak memory comes from torch.profiler's memory
// events and holds what a step must hold, the phases are timed, and the worker refuses bad
// training settings with one line. `profile --train` in eager mode (the torch worker and
// LibTorch) has a forward and a backward row per layer, named as analyze names it, each holding
// the step-graph records of its phase.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
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
  // one loss, of the network's output (not of autograd's detaches of saved tensors: the capture
  // names the model's outputs)
  const auto losses = std::count_if(step.graph.ops().begin(), step.graph.ops().end(),
                                    [](const OpRecord& op) { return op.kind == OpKind::kLoss; });
  EXPECT_EQ(losses, 1);
  for (int i = 0; i < 30; ++i) model->run();
  const std::optional<StepMemory> m = model->step_memory();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->start_bytes.has_value());
  EXPECT_THAT(m->source, HasSubstr("torch.profiler(profile_memory=True)"));
  const std::uint64_t params = f.totals.parameter_count * 4;
  EXPECT_GE(*m->start_bytes, 3 * params);              // parameters and Adam's two moments
  EXPECT_GE(m->peak_bytes, *m->start_bytes + params);  // every gradient at once
  const auto env = model->environment();
  EXPECT_EQ(env.at("train_loss"), "cross_entropy");  // the keys LibTorch writes too
  EXPECT_THAT(env.at("train_labels"), HasSubstr("integers(0, 10, "));
  EXPECT_THAT(env.at("train_applied"), ::testing::StartsWith("adam, learning_rate "));
  EXPECT_LT(number(env, "train_loss_last"), 0.8 * number(env, "train_loss_first"));
  const LayerTiming t = model->profile_layers(2);
  EXPECT_TRUE(t.step_phases);
  // eager: each phase of each module the step ran, the loss's and the optimizer's
  ASSERT_EQ(t.event_modules.size(), t.event_names.size());
  EXPECT_EQ(t.event_names.back(), "optimizer");
  EXPECT_THAT(t.event_modules, ::testing::IsSupersetOf({"block0.linear", "loss", "classifier"}));
}

/// The module of a step-graph record: a forward record's own, a gradient's forward op's.
std::string module_of(const OpRecord& op) {
  const OpRecord& forward = op.differentiates ? *op.differentiates : op;
  return forward.kind == OpKind::kLoss ? "loss" : forward.attributes.get_string("module", "");
}

class StepLayers : public testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(StepLayers, EagerStepHasAForwardAndABackwardRowPerLayer) {
  const auto& [backend_name, name] = GetParam();
  const Backend& backend = backend_named(backend_name);
  if (auto why = backend.unavailable_reason()) GTEST_SKIP() << backend_name << " cannot run here: " << *why;
  ModelRequest request;
  request.model = name;
  request.batch = 4;
  ProfileOptions options;
  options.modes = {"eager"};
  options.batches = {4};
  options.layer_runs = 3;
  options.timing.budget_seconds = 0.2;
  options.timing.warmup_iterations = 1;
  options.timing.warmup_seconds = 0;
  options.run = training();
  const auto runs = profile(backend, request, HardwareDatabase::builtin().get("epyc-9654"), options);
  ASSERT_EQ(runs.size(), 1u);
  const ProfileRun& run = runs[0];
  ASSERT_FALSE(run.outcome.failed()) << run.outcome.error();
  ASSERT_FALSE(run.layers.empty()) << ::testing::PrintToString(run.warnings);
  std::vector<std::string> rows;
  std::uint64_t flops = 0;
  std::size_t records = 0;
  double measured = 0;
  for (const LayerMeasurement& l : run.layers) {
    rows.push_back(layer_name(l));
    SCOPED_TRACE(rows.back());
    // each row's counts are its records', each record of the row's phase and module
    std::uint64_t own = 0;
    for (std::size_t i : l.records) {
      const OpRecord& op = run.analysis.graph.op(i);
      ASSERT_EQ(run.analysis.ops.at(i).op_index, i);
      own += run.analysis.ops[i].cost.flops;
      const Pass pass = pass_of(op);
      const std::string phase = pass == Pass::kOptimizer ? "optimizer"
                                : pass == Pass::kForward ? "forward"
                                                         : "backward";
      EXPECT_EQ(phase, l.pass) << op.name;
      // (a sum of partial gradients has no forward op: it goes to its tensor's producer's row)
      if (l.pass == "forward" || op.differentiates) EXPECT_EQ(module_of(op), l.module) << op.name;
    }
    EXPECT_EQ(own, l.flops);
    if (!l.records.empty()) EXPECT_GT(l.profiled_seconds, 0);
    flops += l.flops;
    records += l.records.size();
    measured += l.measured_seconds;
  }
  // every record of the step in one row: the rows add up to the step's counts and its median
  EXPECT_EQ(flops, run.analysis.totals.flops);
  EXPECT_EQ(records, run.analysis.ops.size());
  EXPECT_GE(run.unattributed_seconds, 0);
  EXPECT_NEAR(measured + run.unattributed_seconds, run.timing.summary.median, 1e-9 * run.timing.summary.median);
  ReferenceOptions o;
  o.model = name;
  o.batch = 4;
  const OpGraph expected = build_reference_model(o);
  for (const OpRecord& op : expected.ops()) {
    for (const char* phase : {"forward: ", "backward: "}) {
      EXPECT_THAT(rows, ::testing::Contains(phase + op.name)) << ::testing::PrintToString(rows);
    }
  }
  for (const char* row : {"forward: loss", "backward: loss", "optimizer"}) EXPECT_THAT(rows, ::testing::Contains(row));
  // the torch worker times them by its compiled step timer (the build makes it), not by hooks
  if (backend_name == "torch") {
    ASSERT_TRUE(run.contract.count("layer_timer"));
    EXPECT_THAT(run.contract.at("layer_timer"), HasSubstr("compiled observer")) << run.contract.at("layer_timer");
  }
  // every record has a timed row
  for (const std::string& w : run.warnings) EXPECT_THAT(w, ::testing::Not(HasSubstr("timed no event")));
  // the rows are disjoint stretches of the step: in each profiled step, the rows' times add up to
  // no more than the step's. (Checked pass by pass: the run's "more than the profiled pass"
  // warning compares medians over 3 passes, whose sum exceeded the median step by 8 % under load.)
  auto model = backend.prepare(request, "eager", training());
  const LayerTiming timing = model->profile_layers(3);
  ASSERT_EQ(timing.wall_seconds.size(), 3u);
  for (std::size_t r = 0; r < timing.wall_seconds.size(); ++r) {
    double sum = 0;
    for (const std::vector<double>& event : timing.seconds) sum += event.at(r);
    EXPECT_LE(sum, timing.wall_seconds[r] * (1 + 1e-9)) << "pass " << r;
  }
}

// the torch worker's compiled step timer; LibTorch's user scopes and node hooks (its plugin)
INSTANTIATE_TEST_SUITE_P(Eager, StepLayers,
                         testing::Values(std::pair<std::string, std::string>{"torch", "ff"},
                                         std::pair<std::string, std::string>{"torch", "cnn"},
                                         std::pair<std::string, std::string>{"libtorch", "ff"},
                                         std::pair<std::string, std::string>{"libtorch", "cnn"}),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

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
