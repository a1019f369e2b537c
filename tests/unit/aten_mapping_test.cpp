// The ATen-call-to-op-record mapping of the LibTorch backend, on hand-written calls: fused
// transformer ops are decomposed into the records they compute, and nothing is a silent zero.
#include "backends/capture/captured_op.hpp"
#include "unit/captured_values.hpp"

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
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
  call.inputs = {tensor("input0", {1, 32, e}),
                 integer(e),
                 integer(4),
                 tensor("qkv.w", {3 * e, e}, true),
                 tensor("qkv.b", {3 * e}, true),
                 tensor("proj.w", {e, e}, true),
                 tensor("proj.b", {e}, true),
                 boolean(false),
                 boolean(false),
                 CapturedValue{},
                 tensor("n1.w", {e}, true),
                 tensor("n1.b", {e}, true),
                 tensor("n2.w", {e}, true),
                 tensor("n2.b", {e}, true),
                 tensor("ffn1.w", {f, e}, true),
                 tensor("ffn1.b", {f}, true),
                 tensor("ffn2.w", {e, f}, true),
                 tensor("ffn2.b", {e}, true),
                 none(),
                 none()};
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

TEST(AtenMappingTest, GroupedMmIsAnExpertLinearOverTheMeasuredRouting) {
  // transformers' grouped_mm experts: 6 routed rows of width 16 through 4 experts' W [E, in 16, out 32],
  // the rows each expert took (from offs [2, 2, 5, 6]) in attr expert_rows: expert 1 took none
  CapturedOp call;
  call.name = "aten::_grouped_mm";
  call.inputs = {tensor("x", {6, 16}), tensor("experts.gate_up_proj", {4, 16, 32}, true), tensor("offs", {4}), none(),
                 none()};
  call.outputs = {tensor("%0", {6, 32})};
  call.attributes["expert_rows"] = ints({2, 0, 3, 1});
  const Analysis a = analyze_calls({call});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.graph.ops()[0].kind, OpKind::kExpertLinear);
  EXPECT_EQ(a.totals.contraction_flops, 2u * 6 * 16 * 32);
  EXPECT_EQ(a.ops[0].cost.parameter_bytes, 3u * 16 * 32 * 4);  // the 3 experts that took rows
  // routed rows beyond the input's rows, or a histogram of another length, are errors, not counts
  call.attributes["expert_rows"] = ints({2, 0, 3, 2});
  EXPECT_THROW(analyze_calls({call}), Error);
  call.attributes["expert_rows"] = ints({6});
  EXPECT_THROW(analyze_calls({call}), Error);
  // without the routing the op is unmodeled, never guessed
  call.attributes.clear();
  const Analysis unknown = analyze_calls({call});
  EXPECT_FALSE(unknown.complete());
  EXPECT_EQ(unknown.graph.ops()[0].kind, OpKind::kUnknown);
}

CapturedValue bf16(CapturedValue v) {
  for (CapturedTensor& t : v.tensors) t.dtype = DType::kBf16;
  return v;
}

CapturedOp cast_of(const std::string& from, Shape shape, const std::string& to, bool parameter) {
  CapturedOp c;
  c.name = "aten::_to_copy";
  c.inputs = {tensor(from, shape, parameter)};
  c.outputs = {bf16(tensor(to, shape))};
  return c;
}

