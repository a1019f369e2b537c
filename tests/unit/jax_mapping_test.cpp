// The jaxpr-primitive-to-op-record mapping (src/backends/capture/jax_mapping.cpp) on
// hand-written equations, as python/neuralcost_worker/jax/adapter.py reports them: contraction
// FLOPs are exact for any dimension numbers and layouts, weights are counted once, constants
// are buffers, and nothing unknown is a silent zero.
#include "backends/capture/captured_op.hpp"
#include "unit/captured_values.hpp"

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost::capture {
namespace {

using namespace testing_values;

using Kind = CapturedValue::Kind;
using Ints = std::vector<std::int64_t>;

CapturedOp op(const std::string& primitive, std::vector<CapturedValue> in, std::vector<CapturedValue> out,
              std::map<std::string, CapturedValue> attrs = {}) {
  return {"jax::" + primitive, std::move(in), std::move(out), std::move(attrs)};
}

CapturedOp dot_general(CapturedValue a, CapturedValue b, CapturedValue y, Ints lc, Ints rc, Ints lb = {},
                       Ints rb = {}) {
  return op(
      "dot_general", {std::move(a), std::move(b)}, {std::move(y)},
      {{"lhs_contracting", ints(lc)}, {"rhs_contracting", ints(rc)}, {"lhs_batch", ints(lb)}, {"rhs_batch", ints(rb)}});
}

Analysis analyze_ops(const std::vector<CapturedOp>& ops) {
  return analyze(graph_from_captured(ops, "jaxpr"), HardwareDatabase::builtin().get("h100-sxm"));
}

TEST(JaxMappingTest, DotGeneralOfALinearLayerIsAMatMul) {
  // x[2,128] . W[10,128] contracting both last dims: x @ W^T
  const Analysis a = analyze_ops(
      {dot_general(tensor("input0", {2, 128}), tensor("fc.weight", {10, 128}, true), tensor("%1", {2, 10}), {1}, {1})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kMatMul);
  EXPECT_TRUE(a.graph.op(0).attributes.get_bool("transpose_b", false));
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 10);
  EXPECT_EQ(a.totals.parameter_count, 1280u);
}

TEST(JaxMappingTest, BatchedDotGeneralCountsEveryBatch) {
  const Analysis a = analyze_ops({dot_general(tensor("input0", {4, 8, 16}), tensor("input1", {4, 16, 32}),
                                              tensor("%1", {4, 8, 32}), {2}, {1}, {0}, {0})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kMatMul);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 4 * 8 * 32 * 16);
}

TEST(JaxMappingTest, AttentionDotGeneralsCountTheReferenceScoreFlops) {
  // einsum bhqd,bhkd->bhqk and bhqk,bhkd->bhqd over [B=1, H=4, T=32, D=32]
  const Shape s{1, 4, 32, 32};
  const Analysis a =
      analyze_ops({dot_general(tensor("q", s), tensor("k", s), tensor("scores", s), {3}, {3}, {0, 1}, {0, 1}),
                   dot_general(tensor("scores", s), tensor("v", s), tensor("out", s), {3}, {2}, {0, 1}, {0, 1})});
  ASSERT_TRUE(a.complete());
  // docs/reference-networks.md: Q.K^T 262,144 and scores.V 262,144 per layer and sample
  EXPECT_EQ(a.ops[0].cost.contraction_flops, 262144u);
  EXPECT_EQ(a.ops[1].cost.contraction_flops, 262144u);
  for (const OpRecord& r : a.graph.ops()) EXPECT_EQ(r.kind, OpKind::kMatMul);
}

TEST(JaxMappingTest, UnusualDimensionNumbersKeepTheExactCount) {
  // batch dim in the middle of the lhs and of the rhs: no matmul layout, the count all the same
  const Analysis a = analyze_ops({dot_general(tensor("input0", {8, 4, 16}), tensor("input1", {16, 4, 32}),
                                              tensor("%1", {4, 8, 32}), {2}, {0}, {1}, {1})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kEinsum);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 4 * 8 * 32 * 16);
  EXPECT_EQ(a.totals.flops, a.totals.contraction_flops);
}

TEST(JaxMappingTest, DimensionNumbersThatDoNotFitAreUnmodeled) {
  const Analysis a = analyze_ops(
      {dot_general(tensor("input0", {2, 128}), tensor("input1", {64, 10}), tensor("%1", {2, 10}), {1}, {0})});
  ASSERT_EQ(a.unmodeled.size(), 1u);
  EXPECT_EQ(a.unmodeled[0].reason, "dot_general's dimension numbers do not fit its operands");
}

std::map<std::string, CapturedValue> conv_attrs(const std::string& lhs, const std::string& rhs,
                                                const std::string& out) {
  return {{"window_strides", ints({1, 1})},    {"padding", ints({1, 1, 1, 1})},
          {"lhs_dilation", ints({1, 1})},      {"rhs_dilation", ints({1, 1})},
          {"feature_group_count", integer(1)}, {"lhs_layout", text(lhs)},
          {"rhs_layout", text(rhs)},           {"out_layout", text(out)}};
}

TEST(JaxMappingTest, NchwConvolutionIsAConv) {
  // the reference cnn's first convolution: 3 -> 64 channels, 3x3, pad 1, 32x32
  const Analysis a = analyze_ops(
      {op("conv_general_dilated", {tensor("input0", {1, 3, 32, 32}), tensor("convs.0.weight", {64, 3, 3, 3}, true)},
          {tensor("%1", {1, 64, 32, 32})}, conv_attrs("NCHW", "OIHW", "NCHW"))});
  ASSERT_TRUE(a.complete());
  ASSERT_EQ(a.graph.size(), 1u);
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kConv);
  EXPECT_EQ(a.totals.contraction_flops, 3538944u);
  EXPECT_EQ(a.totals.parameter_count, 64u * 3 * 9);
}

TEST(JaxMappingTest, ChannelsLastConvolutionCountsTheSameBetweenViews) {
  const Analysis a =
      analyze_ops({op("conv_general_dilated", {tensor("input0", {1, 32, 32, 3}), tensor("w", {3, 3, 3, 64}, true)},
                      {tensor("%1", {1, 32, 32, 64})}, conv_attrs("NHWC", "HWIO", "NHWC"))});
  ASSERT_TRUE(a.complete());
  ASSERT_EQ(a.graph.size(), 3u);
  EXPECT_EQ(a.graph.op(1).kind, OpKind::kConv);
  EXPECT_EQ(a.graph.op(1).parameters[0].shape, (Shape{64, 3, 3, 3}));
  EXPECT_EQ(a.ops[0].cost.bytes(), 0u);
  EXPECT_EQ(a.ops[2].cost.bytes(), 0u);
  EXPECT_EQ(a.totals.contraction_flops, 3538944u);
}

std::map<std::string, CapturedValue> window_attrs() {
  return {{"window_dimensions", ints({1, 1, 2, 2})},
          {"window_strides", ints({1, 1, 2, 2})},
          {"padding", ints(Ints(8, 0))},
          {"base_dilation", ints({1, 1, 1, 1})},
          {"window_dilation", ints({1, 1, 1, 1})}};
}

TEST(JaxMappingTest, SpatialReduceWindowMaxIsAMaxPool) {
  const Analysis a = analyze_ops(
      {op("reduce_window_max", {tensor("input0", {1, 64, 32, 32})}, {tensor("%1", {1, 64, 16, 16})}, window_attrs())});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kMaxPool);
  EXPECT_EQ(a.totals.flops, 64u * 16 * 16 * 3);  // 3 comparisons per 2x2 window
  EXPECT_EQ(a.totals.contraction_flops, 0u);
}

