// The memory ledger of a training step (training/memory.hpp): saved bytes and the activation
// interval hand-counted on small graphs, the resident bytes of the reference networks, mixed
// precision, checkpoint policies, the budget search against a brute-force scan, the parsers.
#include "neuralcost/training/memory.hpp"

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/models/reference.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;
using testing::op;
using testing::p;
using ::testing::StartsWith;
using testing::t;
using testing::with;

TrainingOptions training(Precision precision = Precision::kFp32, Optimizer optimizer = Optimizer::kAdam,
                         CheckpointPolicy checkpoint = {}) {
  TrainingOptions o;
  o.optimizer = optimizer;
  o.precision = precision;
  o.checkpoint = checkpoint;
  return o;
}

/// x[4,8] -> fc1 (16) -> h -> `function` -> a -> fc2 (2) -> y, fp32; fc names as given.
OpGraph mlp(const std::string& function = "relu", const std::string& fc1 = "fc1", const std::string& act = "act",
            const std::string& fc2 = "fc2") {
  OpGraph g("mlp");
  g.add(op(fc1, OpKind::kLinear, {t("x", {4, 8})}, {t("h", {4, 16})}, {p("w1", {16, 8}), p("b1", {16})}));
  g.add(with(op(act, OpKind::kActivation, {t("h", {4, 16})}, {t("a", {4, 16})}), "function", function));
  g.add(op(fc2, OpKind::kLinear, {t("a", {4, 16})}, {t("y", {4, 2})}, {p("w2", {2, 16}), p("b2", {2})}));
  g.mark_output("y");
  g.finalize();
  return g;
}

// Hand count (bytes, fp32): x 128, h 256, a 256, y 32. fc1 keeps x, relu its output a, fc2 its
// input a (the same tensor, counted once): 384 saved. The lower bound's moment is relu's
// backward: x and a kept, a's gradient arriving (256) and h's leaving (256) = 896. The upper
// bound: every tensor (672) plus the gradients in flight at their largest (a's and h's, 512).
TEST(MemoryLedgerTest, ThreeOpMlpMatchesTheHandCount) {
  const MemoryLedger l = memory_ledger(mlp(), training());
  const ActivationMemory& a = l.activations;
  EXPECT_EQ(a.saved_bytes, 384u);
  EXPECT_EQ(a.saved_graph_input_bytes, 128u);
  ASSERT_EQ(l.ops.size(), 3u);
  EXPECT_EQ(l.ops[0].saved_bytes, 128u);
  EXPECT_EQ(l.ops[1].saved_bytes, 256u);
  EXPECT_EQ(l.ops[2].saved_bytes, 0u);  // a is relu's already
  EXPECT_EQ(l.ops[2].keeps_bytes, 256u);
  EXPECT_EQ(l.ops[1].rule, Saves::kOutputs);
  ASSERT_EQ(l.saved.size(), 2u);
  EXPECT_EQ(l.saved[0].name, "x");
  EXPECT_TRUE(l.saved[0].graph_input);
  EXPECT_EQ(l.saved[1].name, "a");

  EXPECT_EQ(a.lower_bound_bytes, 896u);
  EXPECT_EQ(a.peak_op, "act");
  EXPECT_EQ(a.peak_phase, MemoryPhase::kBackward);
  EXPECT_EQ(a.peak_saved_bytes, 384u);
  EXPECT_EQ(a.peak_transient_bytes, 512u);
  EXPECT_EQ(a.forward_bytes, 672u);
  EXPECT_EQ(a.largest_transient_bytes, 512u);
  EXPECT_EQ(a.largest_transient_op, "act");
  EXPECT_EQ(a.upper_bound_bytes, 1184u);
  EXPECT_TRUE(l.complete());

  // 178 parameters: 712 bytes each of weights and gradients, 1424 of Adam's two moments
  EXPECT_EQ(l.parameter_count, 178u);
  EXPECT_EQ(l.resident_bytes(), 4u * 178 * 4);
  // Adam's two fp32 temporaries of the largest parameter (the 8x16 weight, 128 elements: 1,024 B)
  // come after the activations are freed: the lower bound takes the larger, the upper both
  EXPECT_EQ(l.optimizer_transient_bytes, 2u * 4 * 128);
  // parameter gradients exist from the backward that writes them to the optimizer step: the
  // activation moments with their own parameters' gradients peak at fc1's backward (x 128 kept,
  // h's gradient 256, the gradients of w1 and b1 144 x 4 = 576), not at relu's (896, no weights)
  EXPECT_EQ(a.lower_with_parameter_gradients_bytes, 960u);
  EXPECT_EQ(a.lower_with_parameter_gradients_op, "fc1");
  EXPECT_EQ(l.persistent_bytes(), 2848u - 712);
  // lower: persistent + the larger of that moment and the optimizer step (all 712 B of
  // gradients and the 1,024 B of temporaries)
  EXPECT_EQ(l.total_bytes(MemoryBound::kLower), 2136u + std::max(960u, 712u + 1024));
  EXPECT_EQ(l.total_bytes(MemoryBound::kUpper), 2848u + 1184 + 1024);
}

// gelu keeps its input h (256) where relu kept its output: saved 640; the peak moves to fc2's
// backward: 640 kept + y's gradient 32 + a's 256 = 928.
TEST(MemoryLedgerTest, GeluKeepsItsInputReluItsOutput) {
  const MemoryLedger l = memory_ledger(mlp("gelu"), training());
  EXPECT_EQ(l.ops[1].rule, Saves::kInputs);
  EXPECT_EQ(l.activations.saved_bytes, 640u);
  EXPECT_EQ(l.activations.lower_bound_bytes, 928u);
  EXPECT_EQ(l.activations.peak_op, "fc2");
  EXPECT_EQ(l.activations.upper_bound_bytes, 1184u);
  // with the gradients of w2 and b2 (34 x 4 = 136) that fc2's backward writes: 1,064
  EXPECT_EQ(l.activations.lower_with_parameter_gradients_bytes, 1064u);
  EXPECT_EQ(l.activations.lower_with_parameter_gradients_op, "fc2");
}

