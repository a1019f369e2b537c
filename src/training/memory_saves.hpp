// What one op keeps for its backward pass (training/memory.hpp): the op-kind table's Saves rule,
// refined by the op's function, and the buffers it keeps besides its tensors. Internal to the
// memory ledger.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/training/memory.hpp"

namespace neuralcost::training {

/// A buffer an op keeps that is not a tensor of the graph (statistics, argmax, mask, workspace).
struct SavedBuffer {
  std::string what;  ///< "stats", "indices", "mask", "workspace", "logsumexp", "routed_rows"
  SavedKind kind = SavedKind::kStatistics;
  std::uint64_t bytes = 0;
  /// A storage several ops keep, by name (the gathered rows that a mixture of experts' gate and
  /// up projections both read): the ledger counts it once. Empty: the op's own "<op>.<what>".
  std::string shared;
};

struct OpSaves {
  Saves rule = Saves::kNothing;
  bool inputs = false;   ///< keeps its activation inputs
  bool outputs = false;  ///< keeps its outputs
  /// mul and div keep an operand only for another operand's gradient (keeps_input())
  /// where, gather and scatter keep only their mask or index (bool or integer inputs): the
  /// gradient is routed by it, the values are not needed
  enum class Operands { kAll, kMul, kDiv, kIndexOrMask } operands = Operands::kAll;
  /// kIndexOrMask: which inputs are a mask or an index, by position
  std::vector<bool> index_or_mask;
  std::vector<SavedBuffer> buffers;
  /// Storages the op makes inside itself beyond its outputs and buffers, for the upper bound
  /// only (nothing freed): a recurrent op's per-step intermediates (recurrent_internal_bytes()).
  std::uint64_t internal_bytes = 0;
};

/// Whether an op with these saves keeps its input at position k (of OpRecord::inputs), given
/// which inputs need a gradient: every input when `inputs` is set, except that mul keeps an
/// operand only when another operand needs a gradient (d(ab)/da = b), and div a/b keeps b when
/// either needs one and a when b does (d(a/b)/db = -a/b^2). A scalar operand is no input: q * 0.125
/// keeps nothing.
bool keeps_input(const OpSaves& saves, std::size_t k, const std::vector<bool>& input_needs_grad);

/// The refined rule of one op. Throws kInvalidArgument for attributes the rule needs and cannot
/// read (a normalisation over more dims than its input has).
OpSaves saves_of(const OpRecord& op, Precision precision);
/// saves_of() under `options`: the graph's precision (graph_precision), except that under
/// autocast a recurrent op without a captured workspace estimates its per-step internals in the
/// low precision (a composite LSTM's gates are autocast's bf16 matmuls, unseen by a capture that
/// records the op whole).
OpSaves saves_of(const OpRecord& op, const TrainingOptions& options);

}  // namespace neuralcost::training