TEST(AtenMappingTest, AutocastsWeightCastsFoldIntoARecurrentLayerOnly) {
  // torch.autocast before a bf16 LSTM layer (PyTorch 2's CPU mkldnn_rnn_layer): T=3, B=2, I=H=4,
  // its fp32 weights cast to bf16; a linear head reads a cast of its own weight
  const std::int64_t h = 4;
  std::vector<CapturedOp> calls = {cast_of("input0", {3, 2, h}, "%0", false), cast_of("w_ih", {4 * h, h}, "%1", true),
                                   cast_of("w_hh", {4 * h, h}, "%2", true),   cast_of("b_ih", {4 * h}, "%3", true),
                                   cast_of("b_hh", {4 * h}, "%4", true),      cast_of("head.w", {h, 10}, "%5", true)};
  CapturedOp lstm;
  lstm.name = "aten::mkldnn_rnn_layer";
  lstm.inputs = {bf16(tensor("%0", {3, 2, h})),
                 bf16(tensor("%1", {4 * h, h})),
                 bf16(tensor("%2", {4 * h, h})),
                 bf16(tensor("%3", {4 * h})),
                 bf16(tensor("%4", {4 * h})),
                 bf16(tensor("hx", {2, h})),
                 bf16(tensor("cx", {2, h})),
                 boolean(false),
                 ints({}),
                 integer(2),
                 integer(h),
                 integer(1),
                 boolean(true),
                 boolean(false),
                 boolean(false),
                 boolean(true)};
  CapturedValue workspace = tensor("%9", {5000});
  workspace.tensors[0].dtype = DType::kInt8;
  lstm.outputs = {bf16(tensor("%6", {3, 2, h})), bf16(tensor("%7", {2, h})), bf16(tensor("%8", {2, h})), workspace};
  calls.push_back(lstm);
  CapturedOp head;
  head.name = "aten::mm";
  head.inputs = {bf16(tensor("%7", {2, h})), bf16(tensor("%5", {h, 10}))};
  head.outputs = {bf16(tensor("%10", {2, 10}))};
  calls.push_back(head);
  const Analysis a = analyze_calls(calls);
  ASSERT_TRUE(a.complete());
  // the four weight casts are gone (the layer reads the fp32 parameters); the input's and the
  // head's casts stay copies
  std::vector<std::string> names;
  for (const OpRecord& op : a.graph.ops()) names.push_back(op.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0:aten::_to_copy", "5:aten::_to_copy", "6:aten::mkldnn_rnn_layer",
                                             "7:aten::mm"}));
  const OpRecord& layer = a.graph.op(2);
  EXPECT_EQ(layer.kind, OpKind::kLstm);
  ASSERT_EQ(layer.parameters.size(), 4u);
  EXPECT_EQ(layer.parameters[0].id, "w_ih");
  EXPECT_EQ(layer.parameters[0].dtype, DType::kFp32);
  EXPECT_EQ(layer.attributes.get_int("workspace_bytes"), 5000);
  EXPECT_EQ(a.graph.op(1).parameters.at(0).id, "head.w");
}

TEST(AtenMappingTest, TorchScriptsAutocastCastsAreCopiesOrNothing) {
  CapturedOp down;
  down.name = "aten::_autocast_to_reduced_precision";
  down.inputs = {tensor("input0", {2, 8}), boolean(false), boolean(true), text("Half"), text("BFloat16")};
  down.outputs = {bf16(tensor("%0", {2, 8}))};
  CapturedOp same = down;  // already bf16: returned as it is
  same.inputs[0] = bf16(tensor("%0", {2, 8}));
  same.outputs = {bf16(tensor("%1", {2, 8}))};
  const Analysis a = analyze_calls({down, same});
  ASSERT_TRUE(a.complete());
  ASSERT_EQ(a.graph.size(), 2u);
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kUnary);
  EXPECT_EQ(a.ops[0].cost.bytes_read, 2u * 8 * 4);
  EXPECT_EQ(a.ops[0].cost.bytes_written, 2u * 8 * 2);
  EXPECT_EQ(a.graph.op(1).kind, OpKind::kReshape);  // a view: no work
  EXPECT_EQ(a.ops[1].cost.bytes_read + a.ops[1].cost.bytes_written, 0u);
}

