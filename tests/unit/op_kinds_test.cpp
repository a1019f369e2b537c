// The op-kind table and the kinds that carry what importers used to count by hand: einsum,
// fill, gather, scatter, cumulative and window reductions, loops with a body, variadic and
// literal elementwise ops, integer powers, convolutions with a computed filter. Counts are
// worked out by hand from docs/counting.md §1.8.
#include "neuralcost/cost/op_kinds.hpp"

#include <fstream>
#include <memory>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/graph.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/hardware/database.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using I = std::int64_t;
using V = std::vector<std::int64_t>;

TEST(OpKindTableTest, EveryKindHasItsOwnNameThatParsesBack) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kOpKindCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    EXPECT_EQ(traits_of(kind).kind, kind);
    EXPECT_TRUE(names.insert(op_kind_name(kind)).second) << op_kind_name(kind);
    EXPECT_EQ(parse_op_kind(op_kind_name(kind)), kind);
  }
  EXPECT_FALSE(parse_op_kind("no_such_kind").has_value());
  EXPECT_EQ(op_kind_name(static_cast<OpKind>(kOpKindCount + 3)), "unknown");
}

TEST(OpKindTableTest, TheJsonSchemasListExactlyTheTablesKinds) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < kOpKindCount; ++i) names.emplace_back(op_kind_name(static_cast<OpKind>(i)));
  for (const char* schema : {"analysis", "profile"}) {
    std::ifstream in(std::string(NEURALCOST_SOURCE_DIR) + "/docs/schema/" + schema + ".schema.json");
    ASSERT_TRUE(in) << schema;
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["$defs"]["op_kind"]["enum"].get<std::vector<std::string>>(), names) << schema;
  }
}

TEST(OpKindTableTest, ViewRulesFollowTheMaterializesAttribute) {
  const OpRecord reshape = op("r", OpKind::kReshape, {t("x", {4})}, {t("y", {2, 2})});
  EXPECT_TRUE(is_view(reshape));
  EXPECT_FALSE(is_view(with(reshape, "materializes", true)));
  const OpRecord transpose = op("t", OpKind::kTranspose, {t("x", {2, 3})}, {t("y", {3, 2})});
  EXPECT_FALSE(is_view(transpose));
  EXPECT_TRUE(is_view(with(transpose, "materializes", false)));
  EXPECT_FALSE(is_view(with(op("m", OpKind::kMatMul, {}, {}), "materializes", false)));
}

TEST(OpKindTableTest, MatrixKindsTakeTheMatrixRoof) {
  // tf32 exists only on matrix units: an einsum (a contraction) uses the tf32 roof, an add the fp32 one
  const HardwareSpec a100 = HardwareDatabase::builtin().get("a100-sxm-80gb");
  OpGraph g("roofs");
  g.add(with(op("e", OpKind::kEinsum, {t("a", {64, 64}, DType::kTf32), t("b", {64, 64}, DType::kTf32)},
                {t("c", {64, 64}, DType::kTf32)}),
             "equation", std::string("ij,jk->ik")));
  g.add(with(op("add", OpKind::kBinary, {t("c", {64, 64}, DType::kTf32), t("d", {64, 64}, DType::kTf32)},
                {t("y", {64, 64}, DType::kTf32)}),
             "function", std::string("add")));
  g.finalize();
  const Analysis a = analyze(g, a100);
  EXPECT_EQ(a.ops[0].peak_flops_per_second, a100.flops_per_second(DType::kTf32, true));
  EXPECT_EQ(a.ops[1].peak_flops_per_second, a100.flops_per_second(DType::kFp32, false));
}

OpRecord einsum(const std::string& equation, std::vector<TensorDesc> in, TensorDesc out,
                std::vector<ParameterDesc> params = {}) {
  return with(op("e", OpKind::kEinsum, std::move(in), {std::move(out)}, std::move(params)), "equation", equation);
}

TEST(EinsumTest, MatMulEquationCountsAsTheMatMulRule) {
  const OpCost e = cost_of(einsum("mk,kn->mn", {t("a", {8, 16}), t("b", {16, 4})}, t("y", {8, 4})));
  const OpCost m = cost_of(op("mm", OpKind::kMatMul, {t("a", {8, 16}), t("b", {16, 4})}, {t("y", {8, 4})}));
  EXPECT_EQ(e.flops, m.flops);
  EXPECT_EQ(e.contraction_flops, 2u * 8 * 16 * 4);
  EXPECT_EQ(e.bytes(), m.bytes());
}