// A mixture of experts' gate and up projections gather the rows of the (token, expert) pairs
// from their input (attribute gathers_rows): the step keeps that gathered copy, once for both,
// with its int64 row index, and not the input itself; the down projection keeps its pair rows.
// Hand count (fp32): 6 tokens x top-2 = 12 rows; gathered 12 x 4 x 4 = 192, index 12 x 8 = 96,
// g and u (mul keeps both) 12 x 5 x 4 = 240 each, hdn (w2's input) 240: 1,008. Before, the
// ledger kept m (96 B) and missed the copy that transformers and Megatron-Core keep.
TEST(MemoryLedgerTest, AnExpertsGatheredRowsAreKeptOnceForTheGateAndUpProjections) {
  const auto expert = [](const std::string& name, const TensorDesc& x, const TensorDesc& y, Shape w, bool gathers) {
    OpRecord r = op(name, OpKind::kExpertLinear, {x}, {y}, {p(name + ".weight", std::move(w))});
    r.attributes.set("top_k", std::int64_t{2});
    r.attributes.set("tokens", std::int64_t{6});
    if (gathers) r.attributes.set("gathers_rows", true);
    return r;
  };
  const auto moe = [&](bool gathers) {
    OpGraph g("moe");
    const TensorDesc m = t("m", {2, 3, 4});
    g.add(expert("w1", m, t("g", {2, 3, 2, 5}), {4, 5, 4}, gathers));
    g.add(expert("w3", m, t("u", {2, 3, 2, 5}), {4, 5, 4}, gathers));
    g.add(with(op("mul", OpKind::kBinary, {t("g", {2, 3, 2, 5}), t("u", {2, 3, 2, 5})}, {t("hdn", {2, 3, 2, 5})}),
               "function", std::string("mul")));
    g.add(expert("w2", t("hdn", {2, 3, 2, 5}), t("d", {2, 3, 2, 4}), {4, 4, 5}, false));
    g.add(with(op("sum", OpKind::kReduction, {t("d", {2, 3, 2, 4})}, {t("y", {2, 3, 4})}), "function",
               std::string("sum")));
    g.mark_output("y");
    g.finalize();
    return memory_ledger(g, training());
  };
  const MemoryLedger l = moe(true);
  EXPECT_EQ(l.activations.saved_bytes, 1008u);
  EXPECT_EQ(l.ops[0].keeps_bytes, 192u + 96);
  EXPECT_EQ(l.ops[1].keeps_bytes, 192u + 96);  // the same storages: counted once
  EXPECT_EQ(l.ops[1].saved_bytes, 0u);
  std::set<std::string> names;
  for (const SavedStorage& s : l.saved) names.insert(s.name);
  EXPECT_EQ(names, (std::set<std::string>{"m#routed_rows", "m#routed_rows.indices", "g", "u", "hdn"}));
  EXPECT_EQ(moe(false).activations.saved_bytes, 96u + 3 * 240);  // an expert linear that gathers nothing
}

// A cross entropy holds the logits' log-probabilities from its forward to its backward and writes
// their gradient before the logits': at the loss the lower bound counts x kept (128), the logits
// [4, 100] (1,600), their gradient, the log-probabilities and theirs: 128 + 4 x 1,600. A
// regression's output [4, 1] has no classes: no workspace.
TEST(MemoryLedgerTest, ACrossEntropyHoldsTheLogProbabilitiesAndTheirGradientAtTheLoss) {
  const auto head = [](std::int64_t classes) {
    OpGraph g("head");
    g.add(op("fc", OpKind::kLinear, {t("x", {4, 8})}, {t("y", {4, classes})}, {p("w", {classes, 8})}));
    g.mark_output("y");
    g.finalize();
    return memory_ledger(g, training());
  };
  const MemoryLedger l = head(100);
  EXPECT_EQ(l.activations.saved_bytes, 128u);
  EXPECT_EQ(l.activations.lower_bound_bytes, 128u + 4 * 1600);
  EXPECT_EQ(l.activations.peak_phase, MemoryPhase::kLoss);
  EXPECT_EQ(l.activations.largest_transient_bytes, 3u * 1600);
  EXPECT_EQ(l.activations.upper_bound_bytes, 128u + 1600 + 3 * 1600);
  EXPECT_EQ(head(1).activations.lower_bound_bytes, 128u + 16 + 16);
}

// An output the loss does not take (a capture's recurrent state beside its marked logits) is alive
// at the loss but has no gradient: the lower bound counts x kept (128), both outputs (1,600 and
// a state [4, 8] of 128), the logits' gradient and the cross entropy's two tensors (3 x 1,600),
// not the state's gradient (128 more under the old rule). Unmarked, the loss takes both.
TEST(MemoryLedgerTest, AnOutputTheLossDoesNotTakeHasNoGradientAtTheLoss) {
  const auto two_outputs = [](bool mark) {
    OpGraph g("head");
    g.add(op("fc", OpKind::kLinear, {t("x", {4, 8})}, {t("y", {4, 100})}, {p("w", {100, 8})}));
    g.add(op("state", OpKind::kLinear, {t("x", {4, 8})}, {t("h", {4, 8})}, {p("v", {8, 8})}));
    if (mark) g.mark_output("y");
    g.finalize();
    return memory_ledger(g, training());
  };
  const MemoryLedger marked = two_outputs(true);
  EXPECT_EQ(marked.activations.saved_bytes, 128u);
  EXPECT_EQ(marked.activations.lower_bound_bytes, 128u + 1600 + 128 + 3 * 1600);
  EXPECT_EQ(marked.activations.peak_phase, MemoryPhase::kLoss);
  EXPECT_EQ(marked.activations.largest_transient_bytes, 3u * 1600);
  // every output a loss: the state's gradient too, and its own cross entropy's tensors
  const MemoryLedger both = two_outputs(false);
  EXPECT_EQ(both.activations.lower_bound_bytes, 128u + 1600 + 128 + 3 * 1600 + 3 * 128);
}

// A router's ops keep what torch keeps (DeepSeek-V3's, checked against autograd in
// decoder_memory_vs_transformers): where (masked_fill) its bool mask only, top-k that outputs
// indices its output, and a gather of the scores by those indices the index only, the same
// storage. Hand count: x 128 (fc), the mask 32 (1 B each), the indices 4 x 2 x 8 = 64: 224. The
// scores s (128) are kept by no one: the old rules kept them twice and the indices twice (416).
TEST(MemoryLedgerTest, WhereGatherAndTopkKeepTheirMaskOrIndexOnly) {
  OpGraph g("router");
  g.add(op("fc", OpKind::kLinear, {t("x", {4, 8})}, {t("s", {4, 8})}, {p("w", {8, 8})}));
  g.add(with(op("where", OpKind::kBinary, {t("s", {4, 8}), t("mask", {4, 8}, DType::kBool)}, {t("masked", {4, 8})}),
             "function", std::string("where")));
  OpRecord topk = with(op("topk", OpKind::kCustom, {t("masked", {4, 8})}, {t("idx", {4, 2}, DType::kInt64)}),
                       "function", std::string("topk"));
  topk.attributes.set("flops", std::int64_t{56});
  g.add(topk);
  g.add(op("gather", OpKind::kGather, {t("s", {4, 8}), t("idx", {4, 2}, DType::kInt64)}, {t("weights", {4, 2})}));
  g.mark_output("weights");
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_EQ(l.activations.saved_bytes, 128u + 32 + 64);
  std::set<std::string> names;
  for (const SavedStorage& s : l.saved) names.insert(s.name);
  EXPECT_EQ(names, (std::set<std::string>{"x", "mask", "idx"}));
  EXPECT_EQ(l.ops[3].keeps_bytes, 64u);  // the gather: the index, which top-k keeps already
  EXPECT_EQ(l.ops[3].saved_bytes, 0u);
}