TEST(JaxMappingTest, ReduceWindowSumCountsTheAddsOfEachWindow) {
  const Analysis a = analyze_ops(
      {op("reduce_window_sum", {tensor("input0", {1, 64, 32, 32})}, {tensor("%1", {1, 64, 16, 16})}, window_attrs())});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.flops, 64u * 16 * 16 * 3);
}

TEST(JaxMappingTest, AWeightReadInEveryStepIsCountedOnce) {
  // two unrolled scan steps: h1 = h0 . W^T, h2 = h1 . W^T
  const CapturedValue w = tensor("recurrent.weight_hh_l0", {128, 128}, true);
  const Analysis a = analyze_ops({dot_general(tensor("input0", {1, 128}), w, tensor("%1", {1, 128}), {1}, {1}),
                                  dot_general(tensor("%1", {1, 128}), w, tensor("%2", {1, 128}), {1}, {1})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 128u * 128);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 128);
}

TEST(JaxMappingTest, ConstantsAreBuffersNotParameters) {
  // eval-mode batch norm: running_var + eps, a constant closed over by the forward function
  const Analysis a =
      analyze_ops({op("add", {tensor("const:norms.0.running_var", {64}, true), number(1e-5)}, {tensor("%1", {64})})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 0u);
  EXPECT_EQ(a.totals.buffer_count, 64u);
  EXPECT_EQ(a.totals.flops, 64u);
}

TEST(JaxMappingTest, LayoutOpsOfWeightsAreNotOpsAndScalarBroadcastsAreFills) {
  const OpGraph g =
      graph_from_captured({op("broadcast_in_dim", {tensor("b", {64}, true)}, {tensor("b", {1, 64, 1, 1}, true)}),
                           op("transpose", {tensor("w", {10, 128}, true)}, {tensor("w", {128, 10}, true)}),
                           op("broadcast_in_dim", {number(0.0)}, {tensor("%1", {32, 128})})},
                          "views");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g.op(0).kind, OpKind::kFill);
  EXPECT_EQ(cost_of(g.op(0)).bytes_written, 32u * 128 * 4);
}