TEST(EinsumTest, BatchedAttentionScoresWithAWeightAndImplicitOutput) {
  // bhqd,bhkd->bhqk over [2, 4, 32, 16]: 2 * 2*4*32*32*16
  const Shape s{2, 4, 32, 16};
  EXPECT_EQ(cost_of(einsum("bhqd,bhkd->bhqk", {t("q", s), t("k", s)}, t("y", {2, 4, 32, 32}))).contraction_flops,
            2u * 2 * 4 * 32 * 32 * 16);
  // implicit output "ik" (indices used once, sorted); the second operand is a parameter
  const OpCost w = cost_of(einsum("ij,jk", {t("x", {3, 5})}, t("y", {3, 7}), {p("w", {5, 7})}));
  EXPECT_EQ(w.contraction_flops, 2u * 3 * 5 * 7);
  EXPECT_EQ(w.parameter_bytes, 5u * 7 * 4);
}

TEST(EinsumTest, EllipsisBroadcastsLeadingDims) {
  // ...ij,jk->...ik with [6, 2, 3, 5] x [5, 4]: 12 products of 3x5x4
  const OpCost c = cost_of(einsum("...ij,jk->...ik", {t("a", {6, 2, 3, 5}), t("b", {5, 4})}, t("y", {6, 2, 3, 4})));
  EXPECT_EQ(c.contraction_flops, 2u * 12 * 3 * 5 * 4);
  // broadcast of a size-1 dim under the ellipsis: [1, 3, 5] x [7, 5, 2]
  const OpCost b = cost_of(einsum("...ij,...jk->...ik", {t("a", {1, 3, 5}), t("b", {7, 5, 2})}, t("y", {7, 3, 2})));
  EXPECT_EQ(b.contraction_flops, 2u * 7 * 3 * 5 * 2);
}

TEST(EinsumTest, OneOperandSumsAddAndTransposesCopy) {
  EXPECT_EQ(cost_of(einsum("ij->i", {t("x", {4, 6})}, t("y", {4}))).flops, 4u * 5);
  EXPECT_EQ(cost_of(einsum("ii->", {t("x", {6, 6})}, t("y", {}))).flops, 5u);  // trace: 6 - 1 adds
  const OpCost transpose = cost_of(einsum("ij->ji", {t("x", {4, 6})}, t("y", {6, 4})));
  EXPECT_EQ(transpose.flops, 0u);
  EXPECT_EQ(transpose.bytes(), 2u * 24 * 4);
  // an outer product multiplies without summing: not a contraction
  const OpCost outer = cost_of(einsum("i,j->ij", {t("a", {3}), t("b", {5})}, t("y", {3, 5})));
  EXPECT_EQ(outer.flops, 15u);
  EXPECT_EQ(outer.contraction_flops, 0u);
}

TEST(EinsumTest, MalformedEquationsThrowAndThreeOperandsAreUnmodeled) {
  EXPECT_THROW(cost_of(einsum("ij,jk->ik", {t("a", {2, 3})}, t("y", {2, 2}))), Error);  // one term short
  EXPECT_THROW(cost_of(einsum("ijk,jk->ik", {t("a", {2, 3}), t("b", {3, 4})}, t("y", {2, 4}))), Error);  // rank
  EXPECT_THROW(cost_of(einsum("ij,jk->iz", {t("a", {2, 3}), t("b", {3, 4})}, t("y", {2, 4}))), Error);   // z nowhere
  EXPECT_THROW(cost_of(einsum("ij,jk->ik", {t("a", {2, 3}), t("b", {5, 4})}, t("y", {2, 4}))), Error);   // j: 3 vs 5
  EXPECT_THROW(cost_of(einsum("i1,1k->ik", {t("a", {2, 3}), t("b", {3, 4})}, t("y", {2, 4}))), Error);
  EXPECT_THROW(cost_of(op("e", OpKind::kEinsum, {t("a", {2})}, {t("y", {2})})), Error);  // no equation
  const OpCost three =
      cost_of(einsum("ij,jk,kl->il", {t("a", {2, 3}), t("b", {3, 4}), t("c", {4, 5})}, t("y", {2, 5})));
  EXPECT_FALSE(three.modeled);
  EXPECT_NE(three.unmodeled_reason.find("contraction order"), std::string::npos);
}