TEST(MemoryLedgerTest, ViewsSaveNothingNewAndASharedTensorCountsOnce) {
  OpGraph g("views");
  g.add(op("fc1", OpKind::kLinear, {t("x", {4, 8})}, {t("h", {4, 16})}, {p("w1", {16, 8})}));
  g.add(op("flat", OpKind::kReshape, {t("h", {4, 16})}, {t("hv", {64})}));
  g.add(op("fc2", OpKind::kLinear, {t("hv", {64})}, {t("y", {2})}, {p("w2", {2, 64})}));
  g.add(op("fc3", OpKind::kLinear, {t("h", {4, 16})}, {t("z", {4, 2})}, {p("w3", {2, 16})}));
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_EQ(l.ops[1].keeps_bytes, 0u);
  EXPECT_EQ(l.ops[2].keeps_bytes, 256u);  // hv is h's storage
  EXPECT_EQ(l.activations.saved_bytes, 128u + 256);
  ASSERT_EQ(l.saved.size(), 2u);
  EXPECT_EQ(l.saved[1].name, "h");
  EXPECT_EQ(l.activations.forward_bytes, 128u + 256 + 8 + 32);  // x, h (hv aliases it), y, z
}

TEST(MemoryLedgerTest, OpsWithoutGradientKeepNothingAndUnknownOnesAreListed) {
  OpGraph g("unknown");
  g.add(with(op("scale", OpKind::kUnary, {t("x", {4, 8})}, {t("xs", {4, 8})}), "function", std::string("exp")));
  g.add(op("fc", OpKind::kLinear, {t("xs", {4, 8})}, {t("h", {4, 8})}, {p("w", {8, 8})}));
  g.add(with(op("mystery", OpKind::kCustom, {t("h", {4, 8})}, {t("y", {4, 8})}), "flops", std::int64_t{32}));
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_FALSE(l.ops[0].records);  // no parameter before it: autograd never sees it
  EXPECT_EQ(l.ops[0].keeps_bytes, 0u);
  EXPECT_EQ(l.ops[1].keeps_bytes, 128u);  // xs, though it needs no gradient: the weight's does
  EXPECT_THAT(l.unknown_saves, ::testing::ElementsAre("mystery"));
  EXPECT_FALSE(l.complete());
  EXPECT_THAT(l.notes, ::testing::Contains(HasSubstr("does not know")));
}

TEST(MemoryLedgerTest, RulesRefinedByKindAndFunction) {
  OpGraph g("kinds");
  // a 1x2x4x4 image through conv, batch norm (2 channels), max pool, a layer norm over 8
  g.add(op("conv", OpKind::kConv, {t("x", {1, 2, 4, 4})}, {t("c", {1, 2, 4, 4})}, {p("wc", {2, 2, 1, 1})}));
  g.add(op("bn", OpKind::kBatchNorm, {t("c", {1, 2, 4, 4})}, {t("b", {1, 2, 4, 4})},
           {p("g", {2}), p("be", {2}), p("rm", {2}, DType::kFp32, false), p("rv", {2}, DType::kFp32, false)}));
  g.add(with(
      with(op("pool", OpKind::kMaxPool, {t("b", {1, 2, 4, 4})}, {t("m", {1, 2, 2, 2})}), "kernel", std::int64_t{2}),
      "stride", std::int64_t{2}));
  g.add(op("flat", OpKind::kReshape, {t("m", {1, 2, 2, 2})}, {t("f", {1, 8})}));
  g.add(op("ln", OpKind::kLayerNorm, {t("f", {1, 8})}, {t("n", {1, 8})}, {p("lg", {8}), p("lb", {8})}));
  g.add(with(op("res", OpKind::kBinary, {t("n", {1, 8}), t("f", {1, 8})}, {t("r", {1, 8})}), "function",
             std::string("add")));
  g.add(with(op("drop", OpKind::kActivation, {t("r", {1, 8})}, {t("d", {1, 8})}), "function", std::string("dropout")));
  g.add(with(op("sum", OpKind::kReduction, {t("d", {1, 8})}, {t("s", {1})}), "function", std::string("sum")));
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_EQ(l.ops[0].keeps_bytes, 128u);          // conv: its input
  EXPECT_EQ(l.ops[1].keeps_bytes, 128u + 2 * 8);  // batch norm: input + mean, 1/std per channel
  EXPECT_EQ(l.ops[2].keeps_bytes, 128u + 8 * 8);  // max pool: input + int64 argmax of 8 outputs
  EXPECT_EQ(l.ops[3].keeps_bytes, 0u);            // a view
  EXPECT_EQ(l.ops[4].keeps_bytes, 32u + 1 * 8);   // layer norm: input (the pool's output) + one row's stats
  EXPECT_EQ(l.ops[5].keeps_bytes, 0u);            // add
  EXPECT_EQ(l.ops[6].keeps_bytes, 8u);            // dropout: 1-byte mask
  EXPECT_EQ(l.ops[7].keeps_bytes, 0u);            // sum
  EXPECT_EQ(l.buffer_count, 4u);
  EXPECT_EQ(l.buffer_bytes, 16u);
  EXPECT_EQ(l.parameter_count, 4u + 4 + 16);
}

// LSTM, 2 layers, bidirectional, batch 2, 3 steps, hidden 5: per step and direction 2 layers x
// (4 gates + 1 cell) x 5 + 1 inner hidden state x 5 = 55 values, x 2 x 3 x 2 = 660 fp32 = 2,640 B;
// plus its input [2,3,4] (96 B) and outputs [2,3,10], h_n and c_n [4,2,5] (240 + 160 + 160 B).
// Attention over q, k, v [1,2,4,8]: the three inputs and the output (256 B each) and a logsumexp
// per query row (1 x 2 x 4 fp32 = 32 B).
TEST(MemoryLedgerTest, RecurrentAndAttentionOpsKeepTheirWorkspaces) {
  OpGraph g("workspaces");
  OpRecord lstm = op("lstm", OpKind::kLstm, {t("x", {2, 3, 4})},
                     {t("y", {2, 3, 10}), t("h_n", {4, 2, 5}), t("c_n", {4, 2, 5})}, {p("w", {20, 4})});
  lstm.attributes.set("hidden_size", std::int64_t{5});
  lstm.attributes.set("num_layers", std::int64_t{2});
  lstm.attributes.set("bidirectional", true);
  lstm.attributes.set("batch_first", true);
  g.add(std::move(lstm));
  g.add(op("q", OpKind::kLinear, {t("x2", {1, 2, 4, 8})}, {t("qq", {1, 2, 4, 8})}, {p("wq", {8, 8})}));
  g.add(op("k", OpKind::kLinear, {t("x2", {1, 2, 4, 8})}, {t("kk", {1, 2, 4, 8})}, {p("wk", {8, 8})}));
  g.add(op("v", OpKind::kLinear, {t("x2", {1, 2, 4, 8})}, {t("vv", {1, 2, 4, 8})}, {p("wv", {8, 8})}));
  g.add(op("sdpa", OpKind::kAttention, {t("qq", {1, 2, 4, 8}), t("kk", {1, 2, 4, 8}), t("vv", {1, 2, 4, 8})},
           {t("o", {1, 2, 4, 8})}));
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_EQ(l.ops[0].keeps_bytes, 2640u + 96 + 240 + 160 + 160);
  EXPECT_EQ(l.ops[4].keeps_bytes, 4u * 256 + 32);
  EXPECT_EQ(l.ops[4].rule, Saves::kInputsAndOutputs);
}

