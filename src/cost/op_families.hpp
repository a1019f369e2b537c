// Internal to the cost model: the cost rules (one file per op family; the op-kind table in
// op_kinds.cpp names the rule of each kind), the shared
// FLOP tally and checked accessors for an op's tensors. cost_of() in cost_model.cpp fills in
// the default compulsory bytes, then calls the family function, which adds FLOPs and may
// replace the bytes (views move nothing, an embedding reads only the rows it gathers).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::cost {

/// Checked product of counts, e.g. product({2, m, n, k}).
std::uint64_t product(std::initializer_list<std::uint64_t> factors);
/// A dimension as an unsigned count (dimensions are checked non-negative by the graph).
std::uint64_t dim(std::int64_t d);

/// FLOPs (and transcendentals among them) per element, and a table of them by function name:
/// the elementwise rules and their gradients.
struct PerElement {
  std::uint64_t flops;
  std::uint64_t transcendentals;
};
using PerElementTable = std::map<std::string, PerElement>;

/// Adds counts to an OpCost with overflow checks.
void add_flops(OpCost& cost, std::uint64_t flops);
void add_contraction(OpCost& cost, std::uint64_t flops);
void add_transcendentals(OpCost& cost, std::uint64_t count);

/// inputs[i], or kInvalidArgument "needs an input #i (role)".
const TensorDesc& input(const OpRecord& op, std::size_t i, const char* role);
const TensorDesc& output(const OpRecord& op, std::size_t i, const char* role);
const ParameterDesc& parameter(const OpRecord& op, std::size_t i, const char* role);
/// Operand i of an op whose operands are its inputs then its parameters (a matmul's weight may
/// be either); kInvalidArgument when there is none.
Shape operand_shape(const OpRecord& op, std::size_t i);
/// Numpy broadcasting of two shapes; kInvalidArgument when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Throws kInvalidArgument unless min_rank <= rank <= max_rank.
void require_rank(const Shape& shape, std::size_t min_rank, std::size_t max_rank, const std::string& what);

/// A geometric attribute value (stride, dilation, kernel, padding, groups) within
/// [low, 2^40]: large enough for any real network, small enough that no formula overflows.
std::int64_t bounded(std::int64_t value, std::int64_t low, const std::string& what);

/// Padding summed over both sides per spatial dim, from attribute `padding`: one value per
/// dim (applied to both sides) or begins then ends (ONNX "pads"). Negative padding throws.
std::vector<std::int64_t> total_padding(const OpRecord& op, std::size_t rank);
/// Marks the op unmodeled with a reason (bytes stay counted).
void unmodeled(OpCost& cost, std::string reason);

void cost_matmul(const OpRecord& op, OpCost& cost);
void cost_linear(const OpRecord& op, OpCost& cost);
void cost_expert_linear(const OpRecord& op, OpCost& cost);
void cost_conv(const OpRecord& op, OpCost& cost);
void cost_conv_transpose(const OpRecord& op, OpCost& cost);
void cost_attention(const OpRecord& op, OpCost& cost);
void cost_unary(const OpRecord& op, OpCost& cost);
void cost_binary(const OpRecord& op, OpCost& cost);
void cost_activation(const OpRecord& op, OpCost& cost);
void cost_softmax(const OpRecord& op, OpCost& cost);
void cost_layer_norm(const OpRecord& op, OpCost& cost);
void cost_rms_norm(const OpRecord& op, OpCost& cost);
void cost_batch_norm(const OpRecord& op, OpCost& cost);
void cost_pool(const OpRecord& op, OpCost& cost);
void cost_reduction(const OpRecord& op, OpCost& cost);
void cost_rnn(const OpRecord& op, OpCost& cost);
void cost_gru(const OpRecord& op, OpCost& cost);
void cost_lstm(const OpRecord& op, OpCost& cost);
void cost_data_movement(const OpRecord& op, OpCost& cost);
void cost_embedding(const OpRecord& op, OpCost& cost);
void cost_einsum(const OpRecord& op, OpCost& cost);
void cost_fill(const OpRecord& op, OpCost& cost);
void cost_gather(const OpRecord& op, OpCost& cost);
void cost_scatter(const OpRecord& op, OpCost& cost);
void cost_cumulative(const OpRecord& op, OpCost& cost);
void cost_window_reduction(const OpRecord& op, OpCost& cost);
void cost_loop(const OpRecord& op, OpCost& cost);
void cost_resize(const OpRecord& op, OpCost& cost);
void cost_local_response_norm(const OpRecord& op, OpCost& cost);
void cost_custom(const OpRecord& op, OpCost& cost);
void cost_loss(const OpRecord& op, OpCost& cost);
void cost_gradient(const OpRecord& op, OpCost& cost);
void cost_optimizer_step(const OpRecord& op, OpCost& cost);

// Gradient rules (gradient_costs.cpp, gradient_contractions.cpp): one part of a forward op's
// gradient (op_kinds.hpp GradientRule).
void gradient_matmul(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_linear(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_expert_linear(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_conv(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_conv_transpose(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_attention(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_recurrent(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_einsum(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_pool(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_unary(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_binary(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_activation(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_softmax(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_norm(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_embedding(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_reduction(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_data_movement(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_gather(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_scatter(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_custom(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_cumulative(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_window_reduction(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_resize(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void gradient_loss(const OpRecord& fwd, const GradientPart& part, OpCost& cost);
void cost_unknown(const OpRecord& op, OpCost& cost);

}  // namespace neuralcost::cost