TEST(AtenMappingTest, TopkAndSortAreCountedComparisonsNamedAsSuch) {
  // a router's topk(scores [6, 8], k 2, dim -1) and sort(indices [12], dim 0): 6 x 2 x 7 and 12 x 4
  CapturedOp topk;
  topk.name = "aten::topk";
  topk.inputs = {tensor("scores", {6, 8}), integer(2), integer(-1), boolean(true), boolean(true)};
  topk.outputs = {tensor("%0", {6, 2}), int64_tensor("%1", {6, 2})};
  CapturedOp sort;
  sort.name = "aten::sort";
  sort.inputs = {int64_tensor("ids", {12}), integer(0), boolean(false)};
  sort.outputs = {int64_tensor("%2", {12}), int64_tensor("%3", {12})};
  const Analysis a = analyze_calls({topk, sort});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.ops[0].cost.flops, 6u * 2 * 7);
  EXPECT_EQ(a.ops[1].cost.flops, 12u * 4);
  EXPECT_EQ(a.ops[0].cost.bytes_written, 6u * 2 * 4 + 6u * 2 * 8);  // values and int64 indices
  bool named = false;
  for (const std::string& n : a.approximations)
    named = named || n.find("top-2 of 8 counted as 2 passes") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(AtenMappingTest, TheRoutersIndexOpsAreModeled) {
  // transformers' MoE bookkeeping: floor_divide, histc, scatter_ of a scalar, index_put_ accumulating
  CapturedOp div;
  div.name = "aten::floor_divide";
  div.inputs = {int64_tensor("ids", {12}), integer(2)};
  div.outputs = {int64_tensor("%0", {12})};
  CapturedOp histc;
  histc.name = "aten::histc";
  histc.inputs = {tensor("ids_f", {12}), integer(8), integer(0), integer(7)};
  histc.outputs = {tensor("%1", {8})};
  CapturedOp scatter;
  scatter.name = "aten::scatter_";
  scatter.inputs = {tensor("mask", {6, 4}), integer(1), int64_tensor("idx", {6, 2}), integer(1)};
  scatter.outputs = {tensor("%2", {6, 4})};
  CapturedOp put;
  put.name = "aten::index_put_";
  CapturedValue indices;
  indices.kind = Kind::kTensorList;
  indices.tensors = {int64_tensor("rows", {5}).tensors[0]};
  put.inputs = {tensor("out", {6, 16}), indices, tensor("vals", {5, 16}), boolean(true)};
  put.outputs = {tensor("%3", {6, 16})};
  const Analysis a = analyze_calls({div, histc, scatter, put});
  EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
  EXPECT_EQ(a.ops[0].cost.flops, 24u);                  // a divide and a floor each
  EXPECT_EQ(a.ops[1].cost.flops, 48u);                  // 4 a value
  EXPECT_EQ(a.ops[2].cost.bytes_written, 6u * 2 * 8);   // as many bytes as its indices (named)
  EXPECT_EQ(a.ops[3].cost.flops, 5u * 16);              // one add per accumulated value
  EXPECT_EQ(a.ops[3].cost.bytes_written, 5u * 16 * 4);  // in place: the values written
}

TEST(AtenMappingTest, ComplexRotaryPairsAreComplexProducts) {
  // DeepSeek-V2's rotary positions: polar(ones, freqs [1, 3, 4]) -> complex [1, 3, 4], times a real
  // scalar, view_as_complex(q [2, 2, 3, 8] as [2, 2, 3, 4, 2]) times the table: complex values are
  // reported as (real, imaginary) pairs in a last dim of 2
  const auto complex = [](const std::string& name, Shape shape) {
    CapturedValue v = tensor(name, std::move(shape));
    v.tensors[0].complex = true;
    return v;
  };
  CapturedOp polar;
  polar.name = "aten::polar";
  polar.inputs = {tensor("ones", {1, 3, 4}), tensor("freqs", {1, 3, 4})};
  polar.outputs = {complex("%0", {1, 3, 4, 2})};
  CapturedOp scaled;
  scaled.name = "aten::mul";
  scaled.inputs = {complex("%0", {1, 3, 4, 2}), number(1.5)};
  scaled.outputs = {complex("%1", {1, 3, 4, 2})};
  CapturedOp pairs;
  pairs.name = "aten::view_as_complex";
  pairs.inputs = {tensor("q", {2, 2, 3, 4, 2})};
  pairs.outputs = {complex("%2", {2, 2, 3, 4, 2})};
  CapturedOp unsqueeze;
  unsqueeze.name = "aten::unsqueeze";
  unsqueeze.inputs = {complex("%1", {1, 3, 4, 2}), integer(1)};
  unsqueeze.outputs = {complex("%5", {1, 1, 3, 4, 2})};
  CapturedOp product;
  product.name = "aten::mul";
  product.inputs = {complex("%2", {2, 2, 3, 4, 2}), complex("%5", {1, 1, 3, 4, 2})};
  product.outputs = {complex("%3", {2, 2, 3, 4, 2})};
  CapturedOp real_times_complex;
  real_times_complex.name = "aten::mul";
  real_times_complex.inputs = {complex("%3", {2, 2, 3, 4, 2}), tensor("gate", {2, 2, 3, 4})};
  real_times_complex.outputs = {complex("%4", {2, 2, 3, 4, 2})};
  const Analysis a = analyze_calls({polar, scaled, pairs, unsqueeze, product, real_times_complex});
  EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
  // the real operands of polar and of the last product are viewed with a trailing 1 first (views of
  // their own, no work): find each call's binary op by its name
  const auto cost_of = [&](const std::string& call) -> OpCost {
    for (const OpRoofline& r : a.ops) {
      const OpRecord& op = a.graph.op(r.op_index);
      if (op.kind == OpKind::kBinary && op.name.rfind(call, 0) == 0) return r.cost;
    }
    ADD_FAILURE() << "no binary op of " << call;
    return {};
  };
  EXPECT_EQ(cost_of("0:aten::polar").flops, 2u * 12 * 2);  // abs·cos and abs·sin a pair
  EXPECT_EQ(cost_of("0:aten::polar").transcendentals, 12u * 2);
  EXPECT_EQ(cost_of("1:aten::mul").flops, 12u * 2);  // a real scalar: both parts
  EXPECT_EQ(cost_of("4:aten::mul").flops, 6u * 48);  // 48 complex products of 6 FLOPs
  EXPECT_EQ(cost_of("5:aten::mul").flops, 2u * 48);  // a real factor scales both parts
  std::size_t views = 0;
  for (const OpRecord& op : a.graph.ops()) views += op.kind == OpKind::kReshape;
  EXPECT_EQ(views, 2u + 1 + 1 + 1);  // polar's two operands, view_as_complex, unsqueeze, the real factor
}