// A plain RNN's gate is its hidden state (tanh keeps its output): 2 layers, batch 2, 3 steps,
// hidden 5 keep per step only the first layer's hidden state (the second's is the output):
// 2 x 3 x 5 fp32 = 120 B, plus the input [2,3,4] (96 B) and outputs [2,3,5], h_n [2,2,5]
// (120 + 80 B). LibTorch's CPU rnn_tanh keeps exactly its per-step tanh outputs and each
// layer's input (measured with tests/libtorch/alloc_trace.cpp).
TEST(MemoryLedgerTest, APlainRnnKeepsItsHiddenStatesAndNoGates) {
  OpGraph g("rnn");
  OpRecord rnn =
      op("rnn", OpKind::kRnn, {t("x", {2, 3, 4})}, {t("y", {2, 3, 5}), t("h_n", {2, 2, 5})}, {p("w", {5, 4})});
  rnn.attributes.set("hidden_size", std::int64_t{5});
  rnn.attributes.set("num_layers", std::int64_t{2});
  rnn.attributes.set("batch_first", true);
  g.add(std::move(rnn));
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  EXPECT_EQ(l.ops[0].keeps_bytes, 120u + 96 + 120 + 80);
  // the upper bound adds the per-step intermediates of a composite cell, nothing freed: per step
  // and layer the two projections, their sum, the activation (the hidden state) and the layer's
  // stack, 5 x 5 values x 2 layers x 6 (steps x batch) = 300, less the kept workspace (30) and
  // the output (30): 240 fp32 = 960 B
  EXPECT_EQ(l.activations.forward_bytes, 96u + 120 + 80 + 120 + 960);
}

// mul keeps an operand only for another operand's gradient, div a/b keeps b for either and a
// for b's: x needs a gradient (fc's output), c (a graph input) does not.
TEST(MemoryLedgerTest, MulAndDivKeepAnOperandOnlyForAnotherOperandsGradient) {
  OpGraph g("muldiv");
  g.add(op("fc", OpKind::kLinear, {t("in", {4, 8})}, {t("x", {4, 8})}, {p("w", {8, 8})}));
  auto binary = [](const std::string& name, const std::string& function, std::vector<TensorDesc> in,
                   const std::string& out) {
    return with(op(name, OpKind::kBinary, std::move(in), {t(out, {4, 8})}), "function", function);
  };
  g.add(binary("scale", "mul", {t("x", {4, 8})}, "s"));                      // x * 0.5: nothing
  g.add(binary("xc", "mul", {t("x", {4, 8}), t("c", {4, 8})}, "m"));         // keeps c, not x
  g.add(binary("xx", "mul", {t("x", {4, 8}), t("x", {4, 8})}, "q"));         // x * x keeps x
  g.add(binary("x_over_c", "div", {t("x", {4, 8}), t("c", {4, 8})}, "d1"));  // keeps c
  g.add(binary("c_over_x", "div", {t("c", {4, 8}), t("x", {4, 8})}, "d2"));  // keeps c and x
  g.add(binary("halve", "div", {t("x", {4, 8})}, "d3"));                     // x / 2: nothing
  g.finalize();
  const MemoryLedger l = memory_ledger(g, training());
  const auto names = [&](std::size_t i) {
    std::vector<std::string> v;
    for (std::size_t s : l.ops[i].keeps) v.push_back(l.saved[s].name);
    return v;
  };
  using ::testing::ElementsAre;
  using ::testing::IsEmpty;
  using ::testing::UnorderedElementsAre;
  EXPECT_THAT(names(1), IsEmpty());
  EXPECT_THAT(names(2), ElementsAre("c"));
  EXPECT_THAT(names(3), ElementsAre("x"));
  EXPECT_THAT(names(4), ElementsAre("c"));
  EXPECT_THAT(names(5), UnorderedElementsAre("c", "x"));
  EXPECT_THAT(names(6), IsEmpty());
}

// An in-place op writes into its first input's storage: matmul then add_(bias) is one storage
// (LibTorch 1.13's linear on a 3-D input): the upper bound counts h once.
TEST(MemoryLedgerTest, AnInPlaceOpWritesIntoItsInputsStorage) {
  const auto graph = [](bool in_place) {
    OpGraph g("inplace");
    g.add(op("mm", OpKind::kMatMul, {t("x", {4, 8}), t("w", {8, 8})}, {t("h", {4, 8})}));
    OpRecord add = with(op("bias", OpKind::kBinary, {t("h", {4, 8})}, {t("hb", {4, 8})}, {p("b", {8})}), "function",
                        std::string("add"));
    if (in_place) add.attributes.set("in_place", true);
    g.add(std::move(add));
    g.add(with(op("relu", OpKind::kActivation, {t("hb", {4, 8})}, {t("r", {4, 8})}), "function", std::string("relu")));
    g.mark_output("r");
    g.finalize();
    return g;
  };
  const MemoryLedger fresh = memory_ledger(graph(false), training());
  const MemoryLedger aliased = memory_ledger(graph(true), training());
  // x (128 B) and w (256 B), graph inputs, then h, hb, r (128 B each); in place hb is h
  EXPECT_EQ(fresh.activations.forward_bytes, 128u + 256 + 3 * 128);
  EXPECT_EQ(aliased.activations.forward_bytes, 128u + 256 + 2 * 128);
  EXPECT_LT(aliased.activations.upper_bound_bytes, fresh.activations.upper_bound_bytes);
}

// Parameter counts typed in from docs/reference-networks.md.
TEST(MemoryLedgerTest, AdamInFp32IsFourTimesTheParametersInFourBytes) {
  const std::vector<std::pair<std::string, std::uint64_t>> doc = {
      {"ff", 118794}, {"cnn", 77322}, {"rnn", 67338}, {"lstm", 265482}, {"transformer", 397834}};
  for (const auto& [name, parameters] : doc) {
    ReferenceOptions o;
    o.model = name;
    o.batch = 8;
    const MemoryLedger l = memory_ledger(build_reference_model(o), training());
    EXPECT_EQ(l.parameter_count, parameters) << name;
    EXPECT_EQ(l.parameter_bytes + l.gradient_bytes + l.optimizer_state_bytes, 4 * parameters * 4) << name;
    EXPECT_EQ(l.master_weight_bytes, 0u) << name;
    EXPECT_TRUE(l.complete()) << name;
    EXPECT_GT(l.activations.saved_bytes, 0u) << name;
    EXPECT_LE(l.activations.saved_bytes, l.activations.lower_bound_bytes) << name;
    EXPECT_LE(l.activations.lower_bound_bytes, l.activations.upper_bound_bytes) << name;
  }
}

