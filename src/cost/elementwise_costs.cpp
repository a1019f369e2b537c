// Elementwise unary, binary and activation ops: a fixed FLOP count per output element from
// the table below (docs/counting.md lists it); transcendental evaluations count 1 FLOP each
// and are also reported separately. Inputs must broadcast to the output (numpy rules).
// A variadic op (attribute variadic: Sum, Max, AddN over k operands) applies its function
// k - 1 times per element; mean adds its divide; integer_pow (attribute exponent) multiplies by
// repeated squaring.
#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

using Table = PerElementTable;

// The per-element counts of docs/counting.md; keep the two in step. quantize_per_token is W8A8's
// dynamic activation quantization: an absolute value and a max a value find the token's scale,
// then quantize's divide, round, clamp and conversion.
// clang-format off
const Table kUnary = {
    {"identity", {0, 0}}, {"copy", {0, 0}},  {"neg", {1, 0}},      {"abs", {1, 0}},        {"sign", {1, 0}},
    {"floor", {1, 0}},    {"ceil", {1, 0}},  {"round", {1, 0}},    {"square", {1, 0}},     {"reciprocal", {1, 0}},
    {"not", {1, 0}},      {"clip", {2, 0}},  {"exp", {1, 1}},      {"log", {1, 1}},        {"sqrt", {1, 1}},
    {"rsqrt", {1, 1}},    {"sin", {1, 1}},   {"cos", {1, 1}},      {"tan", {1, 1}},        {"erf", {1, 1}},
    {"tanh", {1, 1}},     {"cast", {0, 0}},  {"asin", {1, 1}},     {"acos", {1, 1}},       {"atan", {1, 1}},
    {"sinh", {1, 1}},     {"cosh", {1, 1}},  {"asinh", {1, 1}},    {"acosh", {1, 1}},      {"atanh", {1, 1}},
    {"isinf", {1, 0}},    {"isnan", {1, 0}}, {"quantize", {4, 0}}, {"dequantize", {2, 0}}, {"log1p", {2, 1}},
    {"expm1", {2, 1}},    {"quantize_per_token", {6, 0}},
};
// clang-format on
const Table kBinary = {
    {"add", {1, 0}},
    {"sub", {1, 0}},
    {"mul", {1, 0}},
    {"div", {1, 0}},
    {"max", {1, 0}},
    {"min", {1, 0}},
    {"mod", {1, 0}},
    {"pow", {1, 1}},
    {"equal", {1, 0}},
    {"less", {1, 0}},
    {"greater", {1, 0}},
    {"and", {1, 0}},
    {"or", {1, 0}},
    {"xor", {1, 0}},
    {"where", {1, 0}},
    {"bitshift", {1, 0}},
    {"squared_difference", {2, 0}},
    // complex numbers held as (real, imaginary) pairs in a last dim of 2, counted per real element:
    // a complex product 6 FLOPs a pair (4 multiplies, 2 adds); torch.polar(abs, angle) abs·cos and
    // abs·sin, a transcendental and a multiply each
    {"complex_mul", {3, 0}},
    {"polar", {2, 1}},
    {"mean", {1, 0}},
};
const Table kActivation = {
    {"relu", {1, 0}},
    {"relu6", {2, 0}},
    {"leaky_relu", {2, 0}},
    {"prelu", {2, 0}},
    {"hardtanh", {2, 0}},
    {"elu", {4, 1}},
    {"selu", {5, 1}},
    {"celu", {5, 1}},
    {"sigmoid", {4, 1}},
    {"tanh", {1, 1}},
    {"silu", {5, 1}},
    {"gelu", {5, 1}},
    {"gelu_tanh", {9, 1}},
    {"softplus", {3, 2}},
    {"mish", {5, 3}},
    {"hardsigmoid", {4, 0}},
    {"hardswish", {5, 0}},
    {"softsign", {3, 0}},
    {"thresholded_relu", {1, 0}},
    {"shrink", {2, 0}},
};

void require_broadcastable(const Shape& in, const Shape& out, const std::string& what) {
  bool ok = in.size() <= out.size();
  for (std::size_t i = 0; ok && i < in.size(); ++i) {
    const std::int64_t d = in[in.size() - 1 - i];
    ok = d == 1 || d == out[out.size() - 1 - i];
  }
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {} does not broadcast to the output {}", what, shape_string(in), shape_string(out)));
  }
}

/// x ** y for an integer y by repeated squaring: bit_length(|y|) - 1 squarings and
/// popcount(|y|) - 1 products, and a reciprocal when y < 0.
std::uint64_t integer_pow_flops(std::int64_t y) {
  const std::uint64_t e = y < 0 ? 0 - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y);
  if (e == 0) return 0;
  return static_cast<std::uint64_t>(63 - __builtin_clzll(e) + __builtin_popcountll(e) - 1 + (y < 0 ? 1 : 0));
}

void cost_elementwise(const OpRecord& op, OpCost& cost, const Table& known, std::size_t arity) {
  const std::string function = op.attributes.get_string("function", "");
  const TensorDesc& y = output(op, 0, "y");
  const std::size_t operands = op.inputs.size() + op.parameters.size();
  // a binary op with a scalar (x * 0.5) has one tensor operand, attribute scalar_operand; an op
  // on literals only (a constant computed in the program) has none and says literal_operands
  const bool literals = op.attributes.get_bool("literal_operands", false);
  const std::size_t needed = literals ? 0 : arity == 2 && !op.attributes.get_bool("scalar_operand", false) ? 2 : 1;
  if (operands < needed) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' needs {} operand(s), got {}", function, needed, operands));
  }
  for (const TensorDesc& t : op.inputs) require_broadcastable(t.shape, y.shape, "input '" + t.name + "'");
  for (const ParameterDesc& p : op.parameters) {
    require_broadcastable(p.shape, y.shape, "parameter '" + p.id + "'");
  }
  const std::uint64_t n = y.elements();
  if (function == "integer_pow")
    return add_flops(cost, product({n, integer_pow_flops(op.attributes.get_int("exponent"))}));
  auto it = known.find(function);
  if (it == known.end()) {
    return unmodeled(cost, fmt::format("{} function '{}' is not modeled", op_kind_name(op.kind),
                                       function.empty() ? "(none given)" : function));
  }
  // variadic (Sum, Max, Mean of k operands, AddN): the function applied k - 1 times per element,
  // and Mean's divide
  std::uint64_t applications = 1;
  if (op.attributes.get_bool("variadic", false) && operands > 2) applications = operands - 1;
  if (function == "mean") applications = std::max<std::uint64_t>(operands, 2);
  add_flops(cost, product({n, applications, it->second.flops}));
  add_transcendentals(cost, product({n, applications, it->second.transcendentals}));
}

}  // namespace

void cost_unary(const OpRecord& op, OpCost& cost) { cost_elementwise(op, cost, kUnary, 1); }
void cost_binary(const OpRecord& op, OpCost& cost) { cost_elementwise(op, cost, kBinary, 2); }
void cost_activation(const OpRecord& op, OpCost& cost) { cost_elementwise(op, cost, kActivation, 1); }

}  // namespace neuralcost::cost