TEST(EinsumTest, TermsAreReorderedToInputsThenParameters) {
  EXPECT_EQ(einsum_inputs_first("ij,jk->ik", {true, false}), "jk,ij->ik");
  EXPECT_EQ(einsum_inputs_first("ij,jk->ik", {false, true}), "ij,jk->ik");
  EXPECT_EQ(einsum_inputs_first("ij,jk", {true, true}), "ij,jk");
  EXPECT_THROW(einsum_inputs_first("ij,jk->ik", {true}), Error);
  // the weight first in the equation, a parameter in the record: the same count either way
  const OpCost c = cost_of(
      einsum(einsum_inputs_first("oi,bi->bo", {true, false}), {t("x", {8, 16})}, t("y", {8, 32}), {p("w", {32, 16})}));
  EXPECT_EQ(c.contraction_flops, 2u * 8 * 16 * 32);
}

TEST(DataKindsTest, FillReadsNothingAndRangesMultiplyAdd) {
  const OpRecord fill = op("f", OpKind::kFill, {t("shape", {4}, DType::kInt64)}, {t("y", {8, 8})});
  const OpCost c = cost_of(fill);
  EXPECT_EQ(c.flops, 0u);
  EXPECT_EQ(c.bytes_read, 0u);
  EXPECT_EQ(c.bytes_written, 64u * 4);
  EXPECT_EQ(cost_of(with(fill, "function", std::string("range"))).flops, 2u * 64);
  EXPECT_THROW(cost_of(with(fill, "function", std::string("random"))), Error);
}

TEST(DataKindsTest, ScattersCopyOrUpdateInPlace) {
  const OpRecord s =
      op("s", OpKind::kScatter, {t("data", {100}), t("idx", {10}, DType::kInt64), t("upd", {10})}, {t("y", {100})});
  const OpCost copy = cost_of(s);
  EXPECT_EQ(copy.flops, 0u);
  EXPECT_EQ(copy.bytes_read, 100u * 4 + 10 * 8 + 10 * 4);
  EXPECT_EQ(copy.bytes_written, 100u * 4);
  EXPECT_EQ(cost_of(with(s, "reduction", std::string("add"))).flops, 10u);
  const OpCost in_place = cost_of(with(s, "in_place", true));
  EXPECT_EQ(in_place.bytes_read, 10u * 8 + 10 * 4);
  EXPECT_EQ(in_place.bytes_written, 10u * 4);
  EXPECT_THROW(cost_of(with(s, "reduction", std::string("xor"))), Error);
  EXPECT_THROW(cost_of(op("s", OpKind::kScatter, {t("data", {4})}, {t("y", {4})})), Error);
}

TEST(DataKindsTest, CumulativeAndWindowReductions) {
  EXPECT_EQ(cost_of(with(op("c", OpKind::kCumulative, {t("x", {3, 10})}, {t("y", {3, 10})}), "axis", I{1})).flops,
            3u * 9);
  EXPECT_EQ(cost_of(with(op("c", OpKind::kCumulative, {t("x", {3, 10})}, {t("y", {3, 10})}), "axis", I{-2})).flops,
            10u * 2);
  EXPECT_THROW(cost_of(with(op("c", OpKind::kCumulative, {t("x", {3})}, {t("y", {3})}), "axis", I{1})), Error);
  // 2x2 windows over the last two dims of [1, 4, 8, 8] -> [1, 4, 4, 4]: 64 windows of 4
  const OpRecord w =
      with(op("w", OpKind::kWindowReduction, {t("x", {1, 4, 8, 8})}, {t("y", {1, 4, 4, 4})}), "window", V{1, 1, 2, 2});
  EXPECT_EQ(cost_of(w).flops, 64u * 3);
  EXPECT_EQ(cost_of(op("g", OpKind::kGather, {t("x", {4, 4}), t("i", {2}, DType::kInt64)}, {t("y", {2, 4})})).flops,
            0u);
}