TEST(MemoryLedgerTest, MixedPrecisionHalvesWeightsGradientsAndActivationsAndAddsMasters) {
  const std::uint64_t P = 178;
  for (Precision precision : {Precision::kBf16Mixed, Precision::kFp16Mixed}) {
    const MemoryLedger adam = memory_ledger(mlp(), training(precision));
    EXPECT_EQ(adam.parameter_bytes, 2 * P);
    EXPECT_EQ(adam.gradient_bytes, 2 * P);
    EXPECT_EQ(adam.optimizer_state_bytes, 8 * P);
    EXPECT_EQ(adam.master_weight_bytes, 4 * P);
    EXPECT_EQ(adam.optimizer_state_bytes + adam.master_weight_bytes,
              P * optimizer_state_bytes_per_element(Optimizer::kAdam, precision));
    EXPECT_EQ(adam.activations.saved_bytes, 192u);
    EXPECT_EQ(adam.activations.lower_bound_bytes, 448u);
    const MemoryLedger sgd = memory_ledger(mlp(), training(precision, Optimizer::kSgd));
    EXPECT_EQ(sgd.resident_bytes(), (2 + 2 + 4) * P);
  }
  EXPECT_EQ(memory_ledger(mlp(), training(Precision::kFp32, Optimizer::kSgd)).resident_bytes(), 8 * P);
  EXPECT_EQ(memory_ledger(mlp(), training(Precision::kFp32, Optimizer::kMomentum)).resident_bytes(), 12 * P);
  EXPECT_EQ(memory_ledger(mlp(), training(Precision::kFp32, Optimizer::kAdamW)).resident_bytes(), 16 * P);
  // integer tensors keep their size in mixed precision
  TensorDesc ids{"ids", {4, 8}, DType::kInt64};
  EXPECT_EQ(activation_bytes(ids, Precision::kBf16Mixed), 256u);
}

// What torch.autocast runs (a captured graph): the fp32 input and weight cast to bf16, a bf16
// matmul and relu, a cast back to fp32. Under autocast the ledger takes every tensor in its own
// dtype (x 128 + xb 64 + wb 256 + h 128 + a 128 + af 256 = 960 bytes of forward storages) and
// the parameter as the fp32 master weight; without it, fp32 tensors are narrowed (x and af at
// 2 bytes: 768) and the parameter is bf16 beside an fp32 master copy.
TEST(MemoryLedgerTest, AutocastKeepsTheGraphsDtypesAndFp32Parameters) {
  const DType bf16 = DType::kBf16;
  OpGraph g("autocast");
  g.add(with(op("cast_x", OpKind::kUnary, {t("x", {4, 8})}, {t("xb", {4, 8}, bf16)}), "function", "copy"));
  g.add(with(op("cast_w", OpKind::kUnary, {}, {t("wb", {8, 16}, bf16)}, {p("w", {8, 16})}), "function", "copy"));
  g.add(op("fc", OpKind::kMatMul, {t("xb", {4, 8}, bf16), t("wb", {8, 16}, bf16)}, {t("h", {4, 16}, bf16)}));
  g.add(with(op("relu", OpKind::kActivation, {t("h", {4, 16}, bf16)}, {t("a", {4, 16}, bf16)}), "function", "relu"));
  g.add(with(op("cast_a", OpKind::kUnary, {t("a", {4, 16}, bf16)}, {t("af", {4, 16})}), "function", "copy"));
  g.mark_output("af");
  g.finalize();
  const std::uint64_t P = 128;
  TrainingOptions autocast = training(Precision::kBf16Mixed);
  autocast.autocast = true;
  const MemoryLedger a = memory_ledger(g, autocast);
  EXPECT_EQ(a.parameter_bytes, 4 * P);
  EXPECT_EQ(a.gradient_bytes, 4 * P);
  EXPECT_EQ(a.master_weight_bytes, 0u);
  EXPECT_EQ(a.optimizer_state_bytes, 8 * P);
  EXPECT_EQ(a.activations.forward_bytes, 960u);
  EXPECT_THAT(a.notes, ::testing::Contains(HasSubstr("as torch.autocast runs it")));
  const MemoryLedger narrowed = memory_ledger(g, training(Precision::kBf16Mixed));
  EXPECT_EQ(narrowed.parameter_bytes, 2 * P);
  EXPECT_EQ(narrowed.master_weight_bytes, 4 * P);
  EXPECT_EQ(narrowed.activations.forward_bytes, 768u);
  // autocast is a mixed precision's: in fp32 it changes nothing
  TrainingOptions fp32 = training();
  fp32.autocast = true;
  EXPECT_EQ(memory_ledger(g, fp32).total_bytes(MemoryBound::kUpper),
            memory_ledger(g, training()).total_bytes(MemoryBound::kUpper));
  // the step graph: the optimizer updates the fp32 parameter itself, no low-precision copy
  const OpGraph step = training_step(g, autocast);
  for (const OpRecord& r : step.ops()) {
    if (r.kind != OpKind::kOptimizerStep) continue;
    ASSERT_FALSE(r.parameters.empty());
    EXPECT_EQ(r.parameters[0].id, "w");
    EXPECT_EQ(r.parameters[0].dtype, DType::kFp32);
    for (const TensorDesc& out : r.outputs) EXPECT_NE(out.name, "updated:w.master");
  }
}

// Full checkpointing of block0.fc + block0.gelu (the head, the last segment, runs normally):
// the checkpoint keeps x; h lives only while block0 is recomputed. fc2's backward drops to
// x + a + gradients (672), gelu's backward (x, h, a's and h's gradients: 896) is the peak.
TEST(MemoryLedgerTest, FullCheckpointOfOneBlockMatchesTheHandCount) {
  const OpGraph g = mlp("gelu", "block0.fc", "block0.gelu", "head");
  const MemoryLedger none = memory_ledger(g, training());
  const MemoryLedger full = memory_ledger(g, training(Precision::kFp32, Optimizer::kAdam, {CheckpointKind::kFull, 0}));
  ASSERT_EQ(full.segments.size(), 2u);
  EXPECT_EQ(full.segments[0].name, "block0");
  EXPECT_TRUE(full.segments[0].recomputed);
  EXPECT_FALSE(full.segments[1].recomputed);
  EXPECT_EQ(full.segments[0].input_bytes, 128u);
  EXPECT_EQ(full.segments[0].internal_bytes, 256u);
  EXPECT_EQ(full.activations.saved_bytes, 384u);
  EXPECT_EQ(none.activations.lower_bound_bytes, 928u);
  EXPECT_EQ(full.activations.lower_bound_bytes, 896u);
  EXPECT_EQ(full.activations.peak_op, "block0.gelu");
  // recompute: fc 2*4*8*16 + 4*16 (bias) = 1088, gelu 5 per element * 64 = 320
  EXPECT_EQ(full.recompute_flops, 1088u + 320);
  EXPECT_EQ(full.recompute_flops, cost_of(g.op(0)).flops + cost_of(g.op(1)).flops);
  EXPECT_EQ(none.recompute_flops, 0u);
}

std::uint64_t flops_of(const OpGraph& g, const std::function<bool(std::size_t)>& pick) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < g.size(); ++i) sum += pick(i) ? cost_of(g.op(i)).flops : 0;
  return sum;
}

