// The memory ledger of one training step: what stays resident (parameters, gradients, optimizer
// state, master weights, buffers), what the forward pass keeps for the backward pass (per op,
// each distinct storage once), and the activation memory as an interval [lower, upper] that a
// real allocator's peak should land in. Checkpointing trades saved bytes for recompute FLOPs;
// both are reported. largest_batch() answers "does it fit" against a memory budget by
// re-importing the graph at each probed batch. docs/training-memory.md defines every figure
// with a worked example; the CLI (`analyze --train`), JSON and views only print what is here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "neuralcost/core/graph.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

/// Which end of the activation interval a total uses.
enum class MemoryBound { kLower, kUpper };
std::string_view memory_bound_name(MemoryBound bound);  ///< "lower", "upper"

/// When the activation peak happens: during the forward pass, at the loss (all saved tensors,
/// the graph outputs and their gradients alive), or during the backward pass.
enum class MemoryPhase { kForward, kLoss, kBackward };
std::string_view memory_phase_name(MemoryPhase phase);  ///< "forward", "loss", "backward"

/// What a saved storage is: a tensor of the graph, or a buffer an op keeps besides its tensors.
enum class SavedKind {
  kTensor,      ///< an activation tensor (the storage a view aliases counts, once)
  kStatistics,  ///< normalisation statistics (fp32: mean and 1/std per row; batch norm: per channel)
  kIndices,     ///< max pooling's argmax (int64, the output's shape)
  kMask,        ///< dropout's keep mask (1 byte per element)
  kWorkspace,   ///< recurrent ops' per-step gates and inner layers' states; attention's logsumexp;
                ///< a mixture of experts' gathered input rows
};
std::string_view saved_kind_name(SavedKind kind);

/// One distinct storage kept from the forward pass for the backward pass.
struct SavedStorage {
  std::string name;  ///< tensor name (the storage root of a view), or "<op>.<what>" for a buffer
  SavedKind kind = SavedKind::kTensor;
  std::uint64_t bytes = 0;      ///< in the step's activation dtype (see activation_bytes)
  std::size_t first_saver = 0;  ///< op index of the first op (topological order) that keeps it
  bool graph_input = false;     ///< a graph input (image, token ids) kept by an op that saves its inputs
  /// Kept from the forward pass to the backward pass (false: only kept while its checkpoint
  /// segment is recomputed and differentiated).
  bool kept = true;
};

/// What one op keeps for its backward pass.
struct OpMemory {
  std::size_t op_index = 0;
  /// The kind's Saves rule refined by the op's function (relu keeps its output, add nothing, a
  /// sum reduction nothing); kUnknown ops are listed in MemoryLedger::unknown_saves.
  Saves rule = Saves::kNothing;
  bool records = false;            ///< autograd records it: it has a trainable parameter or an input needing a gradient
  std::uint64_t keeps_bytes = 0;   ///< everything it keeps, storages shared with other ops included
  std::vector<std::size_t> keeps;  ///< what it keeps: indices into MemoryLedger::saved
  /// Bytes of the kept storages this op is the first saver of: summed over ops, equals
  /// ActivationMemory::saved_bytes (distinct storages once). Inside a recomputed segment only its
  /// first op has any: the checkpoint's inputs.
  std::uint64_t saved_bytes = 0;
  std::int64_t segment = -1;  ///< checkpoint segment index, -1 when not recomputed
};

/// A run of consecutive ops (topological order) that is run without saving in the forward pass
/// and recomputed before its backward pass; only its inputs are kept.
struct CheckpointSegment {
  std::string name;                         ///< "encoder0" (full), "<first op> .. <last op>" (every:K, selective)
  std::size_t first_op = 0, last_op = 0;    ///< inclusive op indices
  std::uint64_t input_bytes = 0;            ///< its inputs' storages, kept by the checkpoint
  std::uint64_t recompute_saved_bytes = 0;  ///< what its ops save while it is differentiated
  std::uint64_t internal_bytes = 0;         ///< storages produced and used only inside it, plus its ops' buffers
  /// cost_of() FLOPs of its ops; selective: times (1 + the later ops that keep one of its outputs)
  std::uint64_t recompute_flops = 0;
  /// Whether the ledger recomputes it. Not when none of its ops records (no backward), not the
  /// last segment of full and every:K (its backward follows its forward at once, as in torch's
  /// checkpoint_sequential), and not a selective run whose inputs outweigh what it frees (a
  /// relu alone keeps its output for the next matmul anyway).
  bool recomputed = false;
  /// How many times it is recomputed: 1, or for selective 1 + the later ops that keep one of its
  /// outputs (their backward comes first and needs it). The step graph has that many copies.
  std::uint64_t runs = 1;
};

