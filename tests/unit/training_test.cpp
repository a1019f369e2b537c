// The training transform and the backward rules, on graphs counted by hand (docs/counting.md
// "Training"); the reference networks and PyTorch exports against autograd are in
// onnx/onnx_torch_validation_test.cpp.
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/graph.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/step_summary.hpp"
#include "neuralcost/training/training.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using testing::op;
using testing::p;
using testing::t;
using testing::with;

const HardwareSpec& h100() {
  static const HardwareSpec spec = *HardwareDatabase::builtin().find("h100-sxm");
  return spec;
}

StepSummary summary_of(const OpGraph& forward, const TrainingOptions& options = {}) {
  return summarize_step(analyze(training_step(forward, options), h100()));
}

const StepOpRow& row(const StepSummary& s, const std::string& name) {
  for (const StepOpRow& r : s.ops) {
    if (r.name == name) return r;
  }
  throw std::runtime_error("no row " + name);
}

std::uint64_t pass_flops(const StepSummary& s, Pass pass, bool contraction = false) {
  for (const PassTotal& p : s.passes) {
    if (p.pass == pass) return contraction ? p.work.contraction_flops : p.work.flops;
  }
  return 0;
}

/// x[4,8] -> fc1 (8->16) -> relu -> fc2 (16->3) -> logits [4,3]
OpGraph mlp() {
  OpGraph g("mlp");
  g.add(op("fc1", OpKind::kLinear, {t("x", {4, 8})}, {t("h", {4, 16})}, {p("fc1.w", {16, 8}), p("fc1.b", {16})}));
  g.add(with(op("relu", OpKind::kActivation, {t("h", {4, 16})}, {t("a", {4, 16})}), "function", std::string("relu")));
  g.add(op("fc2", OpKind::kLinear, {t("a", {4, 16})}, {t("y", {4, 3})}, {p("fc2.w", {3, 16}), p("fc2.b", {3})}));
  g.mark_output("y");
  g.finalize();
  return g;
}

TEST(TrainingStepTest, MlpBackwardIsCountedByHand) {
  const StepSummary s = summary_of(mlp());
  // fc1: x is a graph input, so no input gradient; dW = dhᵀ·x 2·4·8·16, db 4·16 - 16 adds
  EXPECT_EQ(row(s, "fc1").input_gradient.flops, 0u);
  EXPECT_EQ(row(s, "fc1").weight_gradient.contraction_flops, 2u * 4 * 8 * 16);
  EXPECT_EQ(row(s, "fc1").weight_gradient.flops, 2u * 4 * 8 * 16 + (4 * 16 - 16));
  // relu: dy where y > 0, 1 per element
  EXPECT_EQ(row(s, "relu").input_gradient.flops, 4u * 16);
  // fc2: da = dy·W 2·4·3·16, dW 2·4·3·16, db 4·3 - 3
  EXPECT_EQ(row(s, "fc2").input_gradient.contraction_flops, 2u * 4 * 3 * 16);
  EXPECT_EQ(row(s, "fc2").weight_gradient.flops, 2u * 4 * 3 * 16 + (12 - 3));
  // cross entropy over 4 rows of 3: forward 5·12 + 1, gradient 4·12
  EXPECT_EQ(row(s, "loss").forward.flops, 5u * 12 + 1);
  EXPECT_EQ(row(s, "loss").input_gradient.flops, 4u * 12);
  // Adam: 13 per element of the 16·8 + 16 + 3·16 + 3 parameters
  EXPECT_EQ(s.optimizer_parameters, 4u);
  EXPECT_EQ(s.optimizer.flops, 13u * (128 + 16 + 48 + 3));
  EXPECT_EQ(pass_flops(s, Pass::kInputGradient, true), 2u * 4 * 3 * 16);
  EXPECT_EQ(pass_flops(s, Pass::kWeightGradient, true), 2u * 4 * 8 * 16 + 2u * 4 * 3 * 16);
  EXPECT_TRUE(s.unmodeled_gradients.empty());
}

TEST(TrainingStepTest, OptimizersAndPrecisionsCountPerElement) {
  const std::uint64_t n = 128 + 16 + 48 + 3;
  TrainingOptions o;
  o.optimizer = Optimizer::kSgd;
  EXPECT_EQ(summary_of(mlp(), o).optimizer.flops, 2 * n);
  o.optimizer = Optimizer::kMomentum;
  EXPECT_EQ(summary_of(mlp(), o).optimizer.flops, 4 * n);
  o.optimizer = Optimizer::kAdamW;
  EXPECT_EQ(summary_of(mlp(), o).optimizer.flops, 15 * n);
  o.precision = Precision::kFp16Mixed;  // unscale and finite check
  EXPECT_EQ(summary_of(mlp(), o).optimizer.flops, 17 * n);
  // Adam in fp32 reads gradient, weights and two states, writes weights and states: 4 + 3·4 read... per element
  o = {};
  const StepSummary s = summary_of(mlp(), o);
  EXPECT_EQ(s.optimizer.bytes, n * 4 * (4 + 3));
}