TEST(MemoryLedgerTest, EveryPolicyLowersTheLowerBoundAndPaysItsRecompute) {
  ReferenceOptions o;
  o.model = "ff";
  o.depth = 4;
  o.width = 64;
  o.batch = 16;
  const OpGraph g = build_reference_model(o);  // 13 ops: 4 x (linear, relu, norm), classifier
  ASSERT_EQ(g.size(), 13u);
  const MemoryLedger none = memory_ledger(g, training());
  struct Case {
    CheckpointPolicy policy;
    std::function<bool(std::size_t)> recomputed;
    std::uint64_t times = 1;  // selective: each relu+norm run again for the next linear, which keeps its output
  };
  const std::vector<Case> cases = {
      {{CheckpointKind::kFull, 0}, [&](std::size_t i) { return g.op(i).name.rfind("block", 0) == 0; }},
      {{CheckpointKind::kEveryK, 0}, [](std::size_t i) { return i < 12; }},  // K = round(sqrt 13) = 4
      {{CheckpointKind::kEveryK, 5}, [](std::size_t i) { return i < 10; }},  // the last 3 run normally
      {{CheckpointKind::kSelective, 0},
       [&](std::size_t i) { return g.op(i).kind == OpKind::kActivation || g.op(i).kind == OpKind::kLayerNorm; },
       2},
  };
  for (const Case& c : cases) {
    const MemoryLedger l = memory_ledger(g, training(Precision::kFp32, Optimizer::kAdam, c.policy));
    const std::string name = checkpoint_name(c.policy);
    EXPECT_LT(l.activations.lower_bound_bytes, none.activations.lower_bound_bytes) << name;
    EXPECT_LT(l.activations.saved_bytes, none.activations.saved_bytes) << name;
    EXPECT_LE(l.activations.lower_bound_bytes, l.activations.upper_bound_bytes) << name;
    EXPECT_EQ(l.recompute_flops, c.times * flops_of(g, c.recomputed)) << name;
    EXPECT_GT(l.recompute_flops, 0u) << name;
    EXPECT_EQ(l.resident_bytes(), none.resident_bytes()) << name;
  }
}

TEST(MemoryLedgerTest, TransformerCheckpointingKeepsTheIntervalOrdered) {
  ReferenceOptions o;
  o.model = "transformer";
  o.depth = 4;
  o.batch = 4;
  const OpGraph g = build_reference_model(o);
  const MemoryLedger none = memory_ledger(g, training());
  for (const char* policy : {"full", "every", "every:3", "selective"}) {
    const MemoryLedger l = memory_ledger(g, training(Precision::kFp32, Optimizer::kAdam, parse_checkpoint(policy)));
    EXPECT_LT(l.activations.lower_bound_bytes, none.activations.lower_bound_bytes) << policy;
    EXPECT_LE(l.activations.lower_bound_bytes, l.activations.upper_bound_bytes) << policy;
    EXPECT_GT(l.recompute_flops, 0u) << policy;
  }
  const MemoryLedger full = memory_ledger(g, training(Precision::kFp32, Optimizer::kAdam, parse_checkpoint("full")));
  ASSERT_GE(full.segments.size(), 4u);
  EXPECT_EQ(full.segments[0].name, "encoder0");
  EXPECT_LT(full.activations.upper_bound_bytes, none.activations.upper_bound_bytes);
}

TEST(MemoryLedgerTest, EveryNetworkPolicyAndPrecisionKeepsTheIntervalOrdered) {
  for (const std::string& name : reference_model_names()) {
    ReferenceOptions o;
    o.model = name;
    o.batch = 5;
    o.depth = 3;
    const OpGraph g = build_reference_model(o);
    for (const char* policy : {"none", "full", "every", "every:2", "every:1000", "selective"}) {
      for (Precision precision : {Precision::kFp32, Precision::kBf16Mixed, Precision::kFp16Mixed}) {
        const MemoryLedger l = memory_ledger(g, training(precision, Optimizer::kAdamW, parse_checkpoint(policy)));
        const ActivationMemory& a = l.activations;
        const std::string what = name + " " + policy + " " + std::string(precision_name(precision));
        EXPECT_LE(a.saved_bytes, a.lower_bound_bytes) << what;
        EXPECT_LE(a.lower_bound_bytes, a.upper_bound_bytes) << what;
        EXPECT_EQ(a.lower_bound_bytes, a.peak_saved_bytes + a.peak_transient_bytes) << what;
        EXPECT_LE(a.lower_bound_bytes, a.lower_with_parameter_gradients_bytes) << what;
        EXPECT_LE(a.lower_with_parameter_gradients_bytes, a.lower_bound_bytes + l.gradient_bytes) << what;
        EXPECT_LE(l.total_bytes(MemoryBound::kLower), l.total_bytes(MemoryBound::kUpper)) << what;
        EXPECT_EQ(a.upper_bound_bytes, a.forward_bytes + a.largest_segment_bytes + a.largest_transient_bytes) << what;
        std::uint64_t attributed = 0;
        for (const OpMemory& m : l.ops) attributed += m.saved_bytes;
        EXPECT_EQ(attributed, a.saved_bytes) << what;
        bool any = false;
        for (const CheckpointSegment& seg : l.segments) any = any || seg.recomputed;
        EXPECT_EQ(l.recompute_flops > 0, any) << what;
        EXPECT_TRUE(l.complete()) << what;
      }
    }
  }
}

TEST(MemoryLedgerTest, BiggestSaversComeFirst) {
  const MemoryLedger l = memory_ledger(mlp("gelu"), training());
  EXPECT_THAT(biggest_savers(l, 2), ::testing::ElementsAre(1u, 2u));  // gelu 256, fc2 256, fc1 128
  EXPECT_THAT(biggest_savers(l, 10), ::testing::ElementsAre(1u, 2u, 0u));
}

