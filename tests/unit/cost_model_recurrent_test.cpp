// Cost model for RNN, GRU and LSTM: per-step counts times steps, layers and directions.
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using I = std::int64_t;

OpRecord recurrent(OpKind kind, I batch, I steps, I in, I hidden, I layers, bool bidirectional, bool bias = true) {
  const I gates = kind == OpKind::kLstm ? 4 : kind == OpKind::kGru ? 3 : 1;
  const I dirs = bidirectional ? 2 : 1;
  std::vector<ParameterDesc> params;
  for (I l = 0; l < layers; ++l) {
    for (I d = 0; d < dirs; ++d) {
      const std::string s = std::to_string(l) + "_" + std::to_string(d);
      params.push_back(p("w_ih" + s, {gates * hidden, l == 0 ? in : dirs * hidden}));
      params.push_back(p("w_hh" + s, {gates * hidden, hidden}));
      if (bias) {
        params.push_back(p("b_ih" + s, {gates * hidden}));
        params.push_back(p("b_hh" + s, {gates * hidden}));
      }
    }
  }
  OpRecord r = op("rnn", kind, {t("x", {batch, steps, in})}, {t("y", {batch, steps, dirs * hidden})}, params);
  r.attributes.set("hidden_size", hidden);
  r.attributes.set("num_layers", layers);
  r.attributes.set("bidirectional", bidirectional);
  r.attributes.set("bias", bias);
  r.attributes.set("batch_first", true);
  return r;
}

TEST(RecurrentCostTest, RnnContractionMatchesReferenceDocument) {
  const OpCost c = cost_of(recurrent(OpKind::kRnn, 1, 32, 128, 128, 2, false));
  EXPECT_EQ(c.contraction_flops, 2u * 2097152);
  // per step and layer: biases 2H, combine H, tanh H
  EXPECT_EQ(c.flops, c.contraction_flops + 2u * 32 * (2 * 128 + 2 * 128));
  EXPECT_EQ(c.transcendentals, 2u * 32 * 128);
}

TEST(RecurrentCostTest, LstmContractionMatchesReferenceDocument) {
  const OpCost c = cost_of(recurrent(OpKind::kLstm, 1, 32, 128, 128, 2, false));
  EXPECT_EQ(c.contraction_flops, 2u * 8388608);
  EXPECT_EQ(c.flops, c.contraction_flops + 2u * 32 * (2 * 4 * 128 + 22 * 128));
  EXPECT_EQ(c.transcendentals, 2u * 32 * 5 * 128);
  // weights are read once for the whole sequence, not once per step
  EXPECT_EQ(c.parameter_bytes, 2u * 4 * 128 * (128 + 128 + 2) * 4);
}

TEST(RecurrentCostTest, GruBidirectionalFeedsTwiceTheWidthToLaterLayers) {
  const OpCost c = cost_of(recurrent(OpKind::kGru, 3, 10, 16, 8, 2, true));
  const std::uint64_t cells = 3 * 10 * 2;  // batch x steps x directions, per layer
  const std::uint64_t layer0 = cells * 2 * 3 * 8 * (16 + 8);
  const std::uint64_t layer1 = cells * 2 * 3 * 8 * (16 + 8);  // input width 2H = 16
  EXPECT_EQ(c.contraction_flops, layer0 + layer1);
  EXPECT_EQ(c.flops, c.contraction_flops + 2 * cells * (2 * 3 * 8 + 17 * 8));
}

TEST(RecurrentCostTest, SequenceFirstIsTheDefaultLayout) {
  OpRecord r = recurrent(OpKind::kRnn, 3, 5, 8, 8, 1, false);
  r.attributes.set("batch_first", false);
  r.inputs[0].shape = {5, 3, 8};
  r.outputs[0].shape = {5, 3, 8};
  const OpCost seq_first = cost_of(r);
  EXPECT_EQ(seq_first.contraction_flops, cost_of(recurrent(OpKind::kRnn, 3, 5, 8, 8, 1, false)).contraction_flops);
  r.attributes = Attributes();
  r.attributes.set("hidden_size", std::int64_t{8});
  EXPECT_EQ(cost_of(r).flops, seq_first.flops);  // no batch_first attribute: [T, B, I]
}

TEST(RecurrentCostTest, NoBiasSkipsBiasAdds) {
  const OpCost c = cost_of(recurrent(OpKind::kRnn, 1, 4, 8, 8, 1, false, false));
  EXPECT_EQ(c.flops, 4u * 2 * 8 * 16 + 4 * 2 * 8);
}

TEST(RecurrentCostTest, ParameterListMustMatchAttributes) {
  OpRecord r = recurrent(OpKind::kLstm, 1, 4, 8, 8, 2, false);
  r.parameters.pop_back();
  try {
    cost_of(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("parameters hold 1120 elements, expected 1152"));
  }
}

TEST(RecurrentCostTest, AbsurdLayerCountsFailAtOnce) {
  OpRecord r = recurrent(OpKind::kRnn, 1, 4, 8, 8, 1, false);
  r.attributes.set("num_layers", I{1} << 62);
  EXPECT_THROW(cost_of(r), Error);  // no loop over 2^62 layers
  r = recurrent(OpKind::kRnn, 1, 4, 8, 8, 1, false);
  r.attributes.set("hidden_size", std::numeric_limits<I>::max());
  EXPECT_THROW(cost_of(r), Error);
}

TEST(RecurrentCostTest, ProjectionsAreUnmodeled) {
  OpRecord r = recurrent(OpKind::kLstm, 1, 4, 8, 8, 1, false);
  r.attributes.set("proj_size", I{4});
  EXPECT_FALSE(cost_of(r).modeled);
}

}  // namespace
}  // namespace neuralcost