TEST(JaxMappingTest, UnknownPrimitivesAndLoopsAreUnmodeled) {
  const Analysis a = analyze_ops({op("fancy", {tensor("input0", {4, 4})}, {tensor("%1", {4, 4})}),
                                  op("while", {tensor("%1", {4, 4})}, {tensor("%2", {4, 4})})});
  ASSERT_EQ(a.unmodeled.size(), 2u);
  EXPECT_EQ(a.unmodeled[0].reason, "op type 'jax::fancy' is not modeled");
  EXPECT_EQ(a.unmodeled[1].reason, "a while loop runs a data-dependent number of steps (not unrolled)");
  EXPECT_EQ(a.ops[0].cost.bytes(), 128u);
}

TEST(JaxMappingTest, AWhileTheWorkerCouldNotUnrollShowsItsReason) {
  // the worker unrolls the whiles it can count; one that stays says why (jax/capture.py)
  const Analysis a =
      analyze_ops({op("while", {integer(0), tensor("input0", {4, 4})}, {tensor("%1", {}), tensor("%2", {4, 4})},
                      {{"body_nconsts", integer(0)},
                       {"cond_nconsts", integer(0)},
                       {"not_unrolled", text("more than 20000 iterations of about 10 ops exceed 200000 ops")}})});
  ASSERT_EQ(a.unmodeled.size(), 1u);
  EXPECT_EQ(a.unmodeled[0].reason,
            "a while loop is not unrolled by the worker: more than 20000 iterations of about 10 ops exceed 200000 ops; "
            "its body is not counted");
  EXPECT_FALSE(a.complete());
}

TEST(JaxMappingTest, ACondTheWorkerCouldNotResolveShowsItsReason) {
  // the worker inlines the branch a cond takes; one that stays says why (jax/capture.py)
  const Analysis a =
      analyze_ops({op("cond", {tensor("%1", {}), tensor("input0", {4, 4})}, {tensor("%2", {4, 4})},
                      {{"branches", integer(2)},
                       {"not_inlined", text("the value of its index (which branch runs) is not known at capture")}}),
                   op("cond", {tensor("%3", {}), tensor("%2", {4, 4})}, {tensor("%4", {4, 4})})});
  ASSERT_EQ(a.unmodeled.size(), 2u);
  EXPECT_EQ(a.unmodeled[0].reason,
            "a cond's branch is not known to the worker: the value of its index (which branch runs) is not known at "
            "capture; neither branch is counted");
  EXPECT_EQ(a.unmodeled[1].reason, "which branch of a cond runs depends on data");
  EXPECT_FALSE(a.complete());
}

TEST(JaxMappingTest, OpsOfATakenBranchCountAsUsual) {
  // an inlined branch's ops carry "cond_branch"; the attribute changes nothing in their count
  const Analysis a = analyze_ops(
      {op("dot_general", {tensor("input0", {2, 128}), tensor("fc.weight", {10, 128}, true)}, {tensor("%1", {2, 10})},
          {{"lhs_contracting", ints({1})},
           {"rhs_contracting", ints({1})},
           {"lhs_batch", ints({})},
           {"rhs_batch", ints({})},
           {"cond_branch", text("1 of 2")}})});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 10);
  EXPECT_EQ(a.totals.parameter_count, 1280u);
}

}  // namespace
}  // namespace neuralcost::capture