/// The activation peak of one real schedule: the forward pass in graph order, each storage freed
/// once no later op reads it and no op that keeps it is still to be differentiated; then the
/// backward pass in reverse order, each gradient alive from its last consumer's backward to its
/// producer's. A recomputed checkpoint segment (full, every:K) keeps nothing in the forward pass
/// but its inputs (held until its backward is done), and is run again, keeping, just before its
/// backward. Written apart from the ledger's liveness: only what
/// each op keeps (OpMemory::keeps) comes from the ledger.
std::uint64_t simulated_peak(const OpGraph& g, Precision precision, const MemoryLedger& l) {
  std::map<std::string, std::string> root;  // tensor -> storage (views alias their first input)
  std::map<std::string, std::uint64_t> bytes, grad;
  std::map<std::string, int> readers;
  std::map<std::string, std::int64_t> produced_in;  // storage -> recomputed segment of its producer
  std::vector<bool> records(g.size());
  std::set<std::string> needs_grad;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const OpRecord& o = g.op(i);
    bool rec = false;
    for (const ParameterDesc& q : o.parameters) rec = rec || q.trainable;
    for (const TensorDesc& x : o.inputs) {
      if (!root.count(x.name)) {
        root[x.name] = x.name;
        bytes[x.name] = activation_bytes(x, precision);
      }
      grad[x.name] = activation_bytes(x, precision);
      rec = rec || needs_grad.count(x.name) > 0;
      ++readers[root[x.name]];
    }
    records[i] = rec;
    for (const TensorDesc& y : o.outputs) {
      root[y.name] = is_view(o) ? root[o.inputs.at(0).name] : y.name;
      if (!is_view(o)) produced_in[y.name] = l.ops[i].segment;
      if (!is_view(o)) bytes[y.name] = activation_bytes(y, precision);
      grad[y.name] = activation_bytes(y, precision);
      if (rec && y.dtype != DType::kInt64) needs_grad.insert(y.name);
    }
  }
  for (const std::string& out : g.outputs()) ++readers[root[out]];  // the loss reads them
  // what each op keeps: the ledger's per-op lists (its rules are checked by the tests above)
  std::map<std::string, int> keepers;
  std::vector<std::vector<std::string>> keeps(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::size_t k : l.ops[i].keeps) {
      const SavedStorage& s = l.saved.at(k);
      keeps[i].push_back(s.name);
      if (l.ops[i].segment < 0) ++keepers[s.name];  // a segment's ops keep only when it is recomputed
      if (s.kind != SavedKind::kTensor) bytes[s.name] = s.bytes;
    }
  }
  // each recomputed segment's inputs: storages its ops read that it did not produce
  std::map<std::int64_t, std::set<std::string>> segment_inputs;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (l.ops[i].segment < 0) continue;
    for (const TensorDesc& x : g.op(i).inputs) {
      const std::string& r = root[x.name];
      const auto it = produced_in.find(r);
      if (it == produced_in.end() || it->second != l.ops[i].segment) segment_inputs[l.ops[i].segment].insert(r);
    }
  }
  std::set<std::string> live, live_grads;
  std::uint64_t current = 0, peak = 0, grads = 0;
  auto alloc = [&](const std::string& s) {
    if (live.insert(s).second) current += bytes[s];
  };
  auto maybe_free = [&](const std::string& s) {
    if (readers[s] <= 0 && keepers[s] <= 0 && live.erase(s)) current -= bytes[s];
  };
  for (const TensorDesc& x : g.inputs()) alloc(root[x.name]);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const OpRecord& o = g.op(i);
    const std::int64_t seg = l.ops[i].segment;
    if (seg >= 0 && i == l.segments[static_cast<std::size_t>(seg)].first_op) {
      for (const std::string& r : segment_inputs[seg]) ++keepers[r];  // the checkpoint holds them
    }
    for (const TensorDesc& y : o.outputs) alloc(root[y.name]);
    if (seg < 0) {
      for (const std::string& k : keeps[i]) alloc(k);
    }
    peak = std::max(peak, current);
    for (const TensorDesc& x : o.inputs) {
      --readers[root[x.name]];
      maybe_free(root[x.name]);
    }
    for (const TensorDesc& y : o.outputs) maybe_free(root[y.name]);
  }
  for (const std::string& out : g.outputs()) {
    if (needs_grad.count(out) && live_grads.insert(out).second) grads += grad[out];
  }
  peak = std::max(peak, current + grads);
  for (const std::string& out : g.outputs()) {
    --readers[root[out]];
    maybe_free(root[out]);
  }
  for (std::size_t i = g.size(); i-- > 0;) {
    const std::int64_t seg = l.ops[i].segment;
    if (seg >= 0 && i == l.segments[static_cast<std::size_t>(seg)].last_op) {
      // recompute the segment, keeping what its ops keep, freeing the rest as it goes
      const CheckpointSegment& sg = l.segments[static_cast<std::size_t>(seg)];
      for (std::size_t k = sg.first_op; k <= sg.last_op; ++k) {
        for (const TensorDesc& x : g.op(k).inputs) ++readers[root[x.name]];
      }
      for (std::size_t k = sg.first_op; k <= sg.last_op; ++k) {
        for (const TensorDesc& y : g.op(k).outputs) alloc(root[y.name]);
        for (const std::string& kept : keeps[k]) {
          ++keepers[kept];
          alloc(kept);
        }
        peak = std::max(peak, current + grads);
        for (const TensorDesc& x : g.op(k).inputs) {
          --readers[root[x.name]];
          maybe_free(root[x.name]);
        }
        for (const TensorDesc& y : g.op(k).outputs) maybe_free(root[y.name]);
      }
    }
    if (!records[i]) continue;
    const OpRecord& o = g.op(i);
    for (const TensorDesc& x : o.inputs) {
      if (needs_grad.count(x.name) && live_grads.insert(x.name).second) grads += grad[x.name];
    }
    peak = std::max(peak, current + grads);
    for (const TensorDesc& y : o.outputs) {
      if (live_grads.erase(y.name)) grads -= grad[y.name];
    }
    for (const std::string& k : keeps[i]) {
      --keepers[k];
      maybe_free(k);
    }
    if (seg >= 0 && i == l.segments[static_cast<std::size_t>(seg)].first_op) {
      for (const std::string& r : segment_inputs[seg]) {
        --keepers[r];
        maybe_free(r);
      }
    }
  }
  return peak;
}

// The interval's promise: a real schedule's peak lands inside it.
TEST(MemoryLedgerTest, ASimulatedScheduleLandsInsideTheIntervalWithAndWithoutCheckpoints) {
  std::vector<OpGraph> graphs = {mlp(), mlp("gelu")};
  for (const std::string& name : reference_model_names()) {
    ReferenceOptions o;
    o.model = name;
    o.batch = 3;
    graphs.push_back(build_reference_model(o));
  }
  graphs.push_back(mlp("gelu", "block0.fc", "block0.gelu", "head"));
  for (const OpGraph& g : graphs) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16Mixed}) {
      for (const char* policy : {"none", "full", "every", "every:2", "every:3"}) {
        const MemoryLedger l = memory_ledger(g, training(precision, Optimizer::kAdam, parse_checkpoint(policy)));
        const std::uint64_t peak = simulated_peak(g, precision, l);
        const std::string what = g.name() + " " + policy;
        EXPECT_LE(l.activations.lower_bound_bytes, peak) << what;
        EXPECT_GE(l.activations.upper_bound_bytes, peak) << what;
        EXPECT_GT(peak, l.activations.saved_bytes) << what;
      }
    }
  }
  // the hand-counted full checkpoint: block0's recompute and gelu's backward, 896 B
  const OpGraph blocks = mlp("gelu", "block0.fc", "block0.gelu", "head");
  EXPECT_EQ(
      simulated_peak(blocks, Precision::kFp32,
                     memory_ledger(blocks, training(Precision::kFp32, Optimizer::kAdam, parse_checkpoint("full")))),
      896u);
  // the hand-counted MLP: the schedule's peak is relu's backward, exactly the lower bound
  EXPECT_EQ(simulated_peak(mlp(), Precision::kFp32, memory_ledger(mlp(), training())), 896u);
}

