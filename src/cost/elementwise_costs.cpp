// Elementwise unary, binary and activation ops: a fixed FLOP count per output element from
// the table below (docs/counting.md lists it); transcendental evaluations count 1 FLOP each
// and are also reported separately. Inputs must broadcast to the output (numpy rules).
#include <map>
#include <string>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

struct PerElement {
  std::uint64_t flops;
  std::uint64_t transcendentals;
};

// The per-element counts of docs/counting.md; keep the two in step.
const std::map<std::string, PerElement>& table(OpKind kind) {
  static const std::map<std::string, PerElement> unary = {
      {"identity", {0, 0}}, {"copy", {0, 0}},   {"neg", {1, 0}},     {"abs", {1, 0}},
      {"sign", {1, 0}},     {"floor", {1, 0}},  {"ceil", {1, 0}},    {"round", {1, 0}},
      {"square", {1, 0}},   {"reciprocal", {1, 0}}, {"not", {1, 0}}, {"clip", {2, 0}},
      {"exp", {1, 1}},      {"log", {1, 1}},    {"sqrt", {1, 1}},    {"rsqrt", {1, 1}},
      {"sin", {1, 1}},      {"cos", {1, 1}},    {"tan", {1, 1}},     {"erf", {1, 1}},
      {"tanh", {1, 1}},     {"cast", {0, 0}},   {"asin", {1, 1}},    {"acos", {1, 1}},
      {"atan", {1, 1}},     {"sinh", {1, 1}},   {"cosh", {1, 1}},    {"asinh", {1, 1}},
      {"acosh", {1, 1}},    {"atanh", {1, 1}},  {"isinf", {1, 0}},   {"isnan", {1, 0}},
      {"quantize", {4, 0}}, {"dequantize", {2, 0}},
  };
  static const std::map<std::string, PerElement> binary = {
      {"add", {1, 0}}, {"sub", {1, 0}}, {"mul", {1, 0}}, {"div", {1, 0}}, {"max", {1, 0}},
      {"min", {1, 0}}, {"mod", {1, 0}}, {"pow", {1, 1}}, {"equal", {1, 0}}, {"less", {1, 0}},
      {"greater", {1, 0}}, {"and", {1, 0}}, {"or", {1, 0}}, {"xor", {1, 0}}, {"where", {1, 0}},
      {"bitshift", {1, 0}},
  };
  static const std::map<std::string, PerElement> activation = {
      {"relu", {1, 0}},        {"relu6", {2, 0}},     {"leaky_relu", {2, 0}},
      {"prelu", {2, 0}},       {"hardtanh", {2, 0}},  {"elu", {4, 1}},
      {"selu", {5, 1}},        {"celu", {5, 1}},      {"sigmoid", {4, 1}},
      {"tanh", {1, 1}},        {"silu", {5, 1}},      {"gelu", {5, 1}},
      {"gelu_tanh", {9, 1}},   {"softplus", {3, 2}},  {"mish", {5, 3}},
      {"hardsigmoid", {4, 0}}, {"hardswish", {5, 0}}, {"softsign", {3, 0}},
      {"thresholded_relu", {1, 0}}, {"shrink", {2, 0}},
  };
  switch (kind) {
    case OpKind::kUnary: return unary;
    case OpKind::kBinary: return binary;
    default: return activation;
  }
}

void require_broadcastable(const Shape& in, const Shape& out, const std::string& what) {
  bool ok = in.size() <= out.size();
  for (std::size_t i = 0; ok && i < in.size(); ++i) {
    const std::int64_t d = in[in.size() - 1 - i];
    ok = d == 1 || d == out[out.size() - 1 - i];
  }
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {} does not broadcast to the output {}", what, shape_string(in),
                            shape_string(out)));
  }
}

}  // namespace

void cost_elementwise(const OpRecord& op, OpCost& cost) {
  const std::string function = op.attributes.get_string("function", "");
  const TensorDesc& y = output(op, 0, "y");
  const std::size_t operands = op.inputs.size() + op.parameters.size();
  // a binary op with a scalar (x * 0.5) has one tensor operand: attribute scalar_operand
  const std::size_t needed =
      op.kind == OpKind::kBinary && !op.attributes.get_bool("scalar_operand", false) ? 2 : 1;
  if (operands < needed) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' needs {} operand(s), got {}", function, needed, operands));
  }
  for (const TensorDesc& t : op.inputs) require_broadcastable(t.shape, y.shape, "input '" + t.name + "'");
  for (const ParameterDesc& p : op.parameters) {
    require_broadcastable(p.shape, y.shape, "parameter '" + p.id + "'");
  }
  const auto& known = table(op.kind);
  auto it = known.find(function);
  if (it == known.end()) {
    return unmodeled(cost, fmt::format("{} function '{}' is not modeled", op_kind_name(op.kind),
                                       function.empty() ? "(none given)" : function));
  }
  const std::uint64_t n = y.elements();
  add_flops(cost, product({n, it->second.flops}));
  add_transcendentals(cost, product({n, it->second.transcendentals}));
}

}  // namespace neuralcost::cost
