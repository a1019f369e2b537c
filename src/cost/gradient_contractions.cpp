// Gradient rules of the contractions (docs/counting.md "Training"): each part of the gradient is
// the product autograd computes for it, counted exactly. For C = A·B the input gradient
// dA = dC·Bᵀ and the weight gradient dB = Aᵀ·dC each take the forward's multiply-accumulates; a
// bias gradient sums dC over the rows it was broadcast to; a gradient computed over broadcast
// batch dimensions is summed back to its operand's shape.
#include <cmath>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

/// Adds that sum a gradient of `full` elements back to an operand of `operand` elements.
std::uint64_t reduce_adds(std::uint64_t full, std::uint64_t operand) { return full > operand ? full - operand : 0; }

std::uint64_t elements_of(const Shape& shape) { return element_count(shape, "operand"); }

/// The operand a part differentiates: inputs first, then parameters.
std::size_t operand_index(const OpRecord& fwd, const GradientPart& part) {
  return part.of == GradientPart::Of::kInput ? part.index : fwd.inputs.size() + part.index;
}

[[noreturn]] void no_rule(const OpRecord& fwd, const std::string& what) {
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("the gradient of {} '{}' {} is not modeled", op_kind_name(fwd.kind), fwd.name, what));
}

}  // namespace

void gradient_matmul(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const OpCost forward = cost_of(fwd);
  const std::size_t i = operand_index(fwd, part);
  const std::uint64_t out = fwd.outputs.at(0).elements();
  if (i >= 2) {  // the addend C: dC summed over the dims it was broadcast to; an alias otherwise
    const std::uint64_t n = elements_of(operand_shape(fwd, i));
    add_flops(cost, reduce_adds(out, n));
    if (n == out) cost.bytes_read = cost.bytes_written = 0;
    return;
  }
  // dA = dC·Bᵀ (dB = Aᵀ·dC) over the broadcast batch: the forward's multiply-accumulates, then
  // a sum over the batch dimensions the operand was broadcast along
  add_contraction(cost, forward.contraction_flops);
  Shape a = operand_shape(fwd, 0), b = operand_shape(fwd, 1);
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  const Shape& mine = i == 0 ? a : b;
  const std::uint64_t full = product({element_count(batch, "batch"), dim(mine[mine.size() - 2]), dim(mine.back())});
  add_flops(cost, reduce_adds(full, elements_of(operand_shape(fwd, i))));
}

void gradient_linear(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const OpCost forward = cost_of(fwd);
  if (part.of == GradientPart::Of::kParameter && part.index == 1) {  // bias: dY summed over the rows
    const std::uint64_t out = fwd.outputs.at(0).elements();
    return add_flops(cost, reduce_adds(out, fwd.parameters.at(1).elements()));
  }
  if (part.of == GradientPart::Of::kInput && part.index != 0) no_rule(fwd, fmt::format("for input #{}", part.index));
  add_contraction(cost, forward.contraction_flops);  // dX = dY·W or dW = dYᵀ·X
}

namespace {

/// cost_expert_linear's load: under expert parallelism with a measured routing, the busiest
/// device's rows over an average device's (its forward's MACs over those of one row per pair); 1
/// otherwise.
double expert_load(const OpRecord& fwd, const OpCost& forward) {
  if (!fwd.attributes.has("routing_counts") || fwd.attributes.has("expert_rows") || fwd.parameters.empty()) return 1;
  if (fwd.attributes.get_int("routed_experts", fwd.parameters[0].shape[0]) <= fwd.parameters[0].shape[0]) return 1;
  const TensorDesc& x = fwd.inputs.at(0);
  const TensorDesc& y = fwd.outputs.at(0);
  const double in = static_cast<double>(x.shape.back()), out = static_cast<double>(y.shape.back());
  const double average = 2.0 * static_cast<double>(y.elements()) / out * in * out;
  return average > 0 ? static_cast<double>(forward.contraction_flops) / average : 1.0;
}

}  // namespace

