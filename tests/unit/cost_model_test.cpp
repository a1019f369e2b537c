// Cost model: every op family against counts worked out by hand from docs/counting.md.
#include "neuralcost/cost/cost_model.hpp"

#include <cmath>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using I = std::int64_t;
using V = std::vector<std::int64_t>;

TEST(CostModelTest, MatMulCountsTwoFlopsPerMac) {
  const OpCost c = cost_of(op("mm", OpKind::kMatMul, {t("a", {8, 16}), t("b", {16, 4})}, {t("y", {8, 4})}));
  EXPECT_EQ(c.flops, 2u * 8 * 16 * 4);
  EXPECT_EQ(c.contraction_flops, c.flops);
  EXPECT_EQ(c.bytes_read, (8u * 16 + 16 * 4) * 4);
  EXPECT_EQ(c.bytes_written, 8u * 4 * 4);
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 1024.0 / (512 + 256 + 128));
}

TEST(CostModelTest, BatchedMatMulBroadcastsBatchDimensions) {
  // [3,1,5,7] x [4,7,2] -> [3,4,5,2]: 12 products of 5x7x2
  const OpCost c =
      cost_of(op("mm", OpKind::kMatMul, {t("a", {3, 1, 5, 7}), t("b", {4, 7, 2})}, {t("y", {3, 4, 5, 2})}));
  EXPECT_EQ(c.flops, 2u * 12 * 5 * 7 * 2);
}

TEST(CostModelTest, MatMulHonoursTransposeAndVectorOperands) {
  EXPECT_EQ(cost_of(with(op("mm", OpKind::kMatMul, {t("a", {16, 8}), t("b", {16, 4})}, {t("y", {8, 4})}), "transpose_a",
                         true))
                .flops,
            2u * 8 * 16 * 4);
  EXPECT_EQ(cost_of(op("mv", OpKind::kMatMul, {t("a", {6, 5}), t("v", {5})}, {t("y", {6})})).flops, 60u);
}

