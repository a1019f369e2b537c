// Gradient rules of the ops that are not contractions, the gradient records' cost rule, the loss
// and the optimizer step (docs/counting.md "Training"). A gradient record reads the gradient of
// the op's outputs and what the op saved, and writes one gradient; its FLOPs come from the rule
// of the forward op's kind (op_kinds.cpp), given the forward record it `differentiates`. FLOPs
// per element of the derivatives are listed in docs/counting.md; keep the two in step.
#include <map>
#include <string>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/graph.hpp"

namespace neuralcost::cost {
namespace {

using Table = PerElementTable;

// dx = dy · f'(x), with what the forward saved (its input or output)
const Table kUnaryGradient = {
    {"identity", {0, 0}},   {"copy", {0, 0}},  {"cast", {0, 0}},  {"neg", {1, 0}},   {"abs", {2, 0}},
    {"sign", {0, 0}},       {"floor", {0, 0}}, {"ceil", {0, 0}},  {"round", {0, 0}}, {"square", {2, 0}},
    {"reciprocal", {3, 0}}, {"clip", {2, 0}},  {"exp", {1, 0}},   {"log", {1, 0}},   {"sqrt", {2, 0}},
    {"rsqrt", {3, 0}},      {"sin", {2, 1}},   {"cos", {2, 1}},   {"tan", {3, 0}},   {"erf", {4, 1}},
    {"tanh", {3, 0}},       {"log1p", {2, 0}}, {"expm1", {2, 0}}, {"sinh", {2, 1}},  {"cosh", {2, 1}},
};
const Table kActivationGradient = {
    {"relu", {1, 0}},       {"relu6", {2, 0}},    {"leaky_relu", {2, 0}},
    {"prelu", {2, 0}},      {"hardtanh", {2, 0}}, {"elu", {3, 0}},
    {"selu", {3, 0}},       {"celu", {3, 0}},     {"sigmoid", {3, 0}},
    {"tanh", {3, 0}},       {"silu", {8, 1}},     {"gelu", {10, 2}},
    {"gelu_tanh", {15, 1}}, {"softplus", {4, 1}}, {"hardsigmoid", {2, 0}},
    {"hardswish", {4, 0}},  {"softsign", {4, 0}}, {"thresholded_relu", {1, 0}},
    {"shrink", {1, 0}},
};
// per operand: {FLOPs per output element for operand 0, for operand 1}
const std::map<std::string, std::pair<PerElement, PerElement>> kBinaryGradient = {
    {"add", {{0, 0}, {0, 0}}},  {"sub", {{0, 0}, {1, 0}}},
    {"mul", {{1, 0}, {1, 0}}},  {"div", {{1, 0}, {3, 0}}},
    {"max", {{2, 0}, {2, 0}}},  {"min", {{2, 0}, {2, 0}}},
    {"pow", {{4, 1}, {3, 1}}},  {"squared_difference", {{3, 0}, {3, 0}}},
    {"mean", {{1, 0}, {1, 0}}}, {"where", {{0, 0}, {1, 0}}},
};

[[noreturn]] void no_rule(const OpRecord& fwd, const std::string& what) {
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("the gradient of {} '{}' {} is not modeled", op_kind_name(fwd.kind), fwd.name, what));
}

std::uint64_t part_elements(const OpRecord& fwd, const GradientPart& part) {
  return part.of == GradientPart::Of::kInput ? fwd.inputs.at(part.index).elements()
                                             : fwd.parameters.at(part.index).elements();
}

void per_element(OpCost& cost, std::uint64_t n, const PerElement& e) {
  add_flops(cost, product({n, e.flops}));
  add_transcendentals(cost, product({n, e.transcendentals}));
}

/// An identity gradient (the output gradient is the input's): an alias, nothing moves.
void alias(OpCost& cost) { cost.bytes_read = cost.bytes_written = cost.parameter_bytes = 0; }

const PerElement& lookup(const Table& table, const OpRecord& fwd) {
  const std::string function = fwd.attributes.get_string("function", "");
  const auto it = table.find(function);
  if (it == table.end()) no_rule(fwd, fmt::format("(function '{}')", function));
  return it->second;
}

}  // namespace

void gradient_unary(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const PerElement& e = lookup(kUnaryGradient, fwd);
  const std::string function = fwd.attributes.get_string("function", "");
  if (function == "identity" || function == "copy") return alias(cost);
  per_element(cost, fwd.outputs.at(0).elements(), e);
  (void)part;
}

