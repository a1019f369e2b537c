// The op-kind table (include/neuralcost/cost/op_kinds.hpp). One row per OpKind, in enum order;
// the static_asserts below refuse to compile when a kind has no row or rows are out of order.
// Every column is required by row(), so a new column must be filled in for every kind.
#include "neuralcost/cost/op_kinds.hpp"

#include <array>

#include "cost/op_families.hpp"

namespace neuralcost {
namespace {

using U = ComputeUnit;
using V = ViewRule;
using S = Saves;
using K = OpKind;

constexpr OpKindTraits row(OpKind kind, std::string_view name, CostRule cost, ComputeUnit unit, bool fusible,
                           ViewRule view, Saves saves, GradientRule gradient) {
  return {kind, name, cost, unit, fusible, view, saves, gradient};
}
constexpr GradientRule kNoGradientRule = nullptr;

constexpr bool kFuses = true;
constexpr bool kStarts = false;

// clang-format off
constexpr std::array<OpKindTraits, kOpKindCount> kTable = {{
  //   kind                  name                 cost rule                  unit        fusion   view            saves  gradient
  row(K::kMatMul,          "matmul",            cost::cost_matmul,         U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_matmul),
  row(K::kLinear,          "linear",            cost::cost_linear,         U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_linear),
  row(K::kExpertLinear,    "expert_linear",     cost::cost_expert_linear,  U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_expert_linear),
  row(K::kConv,            "conv",              cost::cost_conv,           U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_conv),
  row(K::kConvTranspose,   "conv_transpose",    cost::cost_conv_transpose, U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_conv_transpose),
  row(K::kMaxPool,         "max_pool",          cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_pool),
  row(K::kAvgPool,         "avg_pool",          cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kNothing, cost::gradient_pool),
  row(K::kAdaptiveMaxPool, "adaptive_max_pool", cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_pool),
  row(K::kAdaptiveAvgPool, "adaptive_avg_pool", cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kNothing, cost::gradient_pool),
  row(K::kGlobalMaxPool,   "global_max_pool",   cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_pool),
  row(K::kGlobalAvgPool,   "global_avg_pool",   cost::cost_pool,           U::kVector, kStarts, V::kNever,      S::kNothing, cost::gradient_pool),
  row(K::kUnary,           "unary",             cost::cost_unary,          U::kVector, kFuses,  V::kNever,      S::kInputs, cost::gradient_unary),
  row(K::kBinary,          "binary",            cost::cost_binary,         U::kVector, kFuses,  V::kNever,      S::kInputs, cost::gradient_binary),
  row(K::kActivation,      "activation",        cost::cost_activation,     U::kVector, kFuses,  V::kNever,      S::kInputs, cost::gradient_activation),
  row(K::kSoftmax,         "softmax",           cost::cost_softmax,        U::kVector, kFuses,  V::kNever,      S::kOutputs, cost::gradient_softmax),
  row(K::kLayerNorm,       "layer_norm",        cost::cost_layer_norm,     U::kVector, kFuses,  V::kNever,      S::kInputsAndStats, cost::gradient_norm),
  row(K::kBatchNorm,       "batch_norm",        cost::cost_batch_norm,     U::kVector, kFuses,  V::kNever,      S::kInputsAndStats, cost::gradient_norm),
  row(K::kRmsNorm,         "rms_norm",          cost::cost_rms_norm,       U::kVector, kFuses,  V::kNever,      S::kInputsAndStats, cost::gradient_norm),
  row(K::kEmbedding,       "embedding",         cost::cost_embedding,      U::kVector, kStarts, V::kNever,      S::kInputs, cost::gradient_embedding),
  row(K::kAttention,       "attention",         cost::cost_attention,      U::kMatrix, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_attention),
  row(K::kRnn,             "rnn",               cost::cost_rnn,            U::kMatrix, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_recurrent),
  row(K::kGru,             "gru",               cost::cost_gru,            U::kMatrix, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_recurrent),
  row(K::kLstm,            "lstm",              cost::cost_lstm,           U::kMatrix, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_recurrent),
  row(K::kReduction,       "reduction",         cost::cost_reduction,      U::kVector, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_reduction),
  row(K::kReshape,         "reshape",           cost::cost_data_movement,  U::kVector, kStarts, V::kByDefault,  S::kNothing, cost::gradient_data_movement),
  row(K::kTranspose,       "transpose",         cost::cost_data_movement,  U::kVector, kStarts, V::kWhenMarked, S::kNothing, cost::gradient_data_movement),
  row(K::kConcat,          "concat",            cost::cost_data_movement,  U::kVector, kStarts, V::kWhenMarked, S::kNothing, cost::gradient_data_movement),
  row(K::kSlice,           "slice",             cost::cost_data_movement,  U::kVector, kStarts, V::kWhenMarked, S::kNothing, cost::gradient_data_movement),
  row(K::kSplit,           "split",             cost::cost_data_movement,  U::kVector, kStarts, V::kWhenMarked, S::kNothing, cost::gradient_data_movement),
  row(K::kPad,             "pad",               cost::cost_data_movement,  U::kVector, kStarts, V::kWhenMarked, S::kNothing, cost::gradient_data_movement),
  row(K::kEinsum,          "einsum",            cost::cost_einsum,         U::kMatrix, kStarts, V::kNever,      S::kInputs, cost::gradient_einsum),
  row(K::kFill,            "fill",              cost::cost_fill,           U::kVector, kStarts, V::kNever,      S::kNothing, kNoGradientRule),
  row(K::kGather,          "gather",            cost::cost_gather,         U::kVector, kStarts, V::kNever,      S::kInputs, cost::gradient_gather),
  row(K::kScatter,         "scatter",           cost::cost_scatter,        U::kVector, kStarts, V::kNever,      S::kInputs, cost::gradient_scatter),
  row(K::kCumulative,      "cumulative",        cost::cost_cumulative,     U::kVector, kStarts, V::kNever,      S::kInputsAndOutputs, cost::gradient_cumulative),
  row(K::kWindowReduction, "window_reduction",  cost::cost_window_reduction, U::kVector, kStarts, V::kNever,    S::kInputsAndOutputs, cost::gradient_window_reduction),
  row(K::kLoop,            "loop",              cost::cost_loop,           U::kVector, kStarts, V::kNever,      S::kUnknown, kNoGradientRule),
  row(K::kResize,          "resize",            cost::cost_resize,         U::kVector, kStarts, V::kNever,      S::kNothing, cost::gradient_resize),
  row(K::kLocalResponseNorm, "local_response_norm", cost::cost_local_response_norm, U::kVector, kStarts, V::kNever, S::kInputsAndOutputs, kNoGradientRule),
  row(K::kLoss,            "loss",              cost::cost_loss,           U::kVector, kStarts, V::kNever,      S::kInputs,  cost::gradient_loss),
  row(K::kContractionGradient, "contraction_gradient", cost::cost_gradient, U::kMatrix, kStarts, V::kNever, S::kNothing, kNoGradientRule),
  row(K::kGradient,        "gradient",          cost::cost_gradient,       U::kVector, kFuses,  V::kNever,      S::kNothing, kNoGradientRule),
  row(K::kOptimizerStep,   "optimizer_step",    cost::cost_optimizer_step, U::kVector, kStarts, V::kNever,      S::kNothing, kNoGradientRule),
  row(K::kCustom,          "custom",            cost::cost_custom,         U::kVector, kStarts, V::kNever,      S::kUnknown, cost::gradient_custom),
  row(K::kUnknown,         "unknown",           cost::cost_unknown,        U::kVector, kStarts, V::kNever,      S::kUnknown, kNoGradientRule),
}};
// clang-format on

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<std::size_t>(kTable[i].kind) != i || kTable[i].cost == nullptr || kTable[i].name.empty()) {
      return false;
    }
  }
  return true;
}
static_assert(rows_in_enum_order(), "the op-kind table needs one complete row per OpKind, in enum order");

}  // namespace

const OpKindTraits& traits_of(OpKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kTable.size() ? kTable[i] : kTable.back();  // a value outside the enum is unknown
}

std::string_view op_kind_name(OpKind kind) { return traits_of(kind).name; }

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const OpKindTraits& t : kTable) {
    if (t.name == name) return t.kind;
  }
  return std::nullopt;
}

bool is_view(const OpRecord& op) {
  switch (traits_of(op.kind).view) {
    case ViewRule::kNever: return false;
    case ViewRule::kByDefault: return !op.attributes.get_bool("materializes", false);
    case ViewRule::kWhenMarked: return !op.attributes.get_bool("materializes", true);
  }
  return false;
}

}  // namespace neuralcost