TEST(CostModelTest, MatMulRejectsMismatchedInnerDimensions) {
  try {
    cost_of(op("mm", OpKind::kMatMul, {t("a", {8, 16}), t("b", {15, 4})}, {t("y", {8, 4})}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "op 'mm' (matmul): inner dimensions differ: 8x16 x 15x4");
  }
}

// An expert linear under expert parallelism holds 2 of the 8 experts the router picks among
// (routed_experts) and takes the rows of 4 tokens × top-2: each of its experts is reached with
// probability 1 − (6/8)^4, so 2 · (1 − 0.31640625) experts' weights are read.
TEST(CostModelTest, AnExpertParallelShardReadsTheExpertsItHoldsThatTheTokensReach) {
  OpRecord e = op("w1", OpKind::kExpertLinear, {t("x", {4, 16})}, {t("y", {4, 2, 32})}, {p("w", {2, 32, 16})});
  e.attributes.set("top_k", I{2});
  e.attributes.set("tokens", I{4});
  e.attributes.set("routed_experts", I{8});
  const OpCost c = cost_of(e);
  EXPECT_EQ(c.contraction_flops, 2u * 8 * 16 * 32);
  const double per_expert = 32 * 16 * 4;
  EXPECT_EQ(c.parameter_bytes, static_cast<std::uint64_t>(std::llround(2 * (1 - 0.31640625) * per_expert)));
  e.attributes.set("routed_experts", I{1});  // fewer than it holds
  EXPECT_THROW(cost_of(e), Error);
  e.attributes.set("routed_experts", I{8});
  e.attributes.set("top_k", I{3});  // top_k is checked against the routed experts, not the 2 held
  EXPECT_THROW(cost_of(e), Error);
}

TEST(CostModelTest, LinearAddsOneFlopPerOutputForBias) {
  const OpCost c =
      cost_of(op("fc", OpKind::kLinear, {t("x", {32, 784})}, {t("y", {32, 128})}, {p("w", {128, 784}), p("b", {128})}));
  EXPECT_EQ(c.contraction_flops, 2u * 32 * 784 * 128);
  EXPECT_EQ(c.flops, 2u * 32 * 784 * 128 + 32 * 128);
  EXPECT_EQ(c.parameter_bytes, (128u * 784 + 128) * 4);
  EXPECT_EQ(c.bytes_read, 32u * 784 * 4 + c.parameter_bytes);
  const OpCost nobias =
      cost_of(op("fc", OpKind::kLinear, {t("x", {32, 784})}, {t("y", {32, 128})}, {p("w", {128, 784})}));
  EXPECT_EQ(nobias.flops, 2u * 32 * 784 * 128);
  EXPECT_THROW(cost_of(op("fc", OpKind::kLinear, {t("x", {5, 4})}, {t("y", {7, 3})}, {p("w", {3, 4})})), Error);
}

TEST(CostModelTest, Conv2dMatchesReferenceDocument) {
  // cnn conv1 of docs/reference-networks.md: 2*64*32*32*3*9 = 3,538,944 per sample
  OpRecord r = op("conv1", OpKind::kConv, {t("x", {1, 3, 32, 32})}, {t("y", {1, 64, 32, 32})},
                  {p("w", {64, 3, 3, 3}), p("b", {64})});
  r.attributes.set("padding", I{1});
  const OpCost c = cost_of(r);
  EXPECT_EQ(c.contraction_flops, 3538944u);
  EXPECT_EQ(c.flops, 3538944u + 64 * 32 * 32);
}

TEST(CostModelTest, ConvHandlesGroupsStrideDilationAnd1dAnd3d) {
  // depthwise 3x3 stride 2 pad 1 on 8x16x16 -> 8x8x8; each output 9 MACs over 1 channel
  OpRecord dw = op("dw", OpKind::kConv, {t("x", {2, 8, 16, 16})}, {t("y", {2, 8, 8, 8})}, {p("w", {8, 1, 3, 3})});
  dw.attributes.set("groups", I{8});
  dw.attributes.set("stride", I{2});
  dw.attributes.set("padding", I{1});
  EXPECT_EQ(cost_of(dw).flops, 2u * 2 * 8 * 64 * 1 * 9);
  // 1-D, dilation 2, kernel 3: span 5, out = 20 - 5 + 1 = 16
  OpRecord c1 = op("c1", OpKind::kConv, {t("x", {1, 4, 20})}, {t("y", {1, 6, 16})}, {p("w", {6, 4, 3})});
  c1.attributes.set("dilation", I{2});
  EXPECT_EQ(cost_of(c1).flops, 2u * 6 * 16 * 4 * 3);
  // 3-D with ONNX-style asymmetric pads [begin..., end...]
  OpRecord c3 =
      op("c3", OpKind::kConv, {t("x", {1, 2, 4, 4, 4})}, {t("y", {1, 3, 3, 4, 4})}, {p("w", {3, 2, 2, 2, 2})});
  c3.attributes.set("padding", V{0, 0, 0, 0, 1, 1});
  EXPECT_EQ(cost_of(c3).flops, 2u * 3 * 48 * 2 * 8);
}

TEST(CostModelTest, ConvRejectsWrongOutputSize) {
  OpRecord r = op("conv", OpKind::kConv, {t("x", {1, 3, 32, 32})}, {t("y", {1, 8, 32, 32})}, {p("w", {8, 3, 3, 3})});
  try {
    cost_of(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("op 'conv' (conv): output spatial dim 0 is 32, expected 30"));
  }
}

TEST(CostModelTest, TransposedConvCountsEveryInputTimesKernel) {
  // 1x4x5x5 -> 1x2x10x10 with kernel 2, stride 2: every input element meets 2 x 2x2 taps
  OpRecord r = op("up", OpKind::kConvTranspose, {t("x", {1, 4, 5, 5})}, {t("y", {1, 2, 10, 10})},
                  {p("w", {4, 2, 2, 2}), p("b", {2})});
  r.attributes.set("stride", I{2});
  const OpCost c = cost_of(r);
  EXPECT_EQ(c.contraction_flops, 2u * 4 * 25 * 2 * 4);
  EXPECT_EQ(c.flops, c.contraction_flops + 2 * 100);
}

TEST(CostModelTest, AttentionCountsScoresSoftmaxAndValues) {
  // B=2, H=4, L=32, D=32
  const OpCost c =
      cost_of(op("sdpa", OpKind::kAttention, {t("q", {2, 4, 32, 32}), t("k", {2, 4, 32, 32}), t("v", {2, 4, 32, 32})},
                 {t("o", {2, 4, 32, 32})}));
  const std::uint64_t heads = 8, pairs = 32 * 32;
  EXPECT_EQ(c.contraction_flops, heads * 2 * pairs * 32 * 2);
  EXPECT_EQ(c.flops, c.contraction_flops + heads * pairs + heads * (5 * pairs - 2 * 32));
  EXPECT_EQ(c.transcendentals, heads * pairs);
  EXPECT_EQ(c.bytes_read, 3u * 2 * 4 * 32 * 32 * 4);  // the score matrix is never stored
}

TEST(CostModelTest, CausalAttentionCountsOnlyKeptPairs) {
  OpRecord r = op("sdpa", OpKind::kAttention, {t("q", {1, 1, 4, 8}), t("k", {1, 1, 6, 8}), t("v", {1, 1, 6, 8})},
                  {t("o", {1, 1, 4, 8})});
  r.attributes.set("causal", true);
  // top-left: rows keep 1,2,3,4 keys = 10 pairs
  EXPECT_EQ(cost_of(r).contraction_flops, 2u * 10 * 8 * 2);
  // bottom-right (offset Lk-Lq = 2): rows keep 3,4,5,6 = 18 pairs
  r.attributes.set("causal_alignment", std::string("bottom_right"));
  EXPECT_EQ(cost_of(r).contraction_flops, 2u * 18 * 8 * 2);
  EXPECT_EQ(cost_of(r).flops, 2u * 18 * 8 * 2 + 18 + (5 * 18 - 2 * 4));
}

TEST(CostModelTest, GroupedQueryAttentionSharesKeyValueHeads) {
  const OpCost c =
      cost_of(op("gqa", OpKind::kAttention, {t("q", {1, 8, 16, 64}), t("k", {1, 2, 16, 64}), t("v", {1, 2, 16, 64})},
                 {t("o", {1, 8, 16, 64})}));
  EXPECT_EQ(c.contraction_flops, 8u * 2 * 256 * 64 * 2);
  EXPECT_THROW(
      cost_of(op("bad", OpKind::kAttention, {t("q", {1, 8, 16, 64}), t("k", {1, 3, 16, 64}), t("v", {1, 3, 16, 64})},
                 {t("o", {1, 8, 16, 64})})),
      Error);
}

TEST(CostModelTest, ActivationsUseTheDocumentedTable) {
  auto act = [](const std::string& f) {
    return cost_of(with(op("a", OpKind::kActivation, {t("x", {10, 10})}, {t("y", {10, 10})}), "function", f));
  };
  EXPECT_EQ(act("relu").flops, 100u);
  EXPECT_EQ(act("sigmoid").flops, 400u);
  EXPECT_EQ(act("sigmoid").transcendentals, 100u);
  EXPECT_EQ(act("gelu").flops, 500u);
  EXPECT_EQ(act("gelu_tanh").flops, 900u);
  EXPECT_EQ(act("silu").flops, 500u);
  EXPECT_EQ(act("tanh").flops, 100u);
  EXPECT_EQ(act("relu").bytes(), 800u);
  EXPECT_EQ(act("thresholded_relu").flops, 100u);
  EXPECT_EQ(act("shrink").flops, 200u);
  auto unary = [](const std::string& f) {
    return cost_of(with(op("u", OpKind::kUnary, {t("x", {10})}, {t("y", {10})}), "function", f));
  };
  for (const char* f : {"asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}) {
    EXPECT_EQ(unary(f).flops, 10u) << f;
    EXPECT_EQ(unary(f).transcendentals, 10u) << f;
  }
  EXPECT_EQ(unary("isnan").transcendentals, 0u);
  EXPECT_EQ(unary("quantize").flops, 40u);
  EXPECT_EQ(unary("dequantize").flops, 20u);
}

// rows_load: the op runs on λ times its shapes' rows (the busiest expert-parallel device's SiLU
// under a measured routing). Its work and activation bytes scale, its parameters are read once,
// and so does its gradient's; a load that is not a positive number, or one on an expert linear
// (which takes its rows from routing_counts), is an error.
TEST(CostModelTest, ARowsLoadScalesTheWorkAndTheActivationsNotTheParameters) {
  const OpRecord silu =
      with(op("a", OpKind::kActivation, {t("x", {10, 10})}, {t("y", {10, 10})}), "function", std::string("silu"));
  const OpCost loaded = cost_of(with(silu, "rows_load", 2.5));
  EXPECT_EQ(loaded.flops, 1250u);  // 2.5 × 100 × 5
  EXPECT_EQ(loaded.transcendentals, 250u);
  EXPECT_EQ(loaded.bytes_read, 1000u);
  EXPECT_EQ(loaded.bytes_written, 1000u);

  OpRecord norm = op("n", OpKind::kLayerNorm, {t("x", {10, 10})}, {t("y", {10, 10})}, {p("w", {10}), p("b", {10})});
  norm.attributes.set("normalized_dims", I{1});
  const OpCost plain_norm = cost_of(norm), loaded_norm = cost_of(with(norm, "rows_load", I{2}));
  EXPECT_EQ(loaded_norm.parameter_bytes, 80u);
  EXPECT_EQ(loaded_norm.parameter_bytes, plain_norm.parameter_bytes);
  EXPECT_EQ(loaded_norm.bytes_read, 2 * 400u + 80u);
  EXPECT_EQ(loaded_norm.bytes_written, 2 * plain_norm.bytes_written);
  EXPECT_EQ(loaded_norm.flops, 2 * plain_norm.flops);

  // the gradient of a loaded op: its forward's load, applied once
  const auto gradient_of = [](const OpRecord& forward) {
    OpRecord g = op("a/grad:x", OpKind::kGradient, {t("dy", {10, 10}), t("x", {10, 10})}, {t("dx", {10, 10})});
    g.differentiates = std::make_shared<const OpRecord>(forward);
    g.attributes.set("part", std::string("input"));
    g.attributes.set("index", I{0});
    return cost_of(g);
  };
  const OpCost plain_grad = gradient_of(silu), loaded_grad = gradient_of(with(silu, "rows_load", 2.5));
  ASSERT_GT(plain_grad.flops, 0u);
  EXPECT_EQ(loaded_grad.flops, static_cast<std::uint64_t>(std::llround(2.5 * static_cast<double>(plain_grad.flops))));
  EXPECT_EQ(loaded_grad.bytes_read, 1000u + 1000u);  // dy and x, 2.5 × 400 B each
  EXPECT_EQ(loaded_grad.bytes_written, 1000u);

  for (const double bad : {0.0, -1.0, std::nan("")}) {
    try {
      cost_of(with(silu, "rows_load", bad));
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("op 'a' (activation): attribute 'rows_load'"));
    }
  }
  OpRecord e = op("w1", OpKind::kExpertLinear, {t("x", {4, 16})}, {t("y", {4, 2, 32})}, {p("w", {2, 32, 16})});
  e.attributes.set("top_k", I{2});
  e.attributes.set("tokens", I{4});
  EXPECT_THROW(cost_of(with(e, "rows_load", 2.0)), Error);
}

TEST(CostModelTest, UnknownFunctionIsUnmodeledNotZero) {
  const OpCost c =
      cost_of(with(op("a", OpKind::kActivation, {t("x", {10})}, {t("y", {10})}), "function", std::string("swishy")));
  EXPECT_FALSE(c.modeled);
  EXPECT_EQ(c.unmodeled_reason, "activation function 'swishy' is not modeled");
  EXPECT_EQ(c.bytes(), 80u);  // bytes are still known
}

TEST(CostModelTest, BinaryBroadcastsAndCountsOutputElements) {
  const OpCost c = cost_of(with(op("add", OpKind::kBinary, {t("x", {4, 1, 5}), t("y", {3, 1})}, {t("z", {4, 3, 5})}),
                                "function", std::string("add")));
  EXPECT_EQ(c.flops, 60u);
  EXPECT_EQ(c.bytes_read, (20u + 3) * 4);
  EXPECT_THROW(cost_of(with(op("add", OpKind::kBinary, {t("x", {4, 2, 5}), t("y", {3, 1})}, {t("z", {4, 3, 5})}),
                            "function", std::string("add"))),
               Error);
}

TEST(CostModelTest, BinaryWithAScalarHasOneTensorOperand) {
  OpRecord r = with(op("half", OpKind::kBinary, {t("x", {10})}, {t("y", {10})}), "function", std::string("mul"));
  EXPECT_THROW(cost_of(r), Error);
  r.attributes.set("scalar_operand", true);
  EXPECT_EQ(cost_of(r).flops, 10u);
}

TEST(CostModelTest, MatMulWithAddendCountsOneAddPerOutput) {
  // addmm(bias, x, Wt) as operands A, B, C: [4,8] x [8,3] + [3]
  const OpCost c =
      cost_of(op("addmm", OpKind::kMatMul, {t("x", {4, 8})}, {t("y", {4, 3})}, {p("wt", {8, 3}), p("b", {3})}));
  EXPECT_EQ(c.contraction_flops, 2u * 4 * 8 * 3);
  EXPECT_EQ(c.flops, 2u * 4 * 8 * 3 + 12);
}

TEST(CostModelTest, SameTensorReadTwiceIsReadOnce) {
  const OpCost c = cost_of(
      with(op("sq", OpKind::kBinary, {t("x", {100}), t("x", {100})}, {t("y", {100})}), "function", std::string("mul")));
  EXPECT_EQ(c.bytes_read, 400u);
}

TEST(CostModelTest, SoftmaxIsFiveNMinusTwoPerRow) {
  const OpCost c = cost_of(op("sm", OpKind::kSoftmax, {t("x", {3, 7})}, {t("y", {3, 7})}));
  EXPECT_EQ(c.flops, 3u * (5 * 7 - 2));
  EXPECT_EQ(c.transcendentals, 21u);
  const OpCost axis0 = cost_of(with(op("sm", OpKind::kSoftmax, {t("x", {3, 7})}, {t("y", {3, 7})}), "axis", I{0}));
  EXPECT_EQ(axis0.flops, 7u * (5 * 3 - 2));
  // log-softmax: one log per row more
  const OpCost log = cost_of(with(op("ls", OpKind::kSoftmax, {t("x", {3, 7})}, {t("y", {3, 7})}), "log", true));
  EXPECT_EQ(log.flops, 3u * (5 * 7 - 1));
  EXPECT_EQ(log.transcendentals, 21u + 3u);
}

TEST(CostModelTest, NormalisationCounts) {
  const OpCost ln =
      cost_of(op("ln", OpKind::kLayerNorm, {t("x", {4, 128})}, {t("y", {4, 128})}, {p("g", {128}), p("b", {128})}));
  EXPECT_EQ(ln.flops, 4u * (7 * 128 + 2));
  EXPECT_EQ(ln.transcendentals, 4u);
  const OpCost plain = cost_of(op("ln", OpKind::kLayerNorm, {t("x", {4, 128})}, {t("y", {4, 128})}));
  EXPECT_EQ(plain.flops, 4u * (5 * 128 + 2));
  const OpCost rms = cost_of(op("rms", OpKind::kRmsNorm, {t("x", {4, 128})}, {t("y", {4, 128})}, {p("g", {128})}));
  EXPECT_EQ(rms.flops, 4u * (4 * 128 + 2));
  const OpCost bn =
      cost_of(op("bn", OpKind::kBatchNorm, {t("x", {2, 64, 8, 8})}, {t("y", {2, 64, 8, 8})},
                 {p("g", {64}), p("b", {64}), p("m", {64}, DType::kFp32, false), p("v", {64}, DType::kFp32, false)}));
  EXPECT_EQ(bn.flops, 2u * 2 * 64 * 64 + 5 * 64);
  EXPECT_EQ(bn.parameter_bytes, 4u * 64 * 4);
}

TEST(CostModelTest, PoolingCountsWindows) {
  OpRecord mp = op("mp", OpKind::kMaxPool, {t("x", {1, 64, 32, 32})}, {t("y", {1, 64, 16, 16})});
  mp.attributes.set("kernel", I{2});
  EXPECT_EQ(cost_of(mp).flops, 64u * 256 * 3);
  OpRecord ap = op("ap", OpKind::kAvgPool, {t("x", {1, 1, 7, 7})}, {t("y", {1, 1, 7, 7})});
  ap.attributes.set("kernel", I{3});
  ap.attributes.set("stride", I{1});
  ap.attributes.set("padding", I{1});
  EXPECT_EQ(cost_of(ap).flops, 49u * 9);
  const OpCost gap = cost_of(op("gap", OpKind::kGlobalAvgPool, {t("x", {2, 128, 16, 16})}, {t("y", {2, 128, 1, 1})}));
  EXPECT_EQ(gap.flops, 2u * 128 * 256);
  // adaptive 5 -> 3: windows [0,2) [1,4) [3,5) = 2+3+2 = 7 per dim; 49 per plane
  const OpCost ad = cost_of(op("ad", OpKind::kAdaptiveAvgPool, {t("x", {1, 2, 5, 5})}, {t("y", {1, 2, 3, 3})}));
  EXPECT_EQ(ad.flops, 2u * 49);
  const OpCost adm = cost_of(op("ad", OpKind::kAdaptiveMaxPool, {t("x", {1, 2, 5, 5})}, {t("y", {1, 2, 3, 3})}));
  EXPECT_EQ(adm.flops, 2u * (49 - 9));
}

TEST(CostModelTest, PoolingAcceptsBeginEndPaddingAndNamesBadAttributes) {
  // 1-D max pool, kernel 3, stride 2, pads [0 begin, 1 end]: out = (8 + 1 - 3) / 2 + 1 = 4
  OpRecord mp = op("mp", OpKind::kMaxPool, {t("x", {1, 1, 8})}, {t("y", {1, 1, 4})});
  mp.attributes.set("kernel", I{3});
  mp.attributes.set("stride", I{2});
  mp.attributes.set("padding", V{0, 1});
  EXPECT_EQ(cost_of(mp).flops, 4u * 2);
  mp.attributes.set("stride", I{-1});
  try {
    cost_of(mp);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op 'mp' (max_pool): spatial dim 0: stride (-1) and dilation (1) must be >= 1");
  }
}

TEST(CostModelTest, BatchNormAffineFollowsItsParametersNotTrainability) {
  auto bn = [](std::vector<ParameterDesc> params) {
    return cost_of(op("bn", OpKind::kBatchNorm, {t("x", {1, 8, 2, 2})}, {t("y", {1, 8, 2, 2})}, std::move(params)));
  };
  const auto frozen = p("g", {8}, DType::kFp32, false);
  const auto stat = p("m", {8}, DType::kFp32, false);
  EXPECT_EQ(bn({frozen, p("b", {8}, DType::kFp32, false), stat, p("v", {8}, DType::kFp32, false)}).flops,
            2u * 32 + 5 * 8);
  EXPECT_EQ(bn({stat, p("v", {8}, DType::kFp32, false)}).flops, 2u * 32 + 4 * 8);
}

TEST(CostModelTest, RmsNormCountsAnOptionalBias) {
  const OpCost c =
      cost_of(op("rms", OpKind::kRmsNorm, {t("x", {2, 16})}, {t("y", {2, 16})}, {p("g", {16}), p("b", {16})}));
  EXPECT_EQ(c.flops, 2u * (5 * 16 + 2));
}

TEST(CostModelTest, GatherFromAnActivationReadsAtMostTheData) {
  // 100 lookups into a 10x4 tensor touch at most its 40 elements
  const OpCost c =
      cost_of(op("g", OpKind::kEmbedding, {t("data", {10, 4}), t("ids", {100}, DType::kInt64)}, {t("y", {100, 4})}));
  EXPECT_EQ(c.bytes_read, 40u * 4 + 100 * 8);
}

TEST(CostModelTest, ReductionsCountElementsMinusOutputs) {
  const OpCost sum = cost_of(op("s", OpKind::kReduction, {t("x", {4, 32, 128})}, {t("y", {4, 128})}));
  EXPECT_EQ(sum.flops, 4u * 128 * 31);
  const OpCost mean = cost_of(
      with(op("m", OpKind::kReduction, {t("x", {4, 32, 128})}, {t("y", {4, 128})}), "function", std::string("mean")));
  EXPECT_EQ(mean.flops, 4u * 128 * 32);
  auto reduce = [](const std::string& f) {
    return cost_of(with(op("r", OpKind::kReduction, {t("x", {4, 32})}, {t("y", {4})}), "function", f));
  };
  EXPECT_EQ(reduce("l1").flops, 4u * (2 * 32 - 1));
  EXPECT_EQ(reduce("log_sum").flops, 4u * 32);
  EXPECT_EQ(reduce("log_sum").transcendentals, 4u);
  EXPECT_EQ(reduce("log_sum_exp").flops, 4u * 64);
  EXPECT_EQ(reduce("log_sum_exp").transcendentals, 4u * 33);
}

TEST(CostModelTest, ViewsMoveNoBytesAndCopiesDo) {
  const OpCost view = cost_of(op("r", OpKind::kReshape, {t("x", {4, 8})}, {t("y", {32})}));
  EXPECT_EQ(view.bytes(), 0u);
  const OpCost tr = cost_of(op("tr", OpKind::kTranspose, {t("x", {4, 8})}, {t("y", {8, 4})}));
  EXPECT_EQ(tr.flops, 0u);
  EXPECT_EQ(tr.bytes(), 256u);
  const OpCost sl = cost_of(op("sl", OpKind::kSlice, {t("x", {100, 8})}, {t("y", {10, 8})}));
  EXPECT_EQ(sl.bytes_read, 320u);
  const OpCost cat = cost_of(op("cat", OpKind::kConcat, {t("a", {2, 8}), t("b", {3, 8})}, {t("y", {5, 8})}));
  EXPECT_EQ(cat.bytes(), 320u);
  const OpCost strided =
      cost_of(with(op("tr", OpKind::kTranspose, {t("x", {4, 8})}, {t("y", {8, 4})}), "materializes", false));
  EXPECT_EQ(strided.bytes(), 0u);
}

TEST(CostModelTest, EmbeddingReadsOnlyGatheredRows) {
  const OpCost c = cost_of(op("emb", OpKind::kEmbedding, {t("ids", {2, 16}, DType::kInt64)}, {t("y", {2, 16, 64})},
                              {p("table", {50000, 64})}));
  EXPECT_EQ(c.flops, 0u);
  EXPECT_EQ(c.parameter_bytes, 32u * 64 * 4);
  EXPECT_EQ(c.bytes_read, 32u * 8 + 32 * 64 * 4);
  // a tiny table is read at most once
  const OpCost tiny = cost_of(
      op("emb", OpKind::kEmbedding, {t("ids", {1000}, DType::kInt64)}, {t("y", {1000, 4})}, {p("table", {10, 4})}));
  EXPECT_EQ(tiny.parameter_bytes, 10u * 4 * 4);
}

TEST(CostModelTest, CustomOpsTakeGivenFlops) {
  EXPECT_EQ(cost_of(with(op("c", OpKind::kCustom, {t("x", {4})}, {t("y", {4})}), "flops", I{1234})).flops, 1234u);
  EXPECT_THROW(cost_of(op("c", OpKind::kCustom, {t("x", {4})}, {t("y", {4})})), Error);
}

TEST(CostModelTest, UnknownOpsAreUnmodeledWithTheirBytes) {
  OpRecord r = op("nms", OpKind::kUnknown, {t("x", {100, 4})}, {t("y", {10})});
  r.source_type = "NonMaxSuppression";
  const OpCost c = cost_of(r);
  EXPECT_FALSE(c.modeled);
  EXPECT_EQ(c.unmodeled_reason, "op type 'NonMaxSuppression' is not modeled");
  EXPECT_EQ(c.bytes(), 1640u);
}

TEST(CostModelTest, DtypeDecidesBytes) {
  const OpCost half = cost_of(op("fc", OpKind::kLinear, {t("x", {2, 8}, DType::kBf16)}, {t("y", {2, 4}, DType::kBf16)},
                                 {p("w", {4, 8}, DType::kBf16)}));
  EXPECT_EQ(half.bytes(), (16u + 32 + 8) * 2);
  const OpCost fp8 = cost_of(op("fc", OpKind::kLinear, {t("x", {2, 8}, DType::kFp8)}, {t("y", {2, 4}, DType::kFp8)},
                                {p("w", {4, 8}, DType::kFp8)}));
  EXPECT_EQ(fp8.bytes(), 16u + 32 + 8);
}

TEST(CostModelTest, OverflowIsCaughtNotWrapped) {
  const I big = I{1} << 22;  // tensors fit in 64 bits, 2*M*N*K does not
  try {
    cost_of(op("mm", OpKind::kMatMul, {t("a", {big, big}), t("b", {big, big})}, {t("y", {big, big})}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_STREQ(e.what(), "op 'mm' (matmul): FLOP count overflows 64 bits");
  }
}

TEST(CostModelTest, HostileGeometryIsRejectedOrCountedExactly) {
  // adaptive windows in closed form: 2^33 inputs into 2^31+1 windows, no loop, no overflow
  const I in = I{1} << 33, out = (I{1} << 31) + 1;
  EXPECT_EQ(cost_of(op("ad", OpKind::kAdaptiveAvgPool, {t("x", {1, 1, in})}, {t("y", {1, 1, out})})).flops,
            10737418240u);
  // a kernel larger than the padded input
  OpRecord big = op("c", OpKind::kConv, {t("x", {1, 1, 3})}, {t("y", {1, 1, 1})}, {p("w", {1, 1, 4})});
  big.attributes.set("stride", I{2});
  EXPECT_THROW(cost_of(big), Error);
  OpRecord pool = op("mp", OpKind::kMaxPool, {t("x", {1, 1, 3})}, {t("y", {1, 1, 1})});
  pool.attributes.set("kernel", I{4});
  EXPECT_THROW(cost_of(pool), Error);
  // negative padding on one side, absurd groups and strides
  OpRecord pads = op("c", OpKind::kConv, {t("x", {1, 1, 8})}, {t("y", {1, 1, 6})}, {p("w", {1, 1, 3})});
  pads.attributes.set("padding", V{-3, 3});
  EXPECT_THROW(cost_of(pads), Error);
  OpRecord groups = op("c", OpKind::kConv, {t("x", {1, 4, 8})}, {t("y", {1, 4, 6})}, {p("w", {4, 4, 3})});
  groups.attributes.set("groups", I{1} << 62);
  EXPECT_THROW(cost_of(groups), Error);
  OpRecord stride = op("c", OpKind::kConvTranspose, {t("x", {1, 1, 8})}, {t("y", {1, 1, 6})}, {p("w", {1, 1, 3})});
  stride.attributes.set("stride", I{1} << 62);
  EXPECT_THROW(cost_of(stride), Error);
}

TEST(CostModelTest, MissingOperandsNameTheOpAndRole) {
  try {
    cost_of(op("fc", OpKind::kLinear, {t("x", {2, 8})}, {t("y", {2, 4})}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op 'fc' (linear): needs parameter #0 (weight [out, in])");
  }
}

}  // namespace
}  // namespace neuralcost