TEST(DataKindsTest, VariadicLiteralAndIntegerPowElementwise) {
  const OpRecord sum3 = with(with(op("s", OpKind::kBinary, {t("a", {10}), t("b", {10}), t("c", {10})}, {t("y", {10})}),
                                  "function", std::string("add")),
                             "variadic", true);
  EXPECT_EQ(cost_of(sum3).flops, 20u);
  EXPECT_EQ(cost_of(with(sum3, "function", std::string("mean"))).flops, 30u);  // 2 adds + 1 divide
  // without variadic, a where over (cond, a, b) stays one select per element
  EXPECT_EQ(
      cost_of(with(op("w", OpKind::kBinary, {t("c", {10}, DType::kBool), t("a", {10}), t("b", {10})}, {t("y", {10})}),
                   "function", std::string("where")))
          .flops,
      10u);
  const OpRecord literal =
      with(with(op("l", OpKind::kUnary, {}, {t("y", {6})}), "function", std::string("exp")), "literal_operands", true);
  EXPECT_EQ(cost_of(literal).flops, 6u);
  EXPECT_THROW(cost_of(with(op("l", OpKind::kUnary, {}, {t("y", {6})}), "function", std::string("exp"))), Error);
  const OpRecord pow =
      with(op("p", OpKind::kUnary, {t("x", {5})}, {t("y", {5})}), "function", std::string("integer_pow"));
  EXPECT_EQ(cost_of(with(pow, "exponent", I{2})).flops, 5u * 1);   // x*x
  EXPECT_EQ(cost_of(with(pow, "exponent", I{5})).flops, 5u * 3);   // 2 squarings, 1 product
  EXPECT_EQ(cost_of(with(pow, "exponent", I{-2})).flops, 5u * 2);  // x*x, then 1/
  EXPECT_EQ(cost_of(with(pow, "exponent", I{0})).flops, 0u);
}

TEST(DataKindsTest, ConvolutionWithAComputedFilterCountsAsWithAWeight) {
  const OpRecord weight =
      op("c", OpKind::kConv, {t("x", {1, 3, 8, 8})}, {t("y", {1, 4, 6, 6})}, {p("w", {4, 3, 3, 3})});
  const OpRecord computed =
      op("c", OpKind::kConv, {t("x", {1, 3, 8, 8}), t("w", {4, 3, 3, 3})}, {t("y", {1, 4, 6, 6})});
  EXPECT_EQ(cost_of(computed).flops, cost_of(weight).flops);
  EXPECT_EQ(cost_of(computed).bytes(), cost_of(weight).bytes());
  const OpRecord biased =
      op("c", OpKind::kConv, {t("x", {1, 3, 8, 8}), t("w", {4, 3, 3, 3}), t("b", {4})}, {t("y", {1, 4, 6, 6})});
  EXPECT_EQ(cost_of(biased).flops, cost_of(computed).flops + 4u * 36);
}

TEST(DataKindsTest, ResizeLrnAndLayerNormOverAnyAxes) {
  // bilinear x2 of a 4x4 map: 3 + 2*3 = 9 FLOPs per output element; cubic: 7 + 4*7 = 35
  const OpRecord resize =
      with(op("r", OpKind::kResize, {t("x", {1, 1, 4, 4})}, {t("y", {1, 1, 8, 8})}), "mode", std::string("linear"));
  EXPECT_EQ(cost_of(resize).flops, 64u * 9);
  EXPECT_EQ(cost_of(with(resize, "mode", std::string("cubic"))).flops, 64u * 35);
  EXPECT_THROW(cost_of(with(resize, "mode", std::string("nearest"))), Error);
  // LRN, 5 channels, size 3: clipped windows 2, 3, 3, 3, 2 = 13; per position 2*13 + 3*5 = 41
  const OpRecord lrn =
      with(op("l", OpKind::kLocalResponseNorm, {t("x", {1, 5, 2, 2})}, {t("y", {1, 5, 2, 2})}), "size", I{3});
  EXPECT_EQ(cost_of(lrn).flops, 4u * 41);
  EXPECT_EQ(cost_of(lrn).transcendentals, 20u);
  // a window wider than the channels: every window is all 5 channels -> 2*25 + 15 = 65 per position
  EXPECT_EQ(cost_of(with(lrn, "size", I{11})).flops, 4u * 65);
  // one channel, size 5: the window is that channel -> 2*1 + 3 = 5 per position
  EXPECT_EQ(
      cost_of(with(op("l", OpKind::kLocalResponseNorm, {t("x", {2, 1, 3})}, {t("y", {2, 1, 3})}), "size", I{5})).flops,
      6u * 5);
  // layer norm over axes 0, 2, 3 of [2, 3, 4, 4]: 3 rows of 32 -> 3 * (5*32 + 2)
  const OpRecord mvn =
      with(op("n", OpKind::kLayerNorm, {t("x", {2, 3, 4, 4})}, {t("y", {2, 3, 4, 4})}), "axes", V{0, 2, 3});
  EXPECT_EQ(cost_of(mvn).flops, 3u * 162);
  EXPECT_EQ(cost_of(mvn).transcendentals, 3u);
  EXPECT_THROW(cost_of(with(mvn, "axes", V{0, 4})), Error);
  EXPECT_THROW(cost_of(with(mvn, "axes", V{2, -2})), Error);  // the same axis twice
}

