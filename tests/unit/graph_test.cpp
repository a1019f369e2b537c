// The op graph: edges, consistency checks, topological order and shared parameters.
#include "neuralcost/core/graph.hpp"

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;

OpRecord relu(const std::string& name, const std::string& in, const std::string& out) {
  return with(op(name, OpKind::kActivation, {t(in, {4})}, {t(out, {4})}), "function", std::string("relu"));
}

TEST(GraphTest, IndexesProducersConsumersInputsAndOutputs) {
  OpGraph g("g");
  g.add(relu("a", "x", "y"));
  g.add(relu("b", "y", "z1"));
  g.add(relu("c", "y", "z2"));
  g.finalize();
  EXPECT_EQ(g.producer("y"), 0u);
  EXPECT_FALSE(g.producer("x").has_value());
  EXPECT_EQ(g.consumers("y"), (std::vector<std::size_t>{1, 2}));
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0].name, "x");
  EXPECT_EQ(g.outputs(), (std::vector<std::string>{"z1", "z2"}));
}

TEST(GraphTest, FinalizeSortsTopologically) {
  OpGraph g("g");
  g.add(relu("second", "y", "z"));
  g.add(relu("first", "x", "y"));
  g.finalize();
  EXPECT_EQ(g.op(0).name, "first");
  EXPECT_EQ(g.op(1).name, "second");
  EXPECT_EQ(g.consumers("y"), (std::vector<std::size_t>{1}));
}

TEST(GraphTest, CyclesAreRejectedNamingAnOp) {
  OpGraph g("loop");
  g.add(relu("a", "y", "x"));
  g.add(relu("b", "x", "y"));
  try {
    g.finalize();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "graph 'loop' has a cycle through op 'a'");
  }
}

TEST(GraphTest, RejectsSecondProducerDuplicateNameAndShapeMismatch) {
  OpGraph g("g");
  g.add(relu("a", "x", "y"));
  EXPECT_THROW(g.add(relu("b", "x", "y")), Error);
  EXPECT_THROW(g.add(relu("a", "y", "z")), Error);
  try {
    g.add(with(op("c", OpKind::kActivation, {t("y", {5})}, {t("w", {5})}), "function", std::string("relu")));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op 'c': tensor 'y' is 5 fp32 here but 4 fp32 elsewhere");
  }
}

TEST(GraphTest, NegativeDimensionsAreRejectedOnAdd) {
  OpGraph g("g");
  try {
    g.add(op("a", OpKind::kActivation, {t("x", {2, -1})}, {t("y", {2, 1})}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tensor 'x': dimension 1 is negative (-1)");
  }
}

TEST(GraphTest, SharedWeightIsOneParameter) {
  OpGraph g("tied");
  g.add(op("enc", OpKind::kLinear, {t("x", {2, 8})}, {t("h", {2, 4})}, {p("shared", {4, 8})}));
  g.add(op("dec", OpKind::kMatMul, {t("h", {2, 4})}, {t("y", {2, 8})}, {p("shared", {4, 8})}));
  g.finalize();
  ASSERT_EQ(g.unique_parameters().size(), 1u);
  OpGraph viewed("viewed");  // the decoder reads the same weight transposed
  viewed.add(op("enc", OpKind::kLinear, {t("x", {2, 8})}, {t("h", {2, 4})}, {p("shared", {4, 8})}));
  viewed.add(op("dec", OpKind::kMatMul, {t("h", {2, 4})}, {t("y", {2, 8})}, {p("shared", {4, 8})}));
  EXPECT_EQ(viewed.unique_parameters().size(), 1u);
  OpGraph bad("bad");
  bad.add(op("enc", OpKind::kLinear, {t("x", {2, 8})}, {t("h", {2, 4})}, {p("shared", {4, 8})}));
  bad.add(op("dec", OpKind::kLinear, {t("h", {2, 4})}, {t("y", {2, 4})}, {p("shared", {4, 4})}));
  EXPECT_THROW(bad.unique_parameters(), Error);
}

}  // namespace
}  // namespace neuralcost