TEST(TrainingStepTest, SharedInputGradientsAreAccumulated) {
  // x feeds two linears whose outputs are added: dx = dx1 + dx2 (one add per element)
  OpGraph g("shared");
  g.add(op("in", OpKind::kLinear, {t("x", {2, 4})}, {t("u", {2, 4})}, {p("w0", {4, 4})}));
  g.add(op("a", OpKind::kLinear, {t("u", {2, 4})}, {t("ya", {2, 3})}, {p("wa", {3, 4})}));
  g.add(op("b", OpKind::kLinear, {t("u", {2, 4})}, {t("yb", {2, 3})}, {p("wb", {3, 4})}));
  g.add(with(op("sum", OpKind::kBinary, {t("ya", {2, 3}), t("yb", {2, 3})}, {t("y", {2, 3})}), "function",
             std::string("add")));
  g.finalize();
  const StepSummary s = summary_of(g);
  EXPECT_EQ(row(s, "in").input_gradient.flops, 2u * 4);  // the accumulation of u's two gradients
  EXPECT_EQ(row(s, "sum").input_gradient.bytes, 0u);     // an addition's gradients are aliases
}

TEST(TrainingStepTest, AnOpReadingOneTensorTwiceHasAGradientForEachRead) {
  // y = h·h: dh = dy·h + dy·h, two parts and their sum
  OpGraph g("square");
  g.add(op("fc", OpKind::kLinear, {t("x", {2, 4})}, {t("h", {2, 4})}, {p("w", {4, 4})}));
  g.add(with(op("sq", OpKind::kBinary, {t("h", {2, 4}), t("h", {2, 4})}, {t("y", {2, 4})}), "function",
             std::string("mul")));
  g.finalize();
  const StepSummary s = summary_of(g);
  EXPECT_EQ(row(s, "sq").input_gradient.flops, 2u * 8);  // one multiply per element per read
  EXPECT_EQ(row(s, "fc").input_gradient.flops, 8u);      // the two partial gradients summed
}

// A gradient record reads what the memory ledger says its op keeps (one rule,
// training/memory_saves.hpp): relu its output, add nothing, mul by a scalar nothing, x·c the
// other operand c; besides the incoming gradient.
TEST(TrainingStepTest, GradientRecordsReadWhatTheLedgerSaysTheOpKeeps) {
  OpGraph g("reads");
  g.add(op("fc", OpKind::kLinear, {t("x", {2, 4})}, {t("h", {2, 4})}, {p("w", {4, 4})}));
  g.add(with(op("relu", OpKind::kActivation, {t("h", {2, 4})}, {t("r", {2, 4})}), "function", std::string("relu")));
  g.add(with(op("res", OpKind::kBinary, {t("r", {2, 4}), t("h", {2, 4})}, {t("s", {2, 4})}), "function",
             std::string("add")));
  g.add(with(op("scale", OpKind::kBinary, {t("s", {2, 4})}, {t("q", {2, 4})}), "function", std::string("mul")));
  g.add(with(op("gate", OpKind::kBinary, {t("q", {2, 4}), t("c", {2, 4})}, {t("y", {2, 4})}), "function",
             std::string("mul")));
  g.mark_output("y");
  g.finalize();
  const OpGraph step = training_step(g, {});
  const auto reads = [&](const std::string& name) {
    std::vector<std::string> v;
    bool found = false;
    for (const OpRecord& r : step.ops()) {
      if (r.name != name) continue;
      found = true;
      for (std::size_t k = 1; k < r.inputs.size(); ++k) v.push_back(r.inputs[k].name);  // [0]: the incoming gradient
    }
    EXPECT_TRUE(found) << name;
    return v;
  };
  EXPECT_EQ(reads("relu/grad:h"), std::vector<std::string>{"r"});
  EXPECT_EQ(reads("res/grad:r"), std::vector<std::string>{});
  EXPECT_EQ(reads("scale/grad:s"), std::vector<std::string>{});
  EXPECT_EQ(reads("gate/grad:q"), std::vector<std::string>{"c"});
}

TEST(TrainingStepTest, DepthwiseConvolutionBackwardRespectsGroups) {
  // a depthwise 3x3 convolution over 32 channels (groups = 32): each gradient as many MACs as the
  // forward, 2·N·C·H·W·9 — not 32 times that (PyTorch's FlopCounterMode's error)
  OpGraph g("depthwise");
  g.add(op("stem", OpKind::kConv, {t("x", {2, 3, 8, 8})}, {t("s", {2, 32, 8, 8})}, {p("stem.w", {32, 3, 1, 1})}));
  g.add(with(with(op("dw", OpKind::kConv, {t("s", {2, 32, 8, 8})}, {t("y", {2, 32, 8, 8})}, {p("dw.w", {32, 1, 3, 3})}),
                  "groups", std::int64_t{32}),
             "padding", std::vector<std::int64_t>{1, 1}));
  g.finalize();
  const StepSummary s = summary_of(g);
  const std::uint64_t forward = 2ull * 2 * 32 * 8 * 8 * 9;
  EXPECT_EQ(row(s, "dw").forward.contraction_flops, forward);
  EXPECT_EQ(row(s, "dw").input_gradient.contraction_flops, forward);
  EXPECT_EQ(row(s, "dw").weight_gradient.contraction_flops, forward);
  // the stem's input is the image: no input gradient
  EXPECT_EQ(row(s, "stem").input_gradient.records, 0u);
}