std::shared_ptr<OpGraph> body_of(std::vector<OpRecord> ops) {
  auto g = std::make_shared<OpGraph>("body");
  for (OpRecord& r : ops) g->add(std::move(r));
  g->finalize();
  return g;
}

TEST(LoopTest, CountsTheBodyTimesItsIterations) {
  // body: h = tanh(x W) with W [16, 16] over [4, 16], 10 iterations
  OpRecord loop =
      with(op("loop", OpKind::kLoop, {t("x0", {4, 16})}, {t("h", {4, 16})}, {p("W", {16, 16})}), "iterations", I{10});
  loop.body = body_of(
      {op("mm", OpKind::kMatMul, {t("x", {4, 16})}, {t("xw", {4, 16})}, {p("W", {16, 16})}),
       with(op("act", OpKind::kActivation, {t("xw", {4, 16})}, {t("h", {4, 16})}), "function", std::string("tanh"))});
  const OpCost once_mm = cost_of(loop.body->op(0));
  const OpCost once_act = cost_of(loop.body->op(1));
  const OpCost c = cost_of(loop);
  EXPECT_EQ(c.contraction_flops, 10 * once_mm.contraction_flops);
  EXPECT_EQ(c.flops, 10 * (once_mm.flops + once_act.flops));
  EXPECT_EQ(c.transcendentals, 10 * once_act.transcendentals);
  EXPECT_EQ(c.bytes_read, 10 * (once_mm.bytes_read + once_act.bytes_read));
  EXPECT_EQ(c.bytes_written, 10 * (once_mm.bytes_written + once_act.bytes_written));
  EXPECT_EQ(c.parameter_bytes, 16u * 16 * 4);  // the loop's weights, once
}

TEST(LoopTest, AnUncountableBodyLeavesTheLoopUnmodeledWithTheReason) {
  OpRecord loop = with(op("loop", OpKind::kLoop, {t("x", {4})}, {t("y", {4})}), "iterations", I{3});
  loop.body = body_of({op("odd", OpKind::kUnknown, {t("x", {4})}, {t("y", {4})})});
  const OpCost c = cost_of(loop);
  EXPECT_FALSE(c.modeled);
  EXPECT_NE(c.unmodeled_reason.find("body op 'odd'"), std::string::npos);
  // malformed body ops and overflowing iteration counts too, not the whole model
  loop.body = body_of({op("bad", OpKind::kMatMul, {t("x", {4})}, {t("y", {4})})});
  EXPECT_FALSE(cost_of(loop).modeled);
  loop.body = body_of(
      {with(op("a", OpKind::kUnary, {t("x", {1 << 20})}, {t("y", {1 << 20})}), "function", std::string("exp"))});
  loop.inputs = {t("x", {1 << 20})};
  loop.outputs = {t("y", {1 << 20})};
  loop.attributes.set("iterations", std::int64_t{1} << 50);
  const OpCost huge = cost_of(loop);
  EXPECT_FALSE(huge.modeled);
  EXPECT_NE(huge.unmodeled_reason.find("overflow"), std::string::npos);
  EXPECT_THROW(cost_of(with(op("l", OpKind::kLoop, {}, {t("y", {1})}), "iterations", I{2})), Error);  // no body
}

}  // namespace
}  // namespace neuralcost
