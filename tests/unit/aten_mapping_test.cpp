// The ATen-call-to-op-record mapping of the LibTorch backend, on hand-written calls: fused
// transformer ops are decomposed into the records they compute, and nothing is a silent zero.
#include "backends/capture/captured_op.hpp"
#include "unit/captured_values.hpp"

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost::capture {
namespace {

using namespace testing_values;

using Kind = CapturedValue::Kind;


Analysis analyze_calls(const std::vector<CapturedOp>& calls) {
  return analyze(graph_from_captured(calls, "calls"), HardwareDatabase::builtin().get("h100-sxm"));
}

TEST(AtenMappingTest, FusedEncoderLayerIsDecomposedIntoItsContractions) {
  // aten::_transformer_encoder_layer_fwd as PyTorch's fast path calls it: B=1, T=32, E=128, F=512
  const std::int64_t e = 128, f = 512;
  CapturedOp call;
  call.name = "aten::_transformer_encoder_layer_fwd";
  call.inputs = {tensor("input0", {1, 32, e}), integer(e), integer(4),
                 tensor("qkv.w", {3 * e, e}, true), tensor("qkv.b", {3 * e}, true),
                 tensor("proj.w", {e, e}, true), tensor("proj.b", {e}, true),
                 boolean(false), boolean(false), CapturedValue{},
                 tensor("n1.w", {e}, true), tensor("n1.b", {e}, true),
                 tensor("n2.w", {e}, true), tensor("n2.b", {e}, true),
                 tensor("ffn1.w", {f, e}, true), tensor("ffn1.b", {f}, true),
                 tensor("ffn2.w", {e, f}, true), tensor("ffn2.b", {e}, true), none(), none()};
  call.outputs = {tensor("%0", {1, 32, e})};
  const Analysis a = analyze_calls({call});
  EXPECT_TRUE(a.complete());
  // docs/reference-networks.md: 13,107,200 contraction FLOPs per layer and sample
  EXPECT_EQ(a.totals.contraction_flops, 13107200u);
  EXPECT_EQ(a.totals.parameter_count, 198272u);
  for (const OpRecord& op : a.graph.ops()) EXPECT_EQ(op.attributes.get_int("event"), 0);
  // the decomposition ends in the call's real output, so later calls connect to it
  EXPECT_EQ(a.graph.ops().back().outputs[0].name, "%0");
}

TEST(AtenMappingTest, FusedScaledDotProductAttentionIsOneAttention) {
  // what scaled_dot_product_attention dispatches to on the CPU (torch worker, train mode):
  // (query, key, value, dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp)
  CapturedOp call;
  call.name = "aten::_scaled_dot_product_flash_attention_for_cpu";
  call.inputs = {tensor("q", {2, 4, 8, 16}), tensor("k", {2, 4, 8, 16}), tensor("v", {2, 4, 8, 16}),
                 CapturedValue{}, boolean(false), none(), none()};
  call.outputs = {tensor("%0", {2, 4, 8, 16}), tensor("%1", {2, 4, 8})};
  Analysis a = analyze_calls({call});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 2 * 4 * 8 * 8 * 16);  // Q·Kᵀ and P·V
  call.inputs[4] = boolean(true);  // causal: 36 of the 64 query-key pairs
  a = analyze_calls({call});
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 2 * 4 * 36 * 16);
}

TEST(AtenMappingTest, UnknownCallsAreUnmodeledWithTheirBytes) {
  CapturedOp call;
  call.name = "aten::fancy_op";
  call.inputs = {tensor("input0", {4, 4})};
  call.outputs = {tensor("%0", {4, 4})};
  const Analysis a = analyze_calls({call});
  ASSERT_EQ(a.unmodeled.size(), 1u);
  EXPECT_EQ(a.unmodeled[0].reason, "op type 'aten::fancy_op' is not modeled");
  EXPECT_EQ(a.ops[0].cost.bytes(), 128u);
}

TEST(AtenMappingTest, AddmmKeepsOperandOrderAndCountsTheBias) {
  CapturedOp call;  // addmm(bias, x, Wt)
  call.name = "aten::addmm";
  call.inputs = {tensor("b", {10}, true), tensor("input0", {2, 128}), tensor("wt", {128, 10}, true)};
  call.outputs = {tensor("%0", {2, 10})};
  const Analysis a = analyze_calls({call});
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 128 * 10);
  EXPECT_EQ(a.totals.flops, 2u * 2 * 128 * 10 + 20);
  EXPECT_EQ(a.totals.parameter_count, 1290u);
}

TEST(AtenMappingTest, ViewsOfWeightsAreNotOps) {
  CapturedOp t;  // aten::t(W): the result is still the weight
  t.name = "aten::t";
  t.inputs = {tensor("w", {10, 128}, true)};
  t.outputs = {tensor("w", {128, 10}, true)};
  const OpGraph g = graph_from_captured({t}, "views");
  EXPECT_EQ(g.size(), 0u);
}

// An ATen op with a trailing underscore writes into its first argument: the record says so (the
// memory ledger aliases its output to that storage), the out-of-place op does not.
TEST(AtenMappingTest, TrailingUnderscoreOpsAreInPlace) {
  for (const char* name : {"aten::add_", "aten::relu_", "aten::add", "aten::relu"}) {
    CapturedOp call;
    call.name = name;
    call.inputs = {tensor("input0", {2, 8})};
    if (std::string(name).find("add") != std::string::npos) call.inputs.push_back(tensor("b", {8}, true));
    call.outputs = {tensor("%0", {2, 8})};
    const OpGraph g = graph_from_captured({call}, "in_place");
    ASSERT_EQ(g.size(), 1u) << name;
    EXPECT_EQ(g.op(0).attributes.get_bool("in_place", false), std::string(name).back() == '_') << name;
  }
}

}  // namespace
}  // namespace neuralcost::capture
