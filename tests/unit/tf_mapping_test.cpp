// The TensorFlow-op-to-op-record mapping (src/backends/capture/tf_mapping.cpp) on hand-written
// captured ops, shaped as the TensorFlow worker reports them: exact contraction counts,
// channels-last convolutions, weights counted once, buffers apart, nothing a silent zero.
#include "backends/capture/captured_op.hpp"
#include "unit/captured_values.hpp"

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost::capture {
namespace {

using namespace testing_values;

using Kind = CapturedValue::Kind;

CapturedOp op(const std::string& name, std::vector<CapturedValue> in, std::vector<CapturedValue> out,
              std::map<std::string, CapturedValue> attrs = {}) {
  return {"tf::" + name, std::move(in), std::move(out), std::move(attrs)};
}

Analysis analyze_ops(const std::vector<CapturedOp>& ops) {
  return analyze(graph_from_captured(ops, "tf"), HardwareDatabase::builtin().get("h100-sxm"));
}

TEST(TfMappingTest, MatMulReadsItsTransposeFlags) {
  // x^T [2,128] times W^T [128,10]
  const Analysis a = analyze_ops(
      {op("MatMul", {tensor("input0", {128, 2}), tensor("fc.w", {10, 128}, true)}, {tensor("MatMul:0", {2, 10})},
          {{"transpose_a", boolean(true)}, {"transpose_b", boolean(true)}})});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 10);
  EXPECT_EQ(a.totals.parameter_count, 1280u);
}

TEST(TfMappingTest, WeightOnTheLeftStaysAParameter) {
  const Analysis a = analyze_ops(
      {op("MatMul", {tensor("fc.w", {10, 128}, true), tensor("input0", {128, 2})}, {tensor("MatMul:0", {10, 2})})});
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 10);
  EXPECT_EQ(a.totals.parameter_count, 1280u);
}

TEST(TfMappingTest, FourDimensionalBatchMatMulCountsEveryHead) {
  // attention scores: q [B,H,T,D] times k [B,H,T,D] with adj_y, B=2 H=4 T=32 D=16
  const Analysis a = analyze_ops({op("BatchMatMulV2", {tensor("q", {2, 4, 32, 16}), tensor("k", {2, 4, 32, 16})},
                                     {tensor("scores", {2, 4, 32, 32})}, {{"adj_y", boolean(true)}})});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 4 * 32 * 32 * 16);
}

TEST(TfMappingTest, ChannelsLastConv2DCountsExactFlops) {
  // docs/reference-networks.md, cnn conv1: 2*64*32*32*3*9 = 3,538,944
  const Analysis a =
      analyze_ops({op("Conv2D", {tensor("input0", {1, 32, 32, 3}), tensor("conv.w", {3, 3, 3, 64}, true)},
                      {tensor("Conv2D:0", {1, 32, 32, 64})},
                      {{"strides", ints({1, 1, 1, 1})},
                       {"dilations", ints({1, 1, 1, 1})},
                       {"padding", text("SAME")},
                       {"data_format", text("NHWC")}})});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 3538944u);
  EXPECT_EQ(a.totals.parameter_count, 1728u);
  ASSERT_EQ(a.graph.size(), 3u);  // view, conv, view
  EXPECT_EQ(a.graph.op(1).kind, OpKind::kConv);
  EXPECT_EQ(a.ops[0].cost.bytes(), 0u);
  EXPECT_EQ(a.ops[1].cost.bytes(), (32u * 32 * 3 + 1728 + 32 * 32 * 64) * 4);
  EXPECT_EQ(a.graph.ops().back().outputs[0].name, "Conv2D:0");  // later ops connect to it
}

TEST(TfMappingTest, StridedDepthwiseConvCountsOneTapPerChannel) {
  // 8x8x4 input, 3x3 filter with multiplier 2, stride 2, VALID: 3x3x8 outputs of 9 taps each
  const Analysis a =
      analyze_ops({op("DepthwiseConv2dNative", {tensor("input0", {1, 8, 8, 4}), tensor("dw", {3, 3, 4, 2}, true)},
                      {tensor("y", {1, 3, 3, 8})}, {{"strides", ints({1, 2, 2, 1})}, {"padding", text("VALID")}})});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 3 * 3 * 8 * 9);
}

TEST(TfMappingTest, WeightsReadTwiceAreCountedOnce) {
  const Analysis a =
      analyze_ops({op("MatMul", {tensor("input0", {2, 128}), tensor("w", {128, 128}, true)}, {tensor("h", {2, 128})}),
                   op("MatMul", {tensor("h", {2, 128}), tensor("w", {128, 128}, true)}, {tensor("y", {2, 128})})});
  EXPECT_EQ(a.totals.parameter_count, 128u * 128);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 2 * 128 * 128);
}

TEST(TfMappingTest, RunningStatisticsAndConstantsAreBuffers) {
  const Shape c{8};
  const Analysis a = analyze_ops(
      {op("FusedBatchNormV3",
          {tensor("input0", {1, 4, 4, 8}), tensor("bn.gamma", c, true), tensor("bn.beta", c, true),
           tensor("buffer:bn.mean", c, true), tensor("buffer:bn.var", c, true)},
          {tensor("bn:0", {1, 4, 4, 8}), tensor("bn:1", c)}, {{"is_training", boolean(false)}}),
       op("Mul", {tensor("bn:0", {1, 4, 4, 8}), tensor("const:scale:0", c, true)}, {tensor("y", {1, 4, 4, 8})})});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 16u);
  EXPECT_EQ(a.totals.buffer_count, 24u);
  // channels are the last dimension: 2 per element + 5 per channel, then one multiply each
  EXPECT_EQ(a.totals.flops, 2u * 128 + 5 * 8 + 128);
}

