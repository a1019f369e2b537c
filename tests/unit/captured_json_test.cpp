// Captured ops as a worker sends them (docs/worker-protocol.md): values of every kind parse,
// and a malformed op names the source, the op's index and name, and the field.
#include "backends/capture/captured_json.hpp"
#include "backends/capture/captured_op.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"

namespace neuralcost::capture {
namespace {

using nlohmann::json;
using testing::HasSubstr;

std::string error_of(const json& ops) {
  try {
    captured_ops_from_json(ops, "capture reply");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
    return e.what();
  }
  return "(accepted)";
}

TEST(CapturedJsonTest, EveryKindOfValueParses) {
  const json ops = json::parse(R"([{"op": "jax::dot_general",
      "in": [{"tensor": "input0", "shape": [2, 3], "dtype": "float32"},
             {"tensor": "w", "shape": [3, 4], "dtype": "bfloat16", "param": true},
             {"tensors": [{"tensor": "a", "shape": [], "dtype": "int64"}]},
             7, 0.5, true, "same", null, [1, 2], ["x"]],
      "out": [{"tensor": "%0", "shape": [2, 4], "dtype": "float32"}],
      "attrs": {"lhs_contracting": [1], "precision": null}}])");
  const auto parsed = captured_ops_from_json(ops, "test");
  ASSERT_EQ(parsed.size(), 1u);
  const CapturedOp& op = parsed[0];
  EXPECT_EQ(op.name, "jax::dot_general");
  ASSERT_EQ(op.inputs.size(), 10u);
  using K = CapturedValue::Kind;
  EXPECT_EQ(op.inputs[0].kind, K::kTensor);
  EXPECT_FALSE(op.inputs[0].tensors[0].parameter);
  EXPECT_TRUE(op.inputs[1].tensors[0].parameter);
  EXPECT_EQ(op.inputs[1].tensors[0].dtype, DType::kBf16);
  EXPECT_EQ(op.inputs[2].kind, K::kTensorList);
  EXPECT_EQ(op.inputs[2].tensors[0].dtype, DType::kInt64);
  EXPECT_EQ(op.inputs[3].kind, K::kInt);
  EXPECT_EQ(op.inputs[4].kind, K::kDouble);
  EXPECT_EQ(op.inputs[5].kind, K::kBool);
  EXPECT_EQ(op.inputs[6].kind, K::kString);
  EXPECT_EQ(op.inputs[7].kind, K::kNone);
  EXPECT_EQ(op.inputs[8].kind, K::kInts);
  EXPECT_EQ(op.inputs[9].kind, K::kOther);
  EXPECT_EQ(op.outputs[0].tensors[0].shape, (Shape{2, 4}));
  EXPECT_EQ(op.attributes.at("lhs_contracting").ints, (std::vector<std::int64_t>{1}));
}

TEST(CapturedJsonTest, MalformedOpsNameTheOpAndField) {
  EXPECT_THAT(error_of(json::object()), HasSubstr("capture reply: 'ops' must be an array"));
  EXPECT_THAT(error_of(json::parse(R"([{"in": []}])")), HasSubstr("op #0 (''), field 'op'"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "tf::MatMul", "in": {}}])")),
              HasSubstr("op #0 ('tf::MatMul'), field 'in': must be an array"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "a"}, {"op": "tf::Relu", "in": [{"tensor": "x"}]}])")),
              HasSubstr("op #1 ('tf::Relu'), field 'in[0]': tensor 'x' has no 'shape' array"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "out": [{"tensor": "y", "shape": [2, -1]}]}])")),
              HasSubstr("field 'out[0]': tensor 'y' has a dimension that is not an integer in 0..2^40: -1"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "in": [{"tensor": "y", "shape": [2], "dtype": "complex64"}]}])")),
              HasSubstr("tensor 'y' has dtype 'complex64', which is not known"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "in": [{"tensor": "y", "shape": [2], "param": "yes"}]}])")),
              HasSubstr("'param' must be true or false"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "attrs": [1]}])")), HasSubstr("field 'attrs': must be an object"));
  EXPECT_THAT(
      error_of(json::parse(R"([{"op": "r", "in": [{"tensor": "y", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}])")),
      HasSubstr("has rank 17 (at most 16)"));
}

TEST(CapturedJsonTest, AKernelsEventBecomesEveryRecordsEventAndNullIsNone) {
  // docs/worker-protocol.md, "Kernel traces": a fused kernel (event 0) ran both ops; the third no kernel ran
  const json ops = json::parse(R"([
      {"op": "jax::add", "in": [{"tensor": "input0", "shape": [2, 3], "dtype": "float32"}, 1.0],
       "out": [{"tensor": "%1", "shape": [2, 3], "dtype": "float32"}], "event": 0},
      {"op": "jax::tanh", "in": [{"tensor": "%1", "shape": [2, 3], "dtype": "float32"}],
       "out": [{"tensor": "%2", "shape": [2, 3], "dtype": "float32"}], "event": 0},
      {"op": "jax::exp", "in": [{"tensor": "%2", "shape": [2, 3], "dtype": "float32"}],
       "out": [{"tensor": "%3", "shape": [2, 3], "dtype": "float32"}], "event": null}])");
  const std::vector<CapturedOp> calls = captured_ops_from_json(ops, "capture reply");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].event, std::optional<std::int64_t>(0));
  EXPECT_EQ(calls[2].event, std::optional<std::int64_t>(-1));
  const OpGraph graph = graph_from_captured(calls, "g");
  std::vector<std::int64_t> events;
  for (std::size_t i = 0; i < graph.size(); ++i) events.push_back(graph.op(i).attributes.get_int("event", -2));
  EXPECT_EQ(events, (std::vector<std::int64_t>{0, 0, -1}));
  // without "event", each op is its own event (op by op)
  const OpGraph plain = graph_from_captured(captured_ops_from_json(json::parse(R"([{"op": "jax::exp",
      "in": [{"tensor": "input0", "shape": [2], "dtype": "float32"}], "out": [{"tensor": "%1", "shape": [2], "dtype": "float32"}]}])"),
                                                                   "capture reply"),
                                            "g");
  EXPECT_EQ(plain.op(0).attributes.get_int("event", -2), 0);
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "event": -1}])")),
              HasSubstr("field 'event': must be a kernel's index"));
  EXPECT_THAT(error_of(json::parse(R"([{"op": "r", "event": "0"}])")), HasSubstr("field 'event'"));
}

TEST(CapturedJsonTest, AnOpsModuleNamesItsRecords) {
  const json ops = json::parse(R"([{"op": "aten::relu", "module": "stage0.relu",
      "in": [{"tensor": "input0", "shape": [2, 3], "dtype": "float32"}],
      "out": [{"tensor": "%0", "shape": [2, 3], "dtype": "float32"}]},
    {"op": "aten::relu", "in": [{"tensor": "%0", "shape": [2, 3], "dtype": "float32"}],
      "out": [{"tensor": "%1", "shape": [2, 3], "dtype": "float32"}]}])");
  const auto parsed = captured_ops_from_json(ops, "test");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].module, "stage0.relu");
  EXPECT_EQ(parsed[1].module, "");
  const OpGraph g = graph_from_captured(parsed, "g");
  EXPECT_EQ(g.op(0).attributes.get_string("module", "?"), "stage0.relu");
  EXPECT_EQ(g.op(1).attributes.get_string("module", "?"), "?");  // no module: no attribute
  EXPECT_THAT(error_of(json::parse(R"([{"op": "aten::relu", "module": 3}])")),
              HasSubstr("must be a string (the module path the op ran in)"));
}

}  // namespace
}  // namespace neuralcost::capture