TEST(AtenMappingTest, FusedScaledDotProductAttentionIsOneAttention) {
  // what scaled_dot_product_attention dispatches to on the CPU (torch worker, train mode):
  // (query, key, value, dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp)
  CapturedOp call;
  call.name = "aten::_scaled_dot_product_flash_attention_for_cpu";
  call.inputs = {tensor("q", {2, 4, 8, 16}),
                 tensor("k", {2, 4, 8, 16}),
                 tensor("v", {2, 4, 8, 16}),
                 CapturedValue{},
                 boolean(false),
                 none(),
                 none()};
  call.outputs = {tensor("%0", {2, 4, 8, 16}), tensor("%1", {2, 4, 8})};
  Analysis a = analyze_calls({call});
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 2 * 4 * 8 * 8 * 16);  // Q·Kᵀ and P·V
  call.inputs[4] = boolean(true);                                      // causal: 36 of the 64 query-key pairs
  a = analyze_calls({call});
  EXPECT_EQ(a.totals.contraction_flops, 2u * 2 * 2 * 4 * 36 * 16);
}

// aten::scaled_dot_product_attention as a torch.export program calls it (issue 29):
// (query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
TEST(AtenMappingTest, ScaledDotProductAttentionCountsItsMaskCausalGroupsAndDropout) {
  const std::uint64_t b = 2, h = 4, l = 8, d = 16;
  CapturedOp call;
  call.name = "aten::scaled_dot_product_attention";
  call.inputs = {tensor("q", {2, 4, 8, 16}),
                 tensor("k", {2, 4, 8, 16}),
                 tensor("v", {2, 4, 8, 16}),
                 none(),
                 number(0.0),
                 boolean(false),
                 none(),
                 boolean(false)};
  call.outputs = {tensor("%0", {2, 4, 8, 16})};
  Analysis a = analyze_calls({call});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2 * 2 * b * h * l * l * d);
  const std::uint64_t plain = a.totals.flops;
  // an additive mask held in a buffer is still the mask: one add per score, an input not a parameter
  call.inputs[3] = buffer("mask", {8, 8});
  a = analyze_calls({call});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.flops, plain + b * h * l * l);
  EXPECT_EQ(a.totals.parameter_count, 0u);
  EXPECT_EQ(a.graph.op(0).inputs.size(), 4u);
  // causal: the top-left triangle's 36 of 64 pairs
  call.inputs[3] = none();
  call.inputs[5] = boolean(true);
  a = analyze_calls({call});
  EXPECT_EQ(a.totals.contraction_flops, 2 * 2 * b * h * 36 * d);
  // grouped-query (enable_gqa): k and v with 2 heads for 4 query heads count as 4 heads
  call.inputs[1] = tensor("k", {2, 2, 8, 16});
  call.inputs[2] = tensor("v", {2, 2, 8, 16});
  call.inputs[7] = boolean(true);
  a = analyze_calls({call});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.contraction_flops, 2 * 2 * b * h * 36 * d);
  // dropout: one multiply per kept score more
  const std::uint64_t without = a.totals.flops;
  call.inputs[4] = number(0.1);
  a = analyze_calls({call});
  EXPECT_EQ(a.totals.flops, without + b * h * 36);
  EXPECT_DOUBLE_EQ(a.graph.op(0).attributes.get_double("dropout", 0), 0.1);
}