TEST(TfMappingTest, ShapeOperandsAddNoTraffic) {
  // Reshape's shape and Mean's axes arrive as integer lists, not tensors
  const Analysis a = analyze_ops({op("Reshape", {tensor("input0", {2, 8}), ints({4, 4})}, {tensor("r", {4, 4})}),
                                  op("Mean", {tensor("r", {4, 4}), ints({1})}, {tensor("m", {4})})});
  EXPECT_EQ(a.ops[0].cost.bytes(), 0u);
  EXPECT_EQ(a.ops[1].cost.bytes(), (16u + 4) * 4);
  EXPECT_EQ(a.totals.flops, 16u);
}

TEST(TfMappingTest, UnknownOpTypesAreUnmodeled) {
  const Analysis a = analyze_ops({op("FancyOp", {tensor("input0", {4, 4})}, {tensor("y", {4, 4})}),
                                  op("While", {tensor("y", {4, 4})}, {tensor("z", {4, 4})})});
  ASSERT_EQ(a.unmodeled.size(), 2u);
  EXPECT_EQ(a.unmodeled[0].reason, "op type 'tf::FancyOp' is not modeled");
  EXPECT_EQ(a.unmodeled[1].reason, "control flow (While) is not unrolled by the worker; its body is not counted");
  EXPECT_EQ(a.ops[0].cost.bytes(), 128u);
}

TEST(TfMappingTest, TensorListsOfAnUnrolledLoopAreViewsUntilStacked) {
  // two steps of a loop as the worker reports it: each step reads x_t from a list made from xs,
  // multiplies it by the same weight and writes the result into a reserved list, stacked after
  const Shape list{2, 4, 8}, item{4, 8};
  std::vector<CapturedOp> ops = {
      op("TensorListFromTensor", {tensor("xs", list), ints({-1, 8})}, {tensor("xs.list", list)}),
      op("TensorListReserve", {ints({-1, 8}), integer(2)}, {tensor("ys.list", list)})};
  std::string written = "ys.list";
  for (int t = 0; t < 2; ++t) {
    const std::string step = std::to_string(t);
    ops.push_back(
        op("TensorListGetItem", {tensor("xs.list", list), integer(t), ints({-1, 8})}, {tensor("x" + step, item)}));
    ops.push_back(op("MatMul", {tensor("x" + step, item), tensor("w", {8, 8}, true)}, {tensor("h" + step, item)}));
    ops.push_back(op("TensorListSetItem", {tensor(written, list), integer(t), tensor("h" + step, item)},
                     {tensor("ys.list." + step, list)}));
    written = "ys.list." + step;
  }
  ops.push_back(op("TensorListStack", {tensor(written, list), ints({-1, 8})}, {tensor("ys", list)}));
  const Analysis a = analyze_ops(ops);
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 4 * 8 * 8);
  EXPECT_EQ(a.totals.parameter_count, 64u);
  EXPECT_EQ(a.totals.flops, a.totals.contraction_flops);  // list ops compute nothing
  for (const OpRoofline& r : a.ops) {
    const std::string& type = a.graph.op(r.op_index).source_type;
    if (type == "tf::TensorListStack") {
      EXPECT_EQ(r.cost.bytes(), 2u * (2 * 4 * 8) * 4);  // reads and writes every element
    } else if (type != "tf::MatMul") {
      EXPECT_EQ(r.cost.bytes(), 0u) << type;  // the list keeps or hands out references
    }
  }
}

TEST(TfMappingTest, LoopsTheWorkerCouldNotUnrollSayWhy) {
  const Analysis a = analyze_ops({op("While", {tensor("x", {4, 4})}, {tensor("y", {4, 4})},
                                     {{"not_unrolled", text("its first loop variable is not a loop counter")}})});
  ASSERT_EQ(a.unmodeled.size(), 1u);
  EXPECT_EQ(
      a.unmodeled[0].reason,
      "control flow (While) is not unrolled: its first loop variable is not a loop counter; its body is not counted");
}

TEST(TfMappingTest, BranchesTheWorkerCouldNotChooseSayWhy) {
  const Analysis a = analyze_ops({op("StatelessIf", {tensor("p", {2}), tensor("x", {4, 4})}, {tensor("y", {4, 4})},
                                     {{"not_inlined", text("its branch index is not a known scalar")}}),
                                  op("Case", {tensor("i", {}), tensor("y", {4, 4})}, {tensor("z", {4, 4})})});
  ASSERT_EQ(a.unmodeled.size(), 2u);
  EXPECT_EQ(a.unmodeled[0].reason,
            "control flow (StatelessIf) is not inlined: its branch index is not a known scalar; "
            "none of its branches is counted");
  EXPECT_EQ(a.unmodeled[1].reason, "control flow (Case) is not unrolled by the worker; its body is not counted");
}

}  // namespace
}  // namespace neuralcost::capture