void gradient_activation(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const PerElement& e = lookup(kActivationGradient, fwd);
  const std::uint64_t n = fwd.outputs.at(0).elements();
  per_element(cost, n, e);
  // a learned slope (prelu's parameter) sums its gradient over the elements it was broadcast to
  if (part.of == GradientPart::Of::kParameter || part.index > 0)
    add_flops(cost, n - std::min(n, part_elements(fwd, part)));
}

void gradient_binary(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const std::string function = fwd.attributes.get_string("function", "");
  const auto it = kBinaryGradient.find(function);
  if (it == kBinaryGradient.end()) no_rule(fwd, fmt::format("(function '{}')", function));
  const std::size_t operand = part.of == GradientPart::Of::kInput ? part.index : fwd.inputs.size() + part.index;
  const std::uint64_t n = fwd.outputs.at(0).elements(), mine = part_elements(fwd, part);
  // variadic sums and means apply the operand-0 rule to every operand; `where` takes no
  // gradient for its condition (operand 0) and selects for the two others
  const bool first = operand == 0 || (fwd.attributes.get_bool("variadic", false) && function != "where");
  const PerElement& e = first ? it->second.first : it->second.second;
  per_element(cost, n, e);
  add_flops(cost, n - std::min(n, mine));  // summed back over broadcast dims
  if (e.flops == 0 && mine == n) alias(cost);
}

void gradient_softmax(const OpRecord& fwd, const GradientPart&, OpCost& cost) {
  // softmax: dx = y∘(dy - rowsum(dy∘y)); log-softmax: dx = dy - exp(y)·rowsum(dy). Both 4n - 1
  // per row of n (the log form's n exps are transcendentals).
  const OpCost forward = cost_of(fwd);
  const std::uint64_t n = fwd.inputs.at(0).elements();
  const bool log = fwd.attributes.get_bool("log", false);
  // the forward counted rows·(5n - 2) (+ rows for log): recover the rows from it
  const std::uint64_t five_n = product({5, n});
  const std::uint64_t rows = log ? five_n - forward.flops : (five_n - forward.flops) / 2;
  add_flops(cost, product({4, n}) - std::min(product({4, n}), rows));
  if (log) add_transcendentals(cost, n);
}

void gradient_norm(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // x̂ = (x - mean)·rstd is recomputed from the saved statistics (2 per element; RMS: 1).
  // dx = rstd·(g - mean(g) - x̂·mean(g∘x̂)) with g = dy∘γ: layer/batch norm 10 per element, RMS
  // norm 7. dγ = Σ dy∘x̂: 4 per element (RMS 3); dβ = Σ dy: 1 per element; each minus the
  // parameter's own elements (the first term of each sum is not an add).
  const OpCost forward = cost_of(fwd);  // checks the record
  (void)forward;
  const bool rms = fwd.kind == OpKind::kRmsNorm;
  const std::uint64_t n = fwd.inputs.at(0).elements();
  if (part.of == GradientPart::Of::kInput) {
    if (part.index != 0) no_rule(fwd, fmt::format("for input #{}", part.index));
    return add_flops(cost, product({n, rms ? 7U : 10U}));
  }
  // the trainable parameters in order: scale, then shift (running statistics take no gradient)
  std::size_t rank = 0;
  for (std::size_t p = 0; p < part.index && p < fwd.parameters.size(); ++p) rank += fwd.parameters[p].trainable ? 1 : 0;
  const std::uint64_t mine = fwd.parameters.at(part.index).elements();
  const std::uint64_t per = rank == 0 ? (rms ? 3 : 4) : 1;
  add_flops(cost, product({n, per}) - std::min(product({n, per}), mine));
}

void gradient_pool(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // max: each output's gradient is added where its maximum was (1 add per output); average:
  // divided by the window (1 per output) and spread over it (1 add per window element); global
  // average: dy/n broadcast (1 per input element)
  if (part.of != GradientPart::Of::kInput || part.index != 0) no_rule(fwd, "for a second operand");
  const OpCost forward = cost_of(fwd);
  const std::uint64_t outputs = fwd.outputs.at(0).elements();
  switch (fwd.kind) {
    case OpKind::kMaxPool:
    case OpKind::kAdaptiveMaxPool:
    case OpKind::kGlobalMaxPool: return add_flops(cost, outputs);
    case OpKind::kGlobalAvgPool: return add_flops(cost, forward.flops);
    default: return add_flops(cost, checked_add(forward.flops, outputs, "FLOP count"));
  }
}