void gradient_expert_linear(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const OpCost forward = cost_of(fwd);  // also checks the op's shapes and routing
  // the busiest expert-parallel device's rows: the activations' gradients it reads and writes,
  // and its sums, load times an average device's (its GEMMs are the forward's, already scaled)
  const double load = expert_load(fwd, forward);
  const auto rows_scaled = [&](std::uint64_t n) {
    return load == 1 ? n : static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * load));
  };
  cost.bytes_read = rows_scaled(cost.bytes_read - cost.parameter_bytes) + cost.parameter_bytes;
  std::uint64_t all = 0;
  for (const ParameterDesc& p : fwd.parameters) all = checked_add(all, p.bytes(), "parameter bytes");
  // the experts the rows reach: their weights are read (dX) and their gradients written (dW, db);
  // the others' are not touched (transformers' experts run only the experts hit)
  const double reached = all > 0 ? static_cast<double>(forward.parameter_bytes) / static_cast<double>(all) : 1.0;
  const auto scaled = [&](std::uint64_t bytes) {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) * reached));
  };
  if (part.of == GradientPart::Of::kParameter) {
    cost.bytes_written = scaled(cost.bytes_written);
    // the bias [E, out]: dY's rows summed per expert
    if (part.index == 1)
      return add_flops(cost, reduce_adds(rows_scaled(fwd.outputs.at(0).elements()), fwd.parameters.at(1).elements()));
    if (part.index != 0) no_rule(fwd, fmt::format("for parameter #{}", part.index));
    return add_contraction(cost, forward.contraction_flops);  // dW_e = Σ X_rowᵀ·dY_row over e's rows
  }
  if (part.index != 0) no_rule(fwd, fmt::format("for input #{}", part.index));
  add_contraction(cost, forward.contraction_flops);  // dX_row = dY_row·W_e for each (row, expert) pair
  // a token routed to top_k experts has top_k pair rows: its gradient sums them
  const TensorDesc& x = fwd.inputs.at(0);
  const TensorDesc& y = fwd.outputs.at(0);
  const std::uint64_t in = x.shape.empty() ? 1 : dim(x.shape.back());
  const std::uint64_t out = y.shape.empty() ? 1 : dim(y.shape.back());
  add_flops(cost, reduce_adds(rows_scaled(y.elements() / out * in), rows_scaled(x.elements())));
  cost.bytes_written = rows_scaled(cost.bytes_written);  // dX
  cost.bytes_read = cost.bytes_read - cost.parameter_bytes + scaled(cost.parameter_bytes);
  cost.parameter_bytes = scaled(cost.parameter_bytes);
}

namespace {

/// Convolution and transposed convolution: dX is the other convolution of dY with the same
/// filter (the forward's multiply-accumulates), dW correlates X with dY (the same count again),
/// the bias sums dY over batch and positions. The filter may be input #1 (computed), its bias #2.
void gradient_convolution(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  const OpCost forward = cost_of(fwd);
  const bool filter_is_input = fwd.parameters.empty() && fwd.inputs.size() > 1;
  const std::size_t i = operand_index(fwd, part);
  const std::size_t bias = filter_is_input ? 2 : fwd.inputs.size() + 1;
  if (i == bias) {
    return add_flops(cost, reduce_adds(fwd.outputs.at(0).elements(), elements_of(operand_shape(fwd, i))));
  }
  const std::size_t filter = filter_is_input ? 1 : fwd.inputs.size();
  if (i != 0 && i != filter) no_rule(fwd, fmt::format("for operand #{}", i));
  add_contraction(cost, forward.contraction_flops);
}

}  // namespace

void gradient_conv(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  gradient_convolution(fwd, part, cost);
}
void gradient_conv_transpose(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  gradient_convolution(fwd, part, cost);
}

void gradient_attention(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // With S = scale·Q·Kᵀ (+ mask), P = softmax(S), O = P·V (B·H heads, `pairs` kept query-key
  // pairs each): dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP - rowsum(dP∘P))·scale, dQ = dS·K,
  // dK = dSᵀ·Q. dP and dS serve both dQ and dK and are counted with the first of them asked
  // for; grouped heads (H > Hkv) sum dK and dV over each group. P is the forward's (a fused
  // kernel recomputes it; that recomputation is not counted, as the score matrix is never
  // counted as traffic).
  if (part.of != GradientPart::Of::kInput || part.index > 2) no_rule(fwd, "for its mask");
  const OpCost forward = cost_of(fwd);
  const Shape& q = fwd.inputs.at(0).shape;
  const Shape& k = fwd.inputs.at(1).shape;
  const Shape& v = fwd.inputs.at(2).shape;
  const std::uint64_t d = dim(q[3]), dv = dim(v[3]);
  if (d + dv == 0) return;
  const std::uint64_t head_pairs = forward.contraction_flops / (2 * (d + dv));  // B·H·pairs
  const std::uint64_t rows = product({dim(q[0]), dim(q[1]), dim(q[2])});
  const bool wants_q = (part.requested & 1U) != 0, wants_k = (part.requested & 2U) != 0;
  const bool first_of_qk = (part.index == 0) || (part.index == 1 && !wants_q);
  if (part.index == 2) {
    add_contraction(cost, product({2, head_pairs, dv}));  // Pᵀ·dO
  } else {
    add_contraction(cost, product({2, head_pairs, d}));  // dS·K or dSᵀ·Q
    if (first_of_qk && (wants_q || wants_k)) {
      add_contraction(cost, product({2, head_pairs, dv}));                                   // dO·Vᵀ
      add_flops(cost, product({5, head_pairs}) - std::min(product({5, head_pairs}), rows));  // softmax backward, scale
      if (fwd.attributes.get_double("dropout", 0.0) > 0) add_flops(cost, head_pairs);        // dP through the keep mask
    }
  }
  if (part.index > 0 && k[1] != 0 && q[1] > k[1]) {  // grouped heads: sum over the group
    const Shape& mine = part.index == 1 ? k : v;
    add_flops(cost, product({dim(q[1] / k[1] - 1), dim(mine[0]), dim(mine[1]), dim(mine[2]), dim(mine[3])}));
  }
}

