// What the analysis knows about each op kind, in one table (src/cost/op_kinds.cpp): its name,
// the cost rule that counts it, the compute unit it runs on, whether it fuses into the kernel
// before it, whether it can be a view, and what it keeps for its backward pass. Every fact about
// a kind is read from here; adding a kind means adding an enumerator to OpKind, a row to the
// table and its cost rule, and the table does not compile until the row is there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "neuralcost/core/op.hpp"

namespace neuralcost {

struct OpCost;

/// Number of op kinds (kUnknown is the last enumerator).
inline constexpr std::size_t kOpKindCount = static_cast<std::size_t>(OpKind::kUnknown) + 1;

/// The peak an op's FLOPs are timed at: the matrix units (tensor cores, AMX; TF32 and FP8 only
/// exist there) or the vector units.
enum class ComputeUnit { kVector, kMatrix };

/// Whether an op can be an alias of its input, moving no bytes.
enum class ViewRule {
  kNever,       ///< always computes or copies
  kByDefault,   ///< a view unless attribute materializes = true (reshape)
  kWhenMarked,  ///< a copy unless attribute materializes = false (transpose, slice, ...)
};

/// What the op keeps from its forward pass for its backward pass (as autograd frameworks do),
/// beyond its parameters, which stay resident anyway. The training transform reads it for the
/// activation-memory bounds; where it depends on the function (relu keeps its output, gelu its
/// input), the row gives the larger choice and the backward rule refines it.
enum class Saves {
  kNothing,           ///< shapes only (views, copies, additions)
  kInputs,            ///< the activation inputs (matmul, convolution, elementwise)
  kOutputs,           ///< the outputs (softmax)
  kInputsAndOutputs,  ///< both (max pooling's input and argmax, attention's q/k/v and output)
  kInputsAndStats,    ///< inputs and per-row statistics (normalisations: mean, 1/std)
  kUnknown,           ///< not known (custom, unmodeled): the ledger says so
};

using CostRule = void (*)(const OpRecord& op, OpCost& cost);

/// Which part of an op's gradient a gradient record computes: the gradient of activation input
/// `index` or of parameter `index` (docs/counting.md "Training").
struct GradientPart {
  enum class Of { kInput, kParameter } of = Of::kInput;
  std::size_t index = 0;
  /// Bit i set: the gradient of input i is asked for too (work shared by several parts, such as
  /// attention's dP, is counted once, with the first part asked for).
  std::uint64_t requested = ~std::uint64_t{0};
};
/// Counts one part of the gradient of `forward` (its FLOPs; bytes when they differ from reading
/// the record's inputs and writing its output: an alias moves none). Throws kUnimplemented when
/// the part has no rule (a function without a derivative rule): the step lists it as unmodeled.
using GradientRule = void (*)(const OpRecord& forward, const GradientPart& part, OpCost& cost);

struct OpKindTraits {
  OpKind kind;
  std::string_view name;  ///< as printed and parsed ("matmul", "layer_norm", ...)
  CostRule cost;          ///< the rule in src/cost/ that counts FLOPs and may adjust bytes
  ComputeUnit unit;
  /// Joins the fused kernel of the op before it (elementwise and normalisation chains,
  /// docs/counting.md "Fused lower bound"); other ops start a kernel of their own.
  bool fusible;
  ViewRule view;
  Saves saves;
  /// The rule in src/cost/gradient_costs.cpp counting each part of the kind's gradient; nullptr
  /// when the kind has no backward rule (its gradient is unmodeled, never zero).
  GradientRule gradient;
};

/// The row of `kind`.
const OpKindTraits& traits_of(OpKind kind);
std::string_view op_kind_name(OpKind kind);
std::optional<OpKind> parse_op_kind(std::string_view name);
/// True when the op is an alias of its input (by its kind's view rule and its attributes).
bool is_view(const OpRecord& op);

}  // namespace neuralcost