struct ActivationMemory {
  /// Distinct storages kept from the forward pass to the backward pass (with checkpointing: the
  /// segments' inputs and what ops outside segments keep).
  std::uint64_t saved_bytes = 0;
  std::uint64_t saved_graph_input_bytes = 0;  ///< of which graph inputs (kept by the ops that read them)
  /// Lower bound of the activation peak over every order the graph allows: the largest set of
  /// storages that must be alive together at one moment, plus that moment's gradients.
  std::uint64_t lower_bound_bytes = 0;
  std::size_t peak_op_index = 0;  ///< the op whose forward or backward is the lower bound's moment (op count: the loss)
  std::string peak_op;            ///< its name ("loss" at the loss moment)
  MemoryPhase peak_phase = MemoryPhase::kLoss;
  std::uint64_t peak_saved_bytes = 0;      ///< saved storages alive at that moment
  std::uint64_t peak_transient_bytes = 0;  ///< the rest: tensors and gradients the moment itself needs
  /// The same moments with the gradients of the parameters each backward writes: a parameter
  /// gradient exists from the backward that writes it to the optimizer step, so no other must
  /// exist at a moment. At least lower_bound_bytes; MemoryLedger::total_bytes(kLower) reads it.
  std::uint64_t lower_with_parameter_gradients_bytes = 0;
  std::string lower_with_parameter_gradients_op;  ///< its moment's op ("loss" at the loss)
  /// Upper bound: every forward storage (graph inputs and op outputs, views aliased) and every
  /// op buffer alive at once, plus the largest backward transient. With checkpointing only the
  /// largest segment's internal storages count (segments are recomputed one at a time).
  std::uint64_t upper_bound_bytes = 0;
  std::uint64_t forward_bytes = 0;          ///< storages and buffers outside segments
  std::uint64_t largest_segment_bytes = 0;  ///< internal storages of the largest segment
  /// Gradients in flight during the backward pass in reverse topological order (each gradient
  /// lives from its last consumer's backward to its producer's backward), at their largest.
  std::uint64_t largest_transient_bytes = 0;
  std::string largest_transient_op;  ///< the op whose backward holds them
};

/// The memory of one training step of one forward graph at one batch.
struct MemoryLedger {
  std::string model;
  std::int64_t batch = 0;  ///< OpGraph::batch of the graph it was built from (largest_batch: the probed batch)
  TrainingOptions options;

  std::uint64_t parameter_count = 0;  ///< unique trainable elements (shared weights once)
  std::uint64_t parameter_bytes = 0;  ///< in the precision's parameter dtype: fp32 (4 B), bf16/fp16 (2 B)
  std::uint64_t buffer_count = 0;     ///< non-trainable elements (running statistics), in their own dtype
  std::uint64_t buffer_bytes = 0;
  std::uint64_t gradient_bytes = 0;         ///< one gradient per trainable element, in the parameter dtype
  std::uint64_t optimizer_state_bytes = 0;  ///< momentum: 1, Adam/AdamW: 2 fp32 buffers per element
  std::uint64_t master_weight_bytes = 0;    ///< fp32 master weights (mixed precision only)
  /// Temporaries of the optimizer step: Adam/AdamW 2 fp32 tensors the size of the largest
  /// parameter (updated one at a time), SGD and momentum none (in place).
  std::uint64_t optimizer_transient_bytes = 0;

  ActivationMemory activations;
  std::vector<OpMemory> ops;        ///< one per op of the graph, in graph order
  std::vector<SavedStorage> saved;  ///< every storage some op keeps, in first-saver order
  std::vector<CheckpointSegment> segments;
  std::uint64_t recompute_flops = 0;  ///< the segments' recompute_flops summed
  std::uint64_t recompute_contraction_flops = 0;
  /// Recorded ops whose Saves rule is unknown (loop, custom, unmodeled): what they keep is not in
  /// the lower bound; their inputs and outputs are in the upper bound.
  std::vector<std::string> unknown_saves;
  /// Recomputed ops the cost model cannot count: recompute_flops misses them.
  std::vector<std::string> unmodeled_recompute;
  /// Choices the ledger made for this graph, one sentence each (views print them as notes).
  std::vector<std::string> notes;

  /// Parameters, buffers, gradients, optimizer state and master weights.
  std::uint64_t resident_bytes() const;
  /// What is alive through the whole step: resident_bytes() without the gradients (they exist
  /// from the backward that writes them to the optimizer step).
  std::uint64_t persistent_bytes() const;
  /// Upper: resident_bytes() + the activation upper bound + the optimizer's temporaries (nothing
  /// freed). Lower: persistent_bytes() + the larger of two moments that never overlap: the
  /// activations' (lower_with_parameter_gradients_bytes: the lower bound's moments with the
  /// parameter gradients each writes) and the optimizer step's (every gradient and the
  /// optimizer's temporaries; the activations are gone).
  std::uint64_t total_bytes(MemoryBound bound) const;
  /// True when every recorded op's saves and every recomputed op's FLOPs are known.
  bool complete() const { return unknown_saves.empty() && unmodeled_recompute.empty(); }
};