// ---- does it fit ---------------------------------------------------------------------------

OpGraph ff_at(std::int64_t batch) {
  ReferenceOptions o;
  o.model = "ff";
  o.width = 32;
  o.batch = batch;
  return build_reference_model(o);
}

TEST(MemoryBudgetTest, LargestBatchMatchesABruteForceScan) {
  const TrainingOptions options = training();
  std::vector<std::uint64_t> need(301, 0);
  for (std::int64_t b = 1; b <= 300; ++b) need[b] = memory_ledger(ff_at(b), options).total_bytes(MemoryBound::kUpper);
  for (std::int64_t target : {1, 2, 37, 64, 65, 199}) {
    for (double reserve : {0.0, 0.1}) {
      // a budget whose usable part lands between the target and the next batch
      const auto usable = need[target] + (need[target + 1] - need[target]) / 2;
      const auto budget = static_cast<std::uint64_t>(static_cast<double>(usable) / (1 - reserve)) + 1;
      std::int64_t built = 0;
      const BatchFit fit = largest_batch(
          [&](std::int64_t b) {
            ++built;
            return ff_at(b);
          },
          options, budget, reserve);
      std::int64_t brute = 0;
      for (std::int64_t b = 1; b <= 300; ++b) {
        if (need[b] <= fit.usable_bytes) brute = b;
      }
      EXPECT_EQ(fit.batch, brute) << target << " " << reserve;
      EXPECT_EQ(fit.batch, target) << reserve;
      EXPECT_EQ(fit.needed_bytes, need[target]);
      EXPECT_EQ(fit.next_batch_bytes, need[target + 1]);
      EXPECT_EQ(fit.ledger.batch, target);
      EXPECT_EQ(fit.ledger.total_bytes(MemoryBound::kUpper), need[target]);
      EXPECT_FALSE(fit.capped);
      EXPECT_EQ(static_cast<std::int64_t>(fit.probed.size()), built);  // every probe built a graph
      EXPECT_LE(built, 2 * 9 + 2);
    }
  }
}

TEST(MemoryBudgetTest, TheLowerBoundAdmitsAtLeastTheUpperBoundsBatch) {
  const std::uint64_t budget = memory_ledger(ff_at(100), training()).total_bytes(MemoryBound::kUpper);
  const BatchFit upper = largest_batch(ff_at, training(), budget, 0);
  const BatchFit lower = largest_batch(ff_at, training(), budget, 0, MemoryBound::kLower);
  EXPECT_EQ(upper.batch, 100);
  EXPECT_GT(lower.batch, upper.batch);
  EXPECT_EQ(lower.bound, MemoryBound::kLower);
}

TEST(MemoryBudgetTest, ABudgetTooSmallForBatchOneSaysWhatItNeeds) {
  try {
    largest_batch(ff_at, training(), 100 * 1000, 0.1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // 26,634 parameters: 106,536 bytes of weights, as many of gradients, twice that of Adam state
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), StartsWith("--memory-budget 100 kB cannot hold batch 1: it needs 631 kB"));
    EXPECT_THAT(e.what(), HasSubstr("(parameters 107 kB, gradients 107 kB, optimizer state 213 kB, activations "));
    EXPECT_THAT(e.what(), HasSubstr("(upper bound), optimizer temporaries 201 kB; a 10% reserve leaves 90 kB)"));
  }
}

TEST(MemoryBudgetTest, AHugeBudgetIsCappedAtTheLargestSearchedBatch) {
  const BatchFit fit = largest_batch(ff_at, training(), parse_memory_size("10TB"), 0);
  EXPECT_TRUE(fit.capped);
  EXPECT_EQ(fit.batch, kMaxSearchedBatch);
  EXPECT_EQ(fit.next_batch_bytes, 0u);
  EXPECT_EQ(fit.probed.size(), 21u);  // 1, 2, 4, ..., 2^20
}

TEST(MemoryBudgetTest, ParsesSizesInDecimalAndBinaryUnits) {
  EXPECT_EQ(parse_memory_size("24GB"), 24'000'000'000u);
  EXPECT_EQ(parse_memory_size("24gb"), 24'000'000'000u);
  EXPECT_EQ(parse_memory_size("1.5GB"), 1'500'000'000u);
  EXPECT_EQ(parse_memory_size("1.5GiB"), 1'610'612'736u);
  EXPECT_EQ(parse_memory_size(" 512 MiB "), 512u << 20);
  EXPECT_EQ(parse_memory_size("80KB"), 80'000u);
  EXPECT_EQ(parse_memory_size("1KiB"), 1024u);
  EXPECT_EQ(parse_memory_size("2TiB"), 2ull << 40);
  EXPECT_EQ(parse_memory_size("7B"), 7u);
  EXPECT_EQ(parse_memory_size(".5kB"), 500u);
  EXPECT_EQ(parse_memory_size("16TB"), 16'000'000'000'000u);
}

TEST(MemoryBudgetTest, RefusesBadSizesNamingTheOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"-1GB", "must be positive"},
      {"0GB", "must be positive"},
      {"0.1B", "must be positive"},
      {"abc", "is not a size"},
      {"GB", "is not a size"},
      {"24", "needs a unit"},
      {"24XB", "is not a size"},
      {"1e9B", "is not a size"},
      {"", "is not a size"},
      {"20000000000TB", "too large"},
      {"99999999999999999999999GB", "too large"},
      {"1.2.3GB", "is not a size"},
  };
  for (const auto& [text, why] : bad) {
    try {
      parse_memory_size(text);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_THAT(e.what(), StartsWith("--memory-budget '" + text + "'")) << text;
      EXPECT_THAT(e.what(), HasSubstr(why)) << text;
    }
  }
}

TEST(MemoryBudgetTest, ParsesAndRefusesReserves) {
  EXPECT_DOUBLE_EQ(parse_reserve("10%"), 0.1);
  EXPECT_DOUBLE_EQ(parse_reserve("0.1"), 0.1);
  EXPECT_DOUBLE_EQ(parse_reserve("0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_reserve("0%"), 0.0);
  EXPECT_DOUBLE_EQ(parse_reserve("99.5%"), 0.995);
  for (const char* text : {"100%", "1", "-5%", "-0.1", "abc", "", "nan", "10 %%", "%"}) {
    try {
      parse_reserve(text);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_THAT(e.what(), StartsWith(std::string("--reserve '") + text + "'")) << text;
    }
  }
  try {
    parse_reserve("10");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("did you mean 10%?"));
  }
}

TEST(MemoryBudgetTest, SizesPrintWithThreeSignificantDigits) {
  EXPECT_EQ(memory_size_string(5'200'000'000), "5.2 GB");
  EXPECT_EQ(memory_size_string(24'000'000'000), "24 GB");
  EXPECT_EQ(memory_size_string(999), "999 B");
  EXPECT_EQ(memory_size_string(999'999), "1 MB");
  EXPECT_EQ(memory_size_string(123'456), "123 kB");
  EXPECT_EQ(memory_size_string(0), "0 B");
}

}  // namespace
}  // namespace neuralcost