TEST(TrainingStepTest, AnOpWithoutBackwardRuleIsUnmodeledNotZero) {
  OpGraph g("custom");
  g.add(op("fc", OpKind::kLinear, {t("x", {2, 4})}, {t("h", {2, 4})}, {p("w", {4, 4})}));
  g.add(with(op("mystery", OpKind::kCustom, {t("h", {2, 4})}, {t("y", {2, 4})}), "flops", std::int64_t{8}));
  g.finalize();
  const StepSummary s = summary_of(g);
  ASSERT_EQ(s.unmodeled_gradients.size(), 1u);
  EXPECT_EQ(s.unmodeled_gradients[0].first, "mystery");
  EXPECT_NE(s.unmodeled_gradients[0].second.find("no backward rule"), std::string::npos);
  EXPECT_FALSE(row(s, "mystery").modeled);
}

TEST(TrainingStepTest, FrozenModelHasNothingToTrain) {
  OpGraph g("frozen");
  g.add(op("fc", OpKind::kLinear, {t("x", {2, 4})}, {t("y", {2, 3})}, {p("w", {3, 4}, DType::kFp32, false)}));
  g.finalize();
  EXPECT_THROW(training_step(g, {}), Error);
}

TEST(TrainingStepTest, ReferenceNetworksTrainWithEveryOpModeled) {
  for (const std::string& name : reference_model_names()) {
    ReferenceOptions o;
    o.model = name;
    o.batch = 2;
    const OpGraph forward = build_reference_model(o);
    const Analysis fwd = analyze(forward, h100());
    const Analysis step = analyze(training_step(forward, {}), h100());
    EXPECT_TRUE(step.complete()) << name << ": " << (step.unmodeled.empty() ? "" : step.unmodeled[0].reason);
    // the backward pass takes between one and two forwards' contractions
    const StepSummary s = summarize_step(step);
    const std::uint64_t backward =
        pass_flops(s, Pass::kInputGradient, true) + pass_flops(s, Pass::kWeightGradient, true);
    EXPECT_GT(backward, fwd.totals.contraction_flops) << name;
    EXPECT_LE(backward, 2 * fwd.totals.contraction_flops) << name;
    EXPECT_EQ(pass_flops(s, Pass::kForward, true), fwd.totals.contraction_flops) << name;
  }
}

TEST(TrainingStepTest, CheckpointingAddsTheLedgersRecomputation) {
  // the step graph recomputes exactly what the memory ledger's segments say, as often
  TrainingOptions o;
  EXPECT_EQ(pass_flops(summary_of(mlp(), o), Pass::kRecompute), 0u);
  o.checkpoint = parse_checkpoint("every:2");  // segments {fc1, relu}, {fc2}: the last one is not recomputed
  EXPECT_EQ(pass_flops(summary_of(mlp(), o), Pass::kRecompute), (2u * 4 * 8 * 16 + 4 * 16) + 4 * 16);
  for (const std::string& name : reference_model_names()) {
    ReferenceOptions r;
    r.model = name;
    r.batch = 2;
    const OpGraph forward = build_reference_model(r);
    for (const char* policy : {"full", "every", "every:3", "selective"}) {
      o.checkpoint = parse_checkpoint(policy);
      EXPECT_EQ(pass_flops(summary_of(forward, o), Pass::kRecompute), memory_ledger(forward, o).recompute_flops)
          << name << " " << policy;
    }
  }
}

TEST(TrainingOptionsTest, ParsersNameTheOptionAndTheChoices) {
  EXPECT_EQ(parse_optimizer("adamw"), Optimizer::kAdamW);
  EXPECT_EQ(parse_precision("bf16-mixed"), Precision::kBf16Mixed);
  EXPECT_EQ(parse_checkpoint("every:4").every, 4);
  EXPECT_EQ(parse_checkpoint("every").kind, CheckpointKind::kEveryK);
  try {
    parse_optimizer("lion");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--optimizer 'lion' is not one of sgd, momentum, adam, adamw");
  }
  EXPECT_THROW(parse_precision("fp8"), Error);
  EXPECT_THROW(parse_checkpoint("every:0"), Error);
  EXPECT_THROW(parse_checkpoint("every:-3"), Error);
  EXPECT_THROW(parse_checkpoint("sometimes"), Error);
  EXPECT_EQ(optimizer_state_bytes_per_element(Optimizer::kAdam, Precision::kFp32), 8u);
  EXPECT_EQ(optimizer_state_bytes_per_element(Optimizer::kAdam, Precision::kBf16Mixed), 12u);
  EXPECT_EQ(optimizer_state_bytes_per_element(Optimizer::kSgd, Precision::kFp32), 0u);
}

}  // namespace
}  // namespace neuralcost