// Buffers are state (issue 29): position ids in a buffer are an embedding's indices, and a
// rotary frequency buffer is counted as a buffer, not as a parameter.
TEST(AtenMappingTest, BuffersAreStateNotParametersNorMissingInputs) {
  CapturedOp emb;  // embedding(weight, indices): the indices a buffer of position ids
  emb.name = "aten::embedding";
  emb.inputs = {tensor("pos.weight", {64, 32}, true), buffer("position_ids", {1, 16}, DType::kInt64), integer(-1),
                boolean(false), boolean(false)};
  emb.outputs = {tensor("%0", {1, 16, 32})};
  CapturedOp mul;  // x * inv_freq
  mul.name = "aten::mul";
  mul.inputs = {tensor("%0", {1, 16, 32}), buffer("inv_freq", {32})};
  mul.outputs = {tensor("%1", {1, 16, 32})};
  const Analysis a = analyze_calls({emb, mul});
  ASSERT_TRUE(a.complete()) << a.unmodeled[0].reason;
  EXPECT_EQ(a.totals.parameter_count, 64u * 32);
  EXPECT_EQ(a.totals.buffer_count, 32u);
  EXPECT_EQ(a.graph.op(0).inputs.at(0).name, "position_ids");
}

// A view that broadcasts or selects from a weight (a class token expanded to the batch) is a
// free view that reads the weight, which is counted once at its own size.
TEST(AtenMappingTest, AnExpandedWeightIsCountedAtItsOwnSize) {
  CapturedOp expand;
  expand.name = "aten::expand";
  expand.inputs = {tensor("cls_token", {1, 1, 64}, true), ints({8, -1, -1}), boolean(false)};
  expand.outputs = {tensor("%0", {8, 1, 64})};
  CapturedOp cat;
  cat.name = "aten::cat";
  CapturedValue list;
  list.kind = Kind::kTensorList;
  list.tensors = {{"%0", {8, 1, 64}, DType::kFp32, false, true}, {"input0", {8, 16, 64}, DType::kFp32, false, true}};
  cat.inputs = {list, integer(1)};
  cat.outputs = {tensor("%1", {8, 17, 64})};
  const Analysis a = analyze_calls({expand, cat});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 64u);
  EXPECT_EQ(a.graph.op(0).kind, OpKind::kReshape);
}

// torch.export's own checks and the small ops of transformers' mask and position code.
TEST(AtenMappingTest, ExportChecksAreNoWorkAndSmallOpsAreMapped) {
  CapturedOp check;
  check.name = "aten::_assert_tensor_metadata";
  check.inputs = {tensor("input0", {2, 8})};
  EXPECT_EQ(graph_from_captured({check}, "checks").size(), 0u);
  auto call = [](const std::string& name, std::vector<CapturedValue> in, Shape out) {
    CapturedOp c;
    c.name = name;
    c.inputs = std::move(in);
    c.outputs = {tensor("%9", std::move(out))};
    return c;
  };
  const std::vector<std::pair<CapturedOp, std::uint64_t>> cases = {
      {call("aten::arange", {integer(16)}, {16}), 32},                                 // start + i·step
      {call("aten::cumsum", {tensor("x", {2, 16}), integer(1)}, {2, 16}), 30},         // 15 adds per row
      {call("aten::min", {tensor("x", {2, 16}), tensor("y", {2, 16})}, {2, 16}), 32},  // elementwise
      {call("aten::min", {tensor("x", {2, 16})}, {}), 31},                             // a reduction
      {call("aten::__and__", {tensor("x", {2, 16}), tensor("y", {2, 16})}, {2, 16}), 32},
      {call("aten::new_ones", {tensor("x", {2, 16}), ints({4, 4})}, {4, 4}), 0},
      {call("aten::diff", {tensor("x", {2, 16}), integer(1), integer(-1), none(), none()}, {2, 15}), 30},
      {call("aten::diff", {tensor("x", {2, 16}), integer(2), integer(-1), none(), none()}, {2, 14}),
       58},  // 15 + 14 per row
  };
  for (const auto& [c, flops] : cases) {
    const Analysis a = analyze_calls({c});
    ASSERT_TRUE(a.complete()) << c.name << ": " << a.unmodeled[0].reason;
    EXPECT_EQ(a.totals.flops, flops) << c.name;
  }
  CapturedOp index;  // index(self, [None, idx]): the index tensors, Nones dropped by the worker
  index.name = "aten::index";
  CapturedValue indices;
  indices.kind = Kind::kTensorList;
  indices.tensors = {{"idx", {4}, DType::kInt64, false, true}};
  index.inputs = {tensor("x", {2, 16}), indices};
  index.outputs = {tensor("%0", {2, 4})};
  const Analysis a = analyze_calls({index});
  ASSERT_TRUE(a.complete());
  EXPECT_EQ(a.ops[0].cost.bytes_read, 2u * 4 * 4 + 4 * 8);  // the gathered values and the indices
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