/// The ledger of one training step of `forward` under `options`. Activations keep the graph's
/// dtypes, except that mixed precision stores fp32 activations in bf16/fp16 (2 bytes).
/// Throws the cost model's errors for malformed ops (recompute FLOPs), and kOutOfRange when a
/// byte count overflows 64 bits.
MemoryLedger memory_ledger(const OpGraph& forward, const TrainingOptions& options);

/// Storage bytes of an activation tensor in a step of `precision` (fp32/tf32 become 2 bytes in
/// mixed precision; other dtypes keep their size). The ledger sizes the outputs of an op marked
/// `computes_fp32` (a decoder's router, built in bf16 and computed in fp32) as in fp32.
std::uint64_t activation_bytes(const TensorDesc& tensor, Precision precision);

/// The checkpoint segments the policy makes of `forward` (before any memory is counted):
/// full: one per top-level block (consecutive ops whose names agree up to their first numbered
/// component: "encoder0", "layer.3"; an unnumbered name is its own first component); every:K:
/// K consecutive ops (K = 0: round(sqrt(op count))); selective: each maximal run of consecutive
/// fusible (elementwise, activation, softmax, normalisation) ops; none: no segments. Which of them
/// are recomputed (CheckpointSegment::recomputed) is the ledger's decision. Throws
/// kInvalidArgument for a negative K.
std::vector<CheckpointSegment> checkpoint_segments(const OpGraph& forward, const CheckpointPolicy& policy);

/// The ops with the most saved bytes (OpMemory::keeps_bytes), largest first, at most `count`
/// indices into ledger.ops.
std::vector<std::size_t> biggest_savers(const MemoryLedger& ledger, std::size_t count);

// ---- Does it fit ---------------------------------------------------------------------------

/// Parses a memory size: a positive decimal number (1.5 allowed) and a unit, case-insensitive:
/// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024); fractions of a
/// byte are dropped. Throws kInvalidArgument naming --memory-budget for a missing unit, a
/// negative, zero, unparsable or overflowing size.
std::uint64_t parse_memory_size(const std::string& text);
/// Parses the reserve: "10%" or a fraction "0.1", with 0 <= r < 1. Throws kInvalidArgument
/// naming --reserve otherwise.
double parse_reserve(const std::string& text);
/// "5.2 GB", "24 GB", "980 kB", "512 B": decimal SI, three significant digits.
std::string memory_size_string(std::uint64_t bytes);

/// The largest batch the search tries (2^20): a budget that holds it is reported as capped.
inline constexpr std::int64_t kMaxSearchedBatch = std::int64_t{1} << 20;

struct BatchFit {
  std::int64_t batch = 0;  ///< the largest batch that fits
  bool capped = false;     ///< kMaxSearchedBatch fits: larger batches were not tried
  MemoryBound bound = MemoryBound::kUpper;
  std::uint64_t budget_bytes = 0;
  double reserve = 0;
  std::uint64_t usable_bytes = 0;  ///< budget x (1 - reserve), rounded down
  std::uint64_t needed_bytes = 0;  ///< ledger.total_bytes(bound) at `batch`
  /// ledger.total_bytes(bound) at batch + 1: the first batch that does not fit (0 when capped).
  std::uint64_t next_batch_bytes = 0;
  MemoryLedger ledger;               ///< the ledger at `batch`: what fills the budget
  std::vector<std::int64_t> probed;  ///< every batch whose graph was built, in probe order
};

/// The largest batch whose step fits in budget x (1 - reserve): exponential search (1, 2, 4, ...)
/// then binary search, each probe a real graph from `graph_at(batch)` and its ledger (never an
/// extrapolation); assumes memory grows with the batch. `bound` picks the activation figure:
/// the upper bound (default) answers "fits for sure", the lower bound "cannot fit beyond".
/// A probe whose counts overflow (kOutOfRange) does not fit; graph_at's other errors propagate.
/// Throws kInvalidArgument for a zero budget or a reserve outside [0, 1), and when batch 1
/// does not fit ("--memory-budget 1 MB cannot hold batch 1: it needs 5.2 GB (...)").
BatchFit largest_batch(const std::function<OpGraph(std::int64_t batch)>& graph_at, const TrainingOptions& options,
                       std::uint64_t budget_bytes, double reserve, MemoryBound bound = MemoryBound::kUpper);

}  // namespace neuralcost
