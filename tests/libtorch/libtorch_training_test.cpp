// Measured training steps in the LibTorch backend: each reference network trains (its loss falls
// over a few steps, eager and TorchScript), the counting allocator's peak holds what a step must
// hold (gradients on top of parameters and optimizer state), the step graph counts more than the
// forward, each layer's forward and backward are timed in eager mode and the phases in compiled
// mode, and what cannot run is refused with the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/libtorch/counting_allocator.hpp"
#include "backends/libtorch/libtorch_backend.hpp"
#include "backends/libtorch/reference_modules.hpp"
#include "backends/libtorch/training_step.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/training/memory.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

ModelRequest small(const std::string& model) {
  ModelRequest r;
  r.model = model;
  r.batch = 2;
  r.seq = 4;
  r.width = 16;
  r.depth = 2;
  return r;
}

RunOptions training(Optimizer optimizer = Optimizer::kAdam, double learning_rate = 1e-2) {
  RunOptions run;
  run.threads = 1;
  TrainRun t;
  t.options.optimizer = optimizer;
  t.hyper.learning_rate = learning_rate;
  run.train = t;
  return run;
}

double number(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  if (it == env.end()) throw std::runtime_error("no " + key);
  return std::stod(it->second);
}

std::uint64_t parameter_bytes(const std::string& model) {
  auto net = libtorch::make_reference_net(small(model));
  std::uint64_t bytes = 0;
  for (const at::Tensor& p : net->parameters()) bytes += static_cast<std::uint64_t>(p.numel()) * 4;
  return bytes;
}

class TrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingTest, LossFallsOverStepsInBothModes) {
  for (const std::string mode : {"eager", "compiled"}) {
    auto model = libtorch_backend().prepare(small(GetParam()), mode, training());
    for (int i = 0; i < 30; ++i) model->run();
    const auto env = model->environment();
    EXPECT_EQ(env.at("train_loss"), "cross_entropy") << mode;  // every reference network ends in 10 classes
    EXPECT_EQ(env.at("train_steps_run"), "30") << mode;
    EXPECT_LT(number(env, "train_loss_last"), 0.8 * number(env, "train_loss_first")) << mode;
  }
}

TEST_P(TrainingTest, StepGraphCountsMoreThanTheForwardAndLayersOrPhasesAreTimed) {
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  auto model = libtorch_backend().prepare(small(GetParam()), "eager", training());
  const OpGraph forward = model->captured_graph();
  const Analysis f = analyze(forward, hw, {2});
  const Analysis step = analyze(training_step(forward, TrainingOptions{}), hw, {2});
  EXPECT_GT(step.totals.flops, f.totals.flops);
  EXPECT_GT(step.totals.contraction_flops, f.totals.contraction_flops);
  // eager: each layer's forward and backward (its user scope), the loss's, the optimizer's
  const LayerTiming t = model->profile_layers(2);
  EXPECT_TRUE(t.step_phases);
  ASSERT_EQ(t.event_modules.size(), t.event_names.size());
  EXPECT_THAT(t.event_modules, ::testing::IsSupersetOf({"classifier", "loss"}));
  EXPECT_THAT(t.event_names, ::testing::IsSupersetOf({"forward", "backward", "optimizer"}));
  ASSERT_EQ(t.wall_seconds.size(), 2u);
  for (int run = 0; run < 2; ++run) {
    double sum = 0;
    for (const auto& event : t.seconds) sum += event.at(run);
    EXPECT_LE(sum, t.wall_seconds[run]);  // disjoint stretches of the step
  }
  // compiled (TorchScript: no scopes): the three phases
  auto compiled = libtorch_backend().prepare(small(GetParam()), "compiled", training());
  const LayerTiming p = compiled->profile_layers(2);
  EXPECT_TRUE(p.step_phases);
  EXPECT_TRUE(p.event_modules.empty());
  EXPECT_EQ(p.event_names, (std::vector<std::string>{"forward", "backward", "optimizer"}));
  ASSERT_EQ(p.seconds.size(), 3u);
  for (const auto& phase : p.seconds) {
    ASSERT_EQ(phase.size(), 2u);
    EXPECT_GT(phase[0], 0);
  }
}

TEST_P(TrainingTest, PeakMemoryHoldsGradientsOnTopOfParametersAndAdamState) {
  auto model = libtorch_backend().prepare(small(GetParam()), "eager", training());
  const std::optional<StepMemory> m = model->step_memory();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->start_bytes.has_value());
  const std::uint64_t params = parameter_bytes(GetParam());
  // between steps: parameters and Adam's two moments (inputs and labels on top)
  EXPECT_GE(*m->start_bytes, 3 * params);
  // during the step every gradient is live at once (they are set to none only after it)
  EXPECT_GE(m->peak_bytes, *m->start_bytes + params);
  EXPECT_THAT(m->source, HasSubstr("counting CPU allocator"));
  EXPECT_THAT(m->includes, HasSubstr("allocations in the step"));
}