void gradient_embedding(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // the table's gradient: each looked-up row of dy added into a dense gradient (scatter-add);
  // a gather from an activation (no table) does the same into its data's gradient
  const bool table = !fwd.parameters.empty();
  if ((table && part.of != GradientPart::Of::kParameter) || (!table && part.index != 0)) {
    no_rule(fwd, "for its indices");
  }
  add_flops(cost, fwd.outputs.at(0).elements());
}

void gradient_reduction(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // dx from dy broadcast over the reduced dims: sum copies it, mean divides (1 per element),
  // max/min and prod route or scale it (2 per element), sum of squares 2, L1 2, L2 2,
  // log-sum-exp exp(x - y)·dy (3 and an exp)
  (void)part;
  const std::uint64_t n = fwd.inputs.empty() ? fwd.parameters.at(0).elements() : fwd.inputs.at(0).elements();
  const std::string function = fwd.attributes.get_string("function", "sum");
  static const Table kReductionGradient = {
      {"sum", {0, 0}},        {"mean", {1, 0}}, {"max", {2, 0}}, {"min", {2, 0}},         {"prod", {2, 0}},
      {"sum_square", {2, 0}}, {"l1", {2, 0}},   {"l2", {2, 0}},  {"log_sum_exp", {3, 1}}, {"log_sum", {1, 0}},
  };
  const auto it = kReductionGradient.find(function);
  if (it == kReductionGradient.end()) no_rule(fwd, fmt::format("(function '{}')", function));
  per_element(cost, n, it->second);
}

void gradient_data_movement(const OpRecord& fwd, const GradientPart&, OpCost& cost) {
  // the inverse movement: a reshape or view is undone by a view; a copy (transpose, split's
  // concatenation, slice's zero-padded placement) moves the gradient once; concat's pieces and
  // pad's interior are views of dy
  if (is_view(fwd) || fwd.kind == OpKind::kConcat || fwd.kind == OpKind::kPad) alias(cost);
}

void gradient_gather(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  if (part.of != GradientPart::Of::kInput || part.index != 0) no_rule(fwd, "for its indices");
  add_flops(cost, fwd.outputs.at(0).elements());  // scatter-add of dy into the data's gradient
}

void gradient_scatter(const OpRecord& fwd, const GradientPart& part, OpCost&) {
  // data: dy with the written positions zeroed; updates: dy gathered at them. No arithmetic,
  // except for reductions other than a plain write or add
  const std::string reduction = fwd.attributes.get_string("reduction", "none");
  if (reduction != "none" && reduction != "add") no_rule(fwd, fmt::format("(reduction '{}')", reduction));
  if (part.of == GradientPart::Of::kInput && part.index != 0 && part.index + 1 != fwd.inputs.size()) {
    no_rule(fwd, "for its indices");
  }
}

void gradient_custom(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // top-k: dy written at the picked indices of a zero gradient (torch's
  // value_selecting_reduction_backward): no arithmetic, the indices read; no other custom op has one
  if (fwd.attributes.get_string("function", "") != "topk")
    no_rule(fwd, "(a custom op other than topk has no backward rule)");
  if (part.of != GradientPart::Of::kInput || part.index != 0) no_rule(fwd, fmt::format("for operand #{}", part.index));
  cost.bytes_read =
      checked_add(cost.bytes_read, checked_mul(fwd.outputs.at(0).elements(), 8, "index bytes"), "bytes read");
}

void gradient_cumulative(const OpRecord& fwd, const GradientPart&, OpCost& cost) {
  // a running sum's gradient is the running sum of dy in reverse: the forward's count
  if (fwd.attributes.get_string("function", "sum") != "sum") no_rule(fwd, "(running product)");
  add_flops(cost, cost_of(fwd).flops);
}

void gradient_window_reduction(const OpRecord& fwd, const GradientPart&, OpCost& cost) {
  // max/min: routed (1 add per output); sum: spread over each window (window elements per output)
  const std::string function = fwd.attributes.get_string("function", "max");
  const std::uint64_t outputs = fwd.outputs.at(0).elements();
  if (function == "max" || function == "min") return add_flops(cost, outputs);
  if (function != "sum") no_rule(fwd, fmt::format("(function '{}')", function));
  add_flops(cost, checked_add(cost_of(fwd).flops, outputs, "FLOP count"));
}

void gradient_resize(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // interpolation is linear in x: its gradient applies the transposed weights, as many FLOPs
  if (part.of != GradientPart::Of::kInput || part.index != 0) no_rule(fwd, "for its scales");
  add_flops(cost, cost_of(fwd).flops);
}

