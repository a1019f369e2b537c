// The op graph as the memory ledger walks it (internal to src/training/memory_*.cpp): tensors
// and the storages they occupy (a view aliases its input's storage), which ops read and write
// them, which ops autograd records, and which storages are kept for the backward pass.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuralcost/training/memory.hpp"

namespace neuralcost::training {

inline constexpr std::size_t kNoOp = std::numeric_limits<std::size_t>::max();

/// One piece of memory: an op's output (or a graph input), or a buffer an op keeps.
struct Storage {
  std::string name;
  SavedKind kind = SavedKind::kTensor;
  std::uint64_t bytes = 0;
  std::size_t producer = kNoOp;  ///< op index; kNoOp for a graph input
  std::int64_t segment = -1;     ///< recomputed checkpoint segment of the producer
  bool escapes = false;          ///< read outside its segment, or a graph output
  bool saved = false;            ///< some op or checkpoint keeps it
  bool internal = false;         ///< an op's intermediate (OpSaves::internal_bytes): in the upper bound only
  bool global = false;           ///< kept from the forward pass to the backward pass
  std::size_t first_saver = kNoOp;
  std::size_t first_global_saver = kNoOp;
  /// Ops that keep it from the forward pass: alive at the backward of each of them and of
  /// their grad-descendants.
  std::vector<std::size_t> global_savers;
  /// Segment ops that keep it while their segment is recomputed and differentiated.
  std::vector<std::size_t> local_savers;
};

struct Tensor {
  TensorDesc desc;
  std::size_t producer = kNoOp;
  std::vector<std::size_t> roots;  ///< the storages it occupies
  bool needs_grad = false;
  std::uint64_t grad_bytes = 0;  ///< its gradient, in the step's activation dtype
};

struct Index {
  std::unordered_map<std::string, std::size_t> id;  ///< tensor name -> tensor
  std::vector<Tensor> tensors;
  std::vector<Storage> storages;
  std::vector<std::vector<std::size_t>> op_in, op_out;  ///< distinct tensors per op
  std::vector<bool> records;                            ///< autograd records the op
  std::vector<std::vector<std::size_t>> grad_preds;     ///< producers of its inputs that need a gradient
  std::vector<std::vector<std::size_t>> keeps;          ///< storages each recorded op keeps
  std::vector<std::size_t> outputs;                     ///< the graph's outputs (OpGraph::outputs)
};

inline void push_unique(std::vector<std::size_t>& v, std::size_t x) {
  for (std::size_t y : v) {
    if (y == x) return;
  }
  v.push_back(x);
}

/// Tensors, storages, records and gradient edges of a graph in topological order.
Index build_index(const OpGraph& graph, Precision precision);

/// Fills the activation interval (ledger.activations) and the segments' input and internal
/// bytes from an index whose saves are marked; op_segment[i] is op i's recomputed segment or -1.
void activation_bounds(const OpGraph& graph, const Index& index, const std::vector<std::int64_t>& op_segment,
                       MemoryLedger& ledger);

}  // namespace neuralcost::training