void gradient_recurrent(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // Back-propagation through time, per layer, direction and step (cells = batch·steps):
  //   dh recurrence 2·G·H·H (steps - 1 of them without an initial state to differentiate), gate math (the forward's
  //   per-unit count), dx of the layer's input 2·G·H·I; dW_ih 2·G·H·I, dW_hh 2·G·H·H, each bias G·H adds.
  // The recurrence, the gate math and the inner layers' dx are needed by every part: they are
  // counted with the input's part when x needs a gradient, otherwise with parameter #0.
  const OpCost forward = cost_of(fwd);  // checks the record
  (void)forward;
  const Shape& x = fwd.inputs.at(0).shape;
  const bool batch_first = fwd.attributes.get_bool("batch_first", false);
  const std::uint64_t cells = product({dim(batch_first ? x[0] : x[1]), dim(batch_first ? x[1] : x[0])});
  const std::uint64_t h = dim(fwd.attributes.get_int("hidden_size"));
  const std::uint64_t layers = dim(fwd.attributes.get_int("num_layers", 1));
  const std::uint64_t dirs = fwd.attributes.get_bool("bidirectional", false) ? 2 : 1;
  const bool bias = fwd.attributes.get_bool("bias", true);
  std::uint64_t gates = 1, gate_flops = 3;
  if (fwd.kind == OpKind::kGru) gates = 3, gate_flops = 17;
  if (fwd.kind == OpKind::kLstm) gates = 4, gate_flops = 22;
  if (fwd.kind == OpKind::kRnn && fwd.attributes.get_string("nonlinearity", "tanh") == "relu") gate_flops = 1;
  const std::uint64_t gh = product({gates, h});
  const auto width = [&](std::uint64_t layer) { return layer == 0 ? dim(x[2]) : product({dirs, h}); };
  const bool input_asked = (part.requested & 1U) != 0;
  const bool core_here = part.of == GradientPart::Of::kInput ? part.index == 0 : (!input_asked && part.index == 0);
  if (part.of == GradientPart::Of::kInput) {
    if (part.index != 0) no_rule(fwd, fmt::format("for input #{} (initial state)", part.index));
    add_contraction(cost, product({dirs, cells, 2, gh, width(0)}));
  }
  if (core_here) {
    // dh flows back through steps - 1 products per sequence: the first step's W_hh·h0 passes a
    // gradient on only when the initial state (input #1) needs one
    const std::uint64_t steps = dim(batch_first ? x[1] : x[0]);
    const std::uint64_t sequences = dim(batch_first ? x[0] : x[1]);
    const bool state_asked = (part.requested & 2U) != 0 && fwd.inputs.size() > 1;
    const std::uint64_t back_steps = state_asked || steps == 0 ? cells : cells - sequences;
    for (std::uint64_t l = 0; l < layers; ++l) {
      add_contraction(cost, product({dirs, back_steps, 2, gh, h}));
      add_flops(cost, product({dirs, cells, gate_flops, h}));
      if (l > 0) add_contraction(cost, product({dirs, cells, 2, gh, width(l)}));
    }
  }
  if (part.of == GradientPart::Of::kParameter) {
    const std::uint64_t per_direction = bias ? 4 : 2;
    const std::uint64_t layer = part.index / (per_direction * dirs), which = part.index % per_direction;
    if (layer >= layers) no_rule(fwd, fmt::format("for parameter #{}", part.index));
    if (which == 0) add_contraction(cost, product({cells, 2, gh, width(layer)}));
    if (which == 1) add_contraction(cost, product({cells, 2, gh, h}));
    if (which >= 2) add_flops(cost, product({cells, gh}) - gh);
  }
}

void gradient_einsum(const OpRecord& fwd, const GradientPart& part, OpCost& cost) {
  // two operands: the gradient of one is the einsum of the other with dOut, which takes the
  // forward's multiply-accumulates when every subscript of the operand also appears in the other
  // operand or the output (otherwise the gradient is partly a broadcast: not modeled)
  const OpCost forward = cost_of(fwd);
  const std::string equation = fwd.attributes.get_string("equation", "");
  const auto arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  const std::string out = arrow == std::string::npos ? "" : equation.substr(arrow + 2);
  const auto comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos || arrow == std::string::npos) {
    no_rule(fwd, "(an equation other than two operands with an explicit output)");
  }
  const std::size_t i = operand_index(fwd, part);
  const std::string mine = i == 0 ? lhs.substr(0, comma) : lhs.substr(comma + 1);
  const std::string other = i == 0 ? lhs.substr(comma + 1) : lhs.substr(0, comma);
  for (char c : mine) {
    if (c != '.' && c != ' ' && other.find(c) == std::string::npos && out.find(c) == std::string::npos) {
      no_rule(fwd, fmt::format("(subscript '{}' appears only in operand #{})", c, i));
    }
  }
  add_contraction(cost, forward.contraction_flops);
}

}  // namespace neuralcost::cost