void gradient_loss(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // cross entropy of rows of C logits, mean over rows: dlogits = (softmax - onehot)/rows, from
  // the saved log-probabilities: exp, a row sum, a multiply and a subtract (4C - 1 per row, C
  // exps) plus the -1/rows placed at each label. MSE: 2(y - t)/n, 2 per element.
  if (part.of != GradientPart::Of::kInput || part.index != 0) no_rule(fwd, "for its labels or target");
  const std::uint64_t n = fwd.inputs.at(0).elements();
  if (fwd.attributes.get_string("function", "") == "cross_entropy") {
    add_flops(cost, product({4, n}));
    return add_transcendentals(cost, n);
  }
  add_flops(cost, product({2, n}));
}

void cost_loss(const OpRecord& op, OpCost& cost) {
  // cross entropy: log-softmax over each row of C classes (max, subtract, exp, sum, log,
  // subtract: 5C - 1), the label's term picked, the mean over rows (rows adds/divide): 5C per
  // row + 1; C + 1 transcendentals per row. MSE: subtract, square, sum, divide: 3n.
  const std::string function = op.attributes.get_string("function", "");
  const TensorDesc& y = input(op, 0, "predictions");
  const std::uint64_t n = y.elements();
  if (function == "cross_entropy") {
    require_rank(y.shape, 1, 64, "logits");
    const std::uint64_t classes = dim(y.shape.back());
    const std::uint64_t rows = classes == 0 ? 0 : n / classes;
    const TensorDesc& labels = input(op, 1, "labels");
    if (labels.elements() != rows) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("labels '{}' hold {} values for {} rows of logits",
                                                           labels.name, labels.elements(), rows));
    }
    add_flops(cost, checked_add(product({5, n}), 1, "FLOP count"));
    add_transcendentals(cost, checked_add(n, rows, "transcendental count"));
  } else if (function == "mse") {
    const TensorDesc& target = input(op, 1, "target");
    if (target.elements() != n) throw Error(ErrorCode::kInvalidArgument, "the target must match the predictions");
    add_flops(cost, product({3, n}));
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'function' must be cross_entropy or mse, got '{}'", function));
  }
}

void cost_optimizer_step(const OpRecord& op, OpCost& cost) {
  // per parameter element: SGD p -= lr·g (2); momentum b = μb + g, p -= lr·b (4); Adam: m and v
  // updated (3 + 4), bias-corrected step p -= lr·m̂/(√v̂ + ε) (6, 1 square root) = 13; AdamW adds
  // the decoupled decay p -= lr·λ·p (2) = 15. Mixed precision copies the fp32 master weight to
  // the low-precision one (a cast: 0); fp16 with loss scaling first unscales the gradient and
  // checks it is finite (2).
  static const Table kSteps = {{"sgd", {2, 0}}, {"momentum", {4, 0}}, {"adam", {13, 1}}, {"adamw", {15, 1}}};
  const std::string function = op.attributes.get_string("function", "");
  const auto it = kSteps.find(function);
  if (it == kSteps.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'function' must be sgd, momentum, adam or adamw, got '{}'", function));
  }
  const std::uint64_t n = parameter(op, 0, "the parameter").elements();
  per_element(cost, n, it->second);
  if (op.attributes.get_string("precision", "fp32") == "fp16-mixed") add_flops(cost, product({2, n}));
}

void cost_gradient(const OpRecord& op, OpCost& cost) {
  if (op.differentiates == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "a gradient record needs the forward op it differentiates");
  }
  const OpRecord& fwd = *op.differentiates;
  const GradientRule rule = traits_of(fwd.kind).gradient;
  if (rule == nullptr) {
    return unmodeled(cost, fmt::format("{} '{}' has no backward rule", op_kind_name(fwd.kind), fwd.name));
  }
  GradientPart part;
  part.of = op.attributes.get_string("part", "input") == "parameter" ? GradientPart::Of::kParameter
                                                                     : GradientPart::Of::kInput;
  const std::int64_t index = op.attributes.get_int("index", 0);
  const std::size_t count = part.of == GradientPart::Of::kInput ? fwd.inputs.size() : fwd.parameters.size();
  if (index < 0 || static_cast<std::uint64_t>(index) >= count) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'index' {} is not an operand of '{}'", index, fwd.name));
  }
  part.index = static_cast<std::size_t>(index);
  part.requested = static_cast<std::uint64_t>(op.attributes.get_int("requested", -1));
  try {
    rule(fwd, part, cost);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kUnimplemented) throw;
    unmodeled(cost, e.what());
  }
}

}  // namespace neuralcost::cost
