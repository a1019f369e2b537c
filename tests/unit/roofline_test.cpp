// Roofline analysis: per-op bounds, shares, totals, the fused bound and unmodeled ops.
#include "neuralcost/analysis/roofline.hpp"

#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;

HardwareSpec toy_hardware() {
  HardwareSpec h;
  h.id = "toy";
  h.name = "toy";
  h.peak_flops_per_second[DType::kFp32] = 1e12;  // 1 TFLOP/s
  h.memory_bandwidth_bytes_per_second = 1e11;    // 100 GB/s: ridge 10 FLOP/B
  return h;
}

OpGraph linear_relu(std::int64_t rows) {
  OpGraph g("mlp");
  g.add(op("fc", OpKind::kLinear, {t("x", {rows, 1024})}, {t("h", {rows, 1024})}, {p("w", {1024, 1024})}));
  g.add(with(op("relu", OpKind::kActivation, {t("h", {rows, 1024})}, {t("y", {rows, 1024})}), "function",
             std::string("relu")));
  g.finalize();
  return g;
}

TEST(RooflineTest, BigMatMulIsComputeBoundAndReluIsMemoryBound) {
  const Analysis a = analyze(linear_relu(4096), toy_hardware());
  const OpRoofline& fc = a.ops[0];
  const double flops = 2.0 * 4096 * 1024 * 1024;
  EXPECT_EQ(fc.bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(fc.lower_bound_seconds, flops / 1e12);
  EXPECT_DOUBLE_EQ(fc.attainable_flops_per_second, 1e12);
  const OpRoofline& relu = a.ops[1];
  EXPECT_EQ(relu.bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(relu.lower_bound_seconds, 2.0 * 4096 * 1024 * 4 / 1e11);
  EXPECT_DOUBLE_EQ(relu.attainable_flops_per_second, relu.cost.arithmetic_intensity() * 1e11);
  EXPECT_DOUBLE_EQ(a.ridge_point, 10.0);
}

TEST(RooflineTest, SharesSumToOneAndTotalsAddUp) {
  const Analysis a = analyze(linear_relu(64), toy_hardware(), {64});
  double shares = 0, lb = 0;
  std::uint64_t flops = 0;
  for (const OpRoofline& r : a.ops) shares += r.share, lb += r.lower_bound_seconds, flops += r.cost.flops;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(a.totals.lower_bound_seconds, lb);
  EXPECT_EQ(a.totals.flops, flops);
  EXPECT_EQ(a.totals.parameter_count, 1024u * 1024);
  EXPECT_TRUE(a.complete());
}

TEST(RooflineTest, FusingReluIntoTheMatMulSkipsTheIntermediate) {
  const Analysis a = analyze(linear_relu(64), toy_hardware());
  ASSERT_EQ(a.fusion_groups.size(), 1u);
  const std::uint64_t x = 64 * 1024 * 4, w = 1024 * 1024 * 4, y = 64 * 1024 * 4;
  EXPECT_EQ(a.totals.fused_bytes_read, x + w);
  EXPECT_EQ(a.totals.fused_bytes_written, y);
  EXPECT_EQ(a.totals.bytes_read, x + w + y);  // unfused: relu reads h back
  EXPECT_LT(a.totals.fused_lower_bound_seconds, a.totals.lower_bound_seconds);
}

TEST(RooflineTest, TwoAnchorsNeverShareAGroup) {
  OpGraph g("two");
  g.add(op("fc1", OpKind::kLinear, {t("x", {8, 16})}, {t("a", {8, 16})}, {p("w1", {16, 16})}));
  g.add(op("fc2", OpKind::kLinear, {t("x", {8, 16})}, {t("b", {8, 16})}, {p("w2", {16, 16})}));
  g.add(with(op("add", OpKind::kBinary, {t("a", {8, 16}), t("b", {8, 16})}, {t("y", {8, 16})}), "function",
             std::string("add")));
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  EXPECT_EQ(a.fusion_groups.size(), 2u);
  // the add joins one matmul; the other matmul's output still goes through memory
  EXPECT_EQ(a.totals.fused_bytes_written, 2u * 8 * 16 * 4);
}

TEST(RooflineTest, FusedGroupsAreConsecutiveRunsSoTheyCanBeScheduled) {
  // a gated block: fc1 -> relu -> fc2(relu) -> add(relu, fc2). Fusing the add back into the
  // relu's group would need fc2's output inside a kernel that fc2 depends on.
  OpGraph g("gated");
  g.add(op("fc1", OpKind::kLinear, {t("x", {8, 16})}, {t("a", {8, 16})}, {p("w1", {16, 16})}));
  g.add(with(op("relu", OpKind::kActivation, {t("a", {8, 16})}, {t("r", {8, 16})}), "function", std::string("relu")));
  g.add(op("fc2", OpKind::kLinear, {t("r", {8, 16})}, {t("b", {8, 16})}, {p("w2", {16, 16})}));
  g.add(with(op("add", OpKind::kBinary, {t("r", {8, 16}), t("b", {8, 16})}, {t("y", {8, 16})}), "function",
             std::string("add")));
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  ASSERT_EQ(a.fusion_groups.size(), 2u);
  EXPECT_EQ(a.fusion_groups[0].ops, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(a.fusion_groups[1].ops, (std::vector<std::size_t>{2, 3}));
  const std::uint64_t act = 8 * 16 * 4, w = 16 * 16 * 4;
  EXPECT_EQ(a.fusion_groups[0].bytes_written, act);   // r leaves the chip: fc2 reads it
  EXPECT_EQ(a.fusion_groups[1].bytes_read, act + w);  // fc2 reads r once, the add reuses it
  EXPECT_EQ(a.fusion_groups[1].bytes_written, act);   // only y; b stays on chip
}

TEST(RooflineTest, ComparisonsComputeInTheirInputType) {
  OpGraph g("cmp");
  g.add(with(op("gt", OpKind::kBinary, {t("x", {64}), t("y", {64})}, {t("m", {64}, DType::kBool)}), "function",
             std::string("greater")));
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  EXPECT_EQ(a.ops[0].compute_dtype, DType::kFp32);
  EXPECT_TRUE(a.approximations.empty());
}

TEST(RooflineTest, IntegerArithmeticIsTimedAtTheFp32RateAndSaysSo) {
  OpGraph g("index");
  g.add(with(op("idx", OpKind::kBinary, {t("i", {64}, DType::kInt64), t("j", {64}, DType::kInt64)},
                {t("k", {64}, DType::kInt64)}),
             "function", std::string("add")));
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  EXPECT_DOUBLE_EQ(a.ops[0].peak_flops_per_second, 1e12);
  ASSERT_EQ(a.approximations.size(), 1u);
  EXPECT_EQ(a.approximations[0],
            "op 'idx' computes in int64; its compute time uses the fp32 rate (hardware specs have no int64 peak)");
}

TEST(RooflineTest, Tf32AppliesToMatrixUnitsOnly) {
  HardwareSpec h = toy_hardware();
  h.peak_flops_per_second[DType::kTf32] = 8e12;
  OpGraph g("tf32");
  g.add(op("fc", OpKind::kLinear, {t("x", {8, 16}, DType::kTf32)}, {t("h", {8, 16}, DType::kTf32)},
           {p("w", {16, 16}, DType::kTf32)}));
  g.add(with(op("relu", OpKind::kActivation, {t("h", {8, 16}, DType::kTf32)}, {t("y", {8, 16}, DType::kTf32)}),
             "function", std::string("relu")));
  g.finalize();
  const Analysis a = analyze(g, h);
  EXPECT_DOUBLE_EQ(a.ops[0].peak_flops_per_second, 8e12);
  EXPECT_DOUBLE_EQ(a.ops[1].peak_flops_per_second, 1e12);        // the fp32 rate
  EXPECT_EQ(a.ops[0].cost.bytes_read, (8u * 16 + 16 * 16) * 4);  // tf32 is stored as fp32
}

TEST(RooflineTest, UnmodeledOpsAreListedWithTheirShare) {
  OpGraph g = linear_relu(64);
  OpRecord mystery = op("mystery", OpKind::kUnknown, {t("y", {64, 1024})}, {t("z", {64, 1024})});
  mystery.source_type = "FancyOp";
  g.add(mystery);
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  ASSERT_FALSE(a.complete());
  ASSERT_EQ(a.unmodeled.size(), 1u);
  EXPECT_EQ(a.unmodeled[0].reason, "op type 'FancyOp' is not modeled");
  const double bytes = static_cast<double>(a.totals.bytes_read + a.totals.bytes_written);
  EXPECT_DOUBLE_EQ(a.unmodeled[0].byte_share, 2.0 * 64 * 1024 * 4 / bytes);
  EXPECT_FALSE(a.ops[2].bound.has_value());
}

TEST(RooflineTest, MissingDtypePeakIsAnErrorNotAZero) {
  OpGraph g("half");
  g.add(op("fc", OpKind::kLinear, {t("x", {2, 8}, DType::kFp16)}, {t("y", {2, 8}, DType::kFp16)},
           {p("w", {8, 8}, DType::kFp16)}));
  g.finalize();
  try {
    analyze(g, toy_hardware());
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "hardware 'toy' has no fp16 peak (it gives: fp32)");
  }
}

TEST(RooflineTest, VectorPeakAppliesToNonContractionOps) {
  HardwareSpec h = toy_hardware();
  h.vector_flops_per_second[DType::kFp32] = 1e9;  // slow vector units make softmax compute-bound
  OpGraph g("sm");
  g.add(op("sm", OpKind::kSoftmax, {t("x", {1024, 1024})}, {t("y", {1024, 1024})}));
  g.finalize();
  const Analysis a = analyze(g, h);
  EXPECT_DOUBLE_EQ(a.ops[0].peak_flops_per_second, 1e9);
  EXPECT_EQ(a.ops[0].bound, Bound::kCompute);
}

TEST(RooflineTest, TiedWeightsCountOnceInTotals) {
  OpGraph g("tied");
  g.add(op("enc", OpKind::kLinear, {t("x", {2, 8})}, {t("h", {2, 4})}, {p("shared", {4, 8})}));
  g.add(with(op("dec", OpKind::kMatMul, {t("h", {2, 4})}, {t("y", {2, 8})}, {p("shared", {4, 8})}), "transpose_b",
             false));
  g.finalize();
  const Analysis a = analyze(g, toy_hardware());
  EXPECT_EQ(a.totals.parameter_count, 32u);
  EXPECT_EQ(a.totals.parameter_bytes, 128u);
  EXPECT_EQ(a.ops[0].cost.parameter_bytes + a.ops[1].cost.parameter_bytes, 256u);  // each op reads it
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

using namespace neuralcost::testing;

TEST(RooflineTest, CacheAwareRooflineTimesSmallWorkingSetsAtTheirLevel) {
  HardwareSpec h = toy_hardware();
  h.caches = {{"L1", 64 << 10, 1e12}, {"L2", 2 << 20, 4e11}, {"L3", 32 << 20, std::nullopt}};
  // relu over rows x 1024 floats reads and writes 8 KiB per row
  auto relu = [](std::int64_t rows) {
    OpGraph g("relu");
    g.add(with(op("relu", OpKind::kActivation, {t("x", {rows, 1024})}, {t("y", {rows, 1024})}), "function",
               std::string("relu")));
    g.finalize();
    return g;
  };
  const Analysis small = analyze(relu(4), h);  // 32 KiB: L1
  EXPECT_EQ(small.ops[0].memory_level, "L1");
  EXPECT_DOUBLE_EQ(small.ops[0].memory_seconds, 32768.0 / 1e12);
  EXPECT_DOUBLE_EQ(small.ops[0].dram_seconds, 32768.0 / 1e11);
  EXPECT_DOUBLE_EQ(small.totals.dram_lower_bound_seconds, 32768.0 / 1e11);
  EXPECT_LT(small.totals.lower_bound_seconds, small.totals.dram_lower_bound_seconds);
  const Analysis medium = analyze(relu(64), h);  // 512 KiB: L2
  EXPECT_EQ(medium.ops[0].memory_level, "L2");
  EXPECT_DOUBLE_EQ(medium.ops[0].memory_seconds, 524288.0 / 4e11);
  // 8 MiB fits L3, which has no measured bandwidth: DRAM
  const Analysis large = analyze(relu(1024), h);
  EXPECT_EQ(large.ops[0].memory_level, "DRAM");
  EXPECT_DOUBLE_EQ(large.ops[0].memory_seconds, large.ops[0].dram_seconds);
  // without cache bandwidths (every built-in spec) nothing changes
  const Analysis plain = analyze(relu(4), toy_hardware());
  EXPECT_EQ(plain.ops[0].memory_level, "DRAM");
  EXPECT_DOUBLE_EQ(plain.totals.lower_bound_seconds, plain.totals.dram_lower_bound_seconds);
}

}  // namespace
}  // namespace neuralcost
