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
  std::string what;  ///< "stats", "indices", "mask", "workspace", "logsumexp"
  SavedKind kind = SavedKind::kStatistics;
  std::uint64_t bytes = 0;
};

struct OpSaves {
  Saves rule = Saves::kNothing;
  bool inputs = false;   ///< keeps its activation inputs
  bool outputs = false;  ///< keeps its outputs
  std::vector<SavedBuffer> buffers;
};

/// The refined rule of one op. Throws kInvalidArgument for attributes the rule needs and cannot
/// read (a normalisation over more dims than its input has).
OpSaves saves_of(const OpRecord& op, Precision precision);

}  // namespace neuralcost::training
