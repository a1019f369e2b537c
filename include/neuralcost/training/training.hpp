// Training steps: what one step of training (forward, loss gradient, backward, optimizer) asks of
// the machine. The training transform turns a forward op graph into a step graph whose records are
// tagged with their pass (attribute "pass": forward, recompute, input_gradient, weight_gradient,
// optimizer) and feeds it to the same analyze(): rooflines, fusion and views work on steps without
// a second code path. Backward rules are per op kind (src/cost/backward_*.cpp, docs/counting.md
// "Training"); an op without one becomes an unmodeled record, never a zero.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/graph.hpp"

namespace neuralcost {

enum class Optimizer { kSgd, kMomentum, kAdam, kAdamW };
enum class Precision {
  kFp32,       ///< parameters, gradients, states and activations in fp32
  kBf16Mixed,  ///< bf16 parameters, activations and gradients; fp32 master weights and states
  kFp16Mixed,  ///< as bf16-mixed in fp16, with loss scaling (unscale + overflow check per gradient)
};
enum class CheckpointKind {
  kNone,       ///< every saved tensor is kept until its backward
  kFull,       ///< keep only each segment's input; recompute the segment before its backward
  kEveryK,     ///< segments of `every` ops (0: the square root of the op count)
  kSelective,  ///< recompute cheap elementwise and normalisation ops, keep contraction outputs
};
struct CheckpointPolicy {
  CheckpointKind kind = CheckpointKind::kNone;
  std::int64_t every = 0;
};

struct TrainingOptions {
  Optimizer optimizer = Optimizer::kAdam;
  Precision precision = Precision::kFp32;
  CheckpointPolicy checkpoint;
  /// The mixed precision is torch.autocast's, as measured steps run it (profile --train): the
  /// parameters, their gradients and the optimizer stay fp32 (the parameters are the master
  /// weights), and the forward graph, captured under autocast, already holds its casts and each
  /// tensor's own dtype. False (analyze --train): low-precision parameters, activations and
  /// gradients with fp32 master weights, the whole graph narrowed (Megatron's and DeepSpeed's
  /// bf16). No effect in fp32.
  bool autocast = false;
};

/// The precision the ledger and the step graph apply to the forward graph's fp32 tensors and
/// parameters: fp32 under autocast (the graph's dtypes are what ran), the options' otherwise.
Precision graph_precision(const TrainingOptions& options);

/// The pass an op of a step graph belongs to (its attribute "pass").
enum class Pass { kForward, kRecompute, kInputGradient, kWeightGradient, kOptimizer };
inline constexpr std::string_view kPassAttribute = "pass";
std::string_view pass_name(Pass pass);
/// The pass of a step-graph record; kForward for a record without the attribute.
Pass pass_of(const OpRecord& op);

/// Parsers for the CLI's values; each throws kInvalidArgument naming the option and the accepted
/// values ("--optimizer 'lion' is not one of sgd, momentum, adam, adamw").
Optimizer parse_optimizer(const std::string& text);
Precision parse_precision(const std::string& text);
/// "none", "full", "selective", "every:K" (K a positive integer) or "every" (K = square root).
CheckpointPolicy parse_checkpoint(const std::string& text);
std::string_view optimizer_name(Optimizer optimizer);
std::string_view precision_name(Precision precision);
std::string checkpoint_name(const CheckpointPolicy& policy);

/// Optimizer state per parameter element, in bytes, by optimizer and precision (momentum: one
/// fp32 buffer; Adam/AdamW: two; mixed precision adds the fp32 master weight). Gradient bytes per
/// element follow the precision's parameter dtype.
std::uint64_t optimizer_state_bytes_per_element(Optimizer optimizer, Precision precision);

/// A forward op as a training step runs it: batch norm normalises with the batch's statistics.
OpRecord training_form(OpRecord op);

/// The step graph of `forward`: the forward ops (with the recomputation of the checkpoint segments
/// the memory ledger recomputes, training/memory.hpp, each as many times as it is run), the gradient of a scalar loss
/// of the graph's outputs, every op's input and weight gradients in reverse order (only where a gradient is needed:
/// "needs grad" flows from trainable parameters), and one optimizer record per trainable parameter. Throws the cost
/// model's errors for malformed ops.
OpGraph training_step(const OpGraph& forward, const TrainingOptions& options);

}  // namespace neuralcost