// bf16-mixed is torch.autocast's: contractions in bf16 over fp32 parameters (eager: autocast's
// casts; TorchScript: its autocast pass's), the same contraction FLOPs as fp32, and a measured
// peak inside the autocast ledger's interval.
TEST_P(TrainingTest, Bf16MixedRunsUnderAutocastInsideItsLedger) {
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  for (const std::string mode : {"eager", "compiled"}) {
    RunOptions run = training();
    run.train->options.precision = Precision::kBf16Mixed;
    auto model = libtorch_backend().prepare(small(GetParam()), mode, run);
    for (int i = 0; i < 30; ++i) model->run();
    const auto env = model->environment();
    EXPECT_LT(number(env, "train_loss_last"), number(env, "train_loss_first")) << mode;
    const OpGraph forward = model->captured_graph();
    // eager: an op's autocast casts are inside it (it reads fp32, writes bf16); TorchScript's are ops
    bool bf16_contraction = false;
    for (const OpRecord& op : forward.ops()) {
      if (traits_of(op.kind).unit != ComputeUnit::kMatrix) continue;
      for (const TensorDesc& y : op.outputs) bf16_contraction = bf16_contraction || y.dtype == DType::kBf16;
    }
    EXPECT_TRUE(bf16_contraction) << mode;
    for (const ParameterDesc& p : forward.unique_parameters()) {
      if (p.trainable) EXPECT_EQ(p.dtype, DType::kFp32) << mode << " " << p.id;
    }
    TrainingOptions autocast = run.train->options;
    autocast.autocast = true;
    const Analysis step = analyze(training_step(forward, autocast), hw, {2});
    EXPECT_TRUE(step.complete()) << mode;
    auto fp32 = libtorch_backend().prepare(small(GetParam()), mode, training());
    EXPECT_EQ(step.totals.contraction_flops,
              analyze(training_step(fp32->captured_graph(), TrainingOptions{}), hw, {2}).totals.contraction_flops)
        << mode;
    fp32.reset();  // the allocator counts every live storage of the process
    const MemoryLedger ledger = memory_ledger(forward, autocast);
    EXPECT_EQ(ledger.master_weight_bytes, 0u);
    EXPECT_EQ(ledger.parameter_bytes, parameter_bytes(GetParam()));
    const std::optional<StepMemory> m = model->step_memory();
    ASSERT_TRUE(m.has_value());
    EXPECT_GE(m->peak_bytes, ledger.total_bytes(MemoryBound::kLower)) << mode;
    EXPECT_LE(m->peak_bytes, ledger.total_bytes(MemoryBound::kUpper)) << mode;
  }
}

// Under autocast every parameter still gets its gradient through autocast's casts and is updated
// in fp32 (a cast that cut the graph would leave a layer untrained while the loss still fell).
TEST_P(TrainingTest, Bf16MixedUpdatesEveryParameterInFp32) {
  auto net = libtorch::make_reference_net(small(GetParam()));
  net->train();
  TrainRun train;
  train.options.precision = Precision::kBf16Mixed;
  train.hyper.learning_rate = 1e-2;
  libtorch::TrainingStep step([net](const std::vector<at::Tensor>& in) { return net->forward(in[0]); },
                              net->parameters(), {libtorch::reference_input(small(GetParam()))}, train);
  std::vector<at::Tensor> before;
  for (const at::Tensor& p : net->parameters()) before.push_back(p.detach().clone());
  for (int i = 0; i < 3; ++i) step.step();
  const auto named = net->named_parameters();
  for (std::size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].value().scalar_type(), at::kFloat) << named[i].key();
    EXPECT_FALSE(torch::equal(before[i], named[i].value())) << named[i].key() << " was not updated";
  }
}

INSTANTIATE_TEST_SUITE_P(All, TrainingTest, ::testing::Values("ff", "cnn", "rnn", "lstm", "transformer"));

TEST(TrainingStepTest, EveryOptimizerChangesTheParameters) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam, Optimizer::kAdamW}) {
    auto net = libtorch::make_reference_net(small("ff"));
    net->train();
    TrainRun train;
    train.options.optimizer = o;
    libtorch::TrainingStep step([net](const std::vector<at::Tensor>& in) { return net->forward(in[0]); },
                                net->parameters(), {libtorch::reference_input(small("ff"))}, train);
    const at::Tensor before = net->parameters().front().detach().clone();
    const double first = step.step();
    for (int i = 0; i < 10; ++i) step.step();
    EXPECT_FALSE(torch::equal(before, net->parameters().front())) << optimizer_name(o);
    EXPECT_LT(step.step(), first) << optimizer_name(o);
    for (const at::Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << "zero-grad sets to none";
  }
}

TEST(CountingAllocatorTest, CountsLiveBytesAndThePeak) {
  libtorch::install_counting_allocator();
  ASSERT_TRUE(libtorch::counting_allocator_installed());
  libtorch::reset_allocator_peak();
  const std::uint64_t start = libtorch::allocator_count().current_bytes;
  {
    at::Tensor a = torch::empty({1000}, torch::kFloat32);
    at::Tensor b = torch::empty({500}, torch::kFloat32);
    EXPECT_EQ(libtorch::allocator_count().current_bytes, start + 6000);
  }
  const libtorch::AllocatorCount c = libtorch::allocator_count();
  EXPECT_EQ(c.current_bytes, start);
  EXPECT_EQ(c.peak_bytes, start + 6000);
  EXPECT_EQ(c.allocations, 2u);
}

TEST(LibTorchTrainingTest, RefusesWhatItCannotRun) {
  RunOptions run = training();
  run.train->options.precision = Precision::kFp16Mixed;
  try {
    libtorch_backend().prepare(small("ff"), "eager", run);
    FAIL() << "fp16-mixed ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_THAT(e.what(), HasSubstr("fp32 or bf16-mixed"));
  }
  run = training();
  run.train->options.checkpoint = parse_checkpoint("full");
  EXPECT_THROW(libtorch_backend().prepare(small("ff"), "eager", run), Error);
  ModelRequest file = small("model.pt");
  try {
    libtorch_backend().prepare(file, "eager", training());
    FAIL() << "a file trained";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("built-in networks only"));
  }
}

}  // namespace
}  // namespace neuralcost
