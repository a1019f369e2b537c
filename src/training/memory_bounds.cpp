// The activation interval of a training step (memory_index.hpp, docs/training-memory.md).
//
// Lower bound: the largest set of storages that must be alive together in ANY order the graph
// allows. Three kinds of moments exist in every order:
//   - the forward of op i: what i's grad-ancestors keep (they ran, their backward has not),
//     plus i's inputs and outputs;
//   - the loss: everything kept, the graph outputs and their gradients (a cross entropy's
//     log-probabilities and their gradient too);
//   - the backward of op j: what j and its grad-ancestors keep (an ancestor's backward needs
//     j's input gradients, so it comes later), what j's segment keeps while it is recomputed,
//     plus j's output and input gradients and the gradients of j's parameters.
// "What the ancestors keep" is a bitset over kept storages OR-ed along gradient edges, 64
// storages per pass; a table of byte sums per 8 bits adds a word up in 8 lookups.
// Upper bound: nothing is freed (one segment's recomputed internals at a time), plus the
// gradients in flight of a backward pass in reverse topological order at their largest.
#include <algorithm>
#include <array>

#include "training/memory_index.hpp"

namespace neuralcost::training {
namespace {

/// What the loss itself holds between its forward and its backward, beyond the outputs and their
/// gradients: a cross entropy over [rows, classes] logits (training_step's rule) keeps its
/// log-probabilities (log_softmax's output, which nll_loss and log_softmax's backward read) and
/// writes their gradient before the logits' (torch's cross_entropy is log_softmax + nll_loss):
/// two more tensors the logits' size. For a decoder LLM's vocabulary they are large. The loss
/// takes the marked outputs when the graph marks any (a capture's other outputs, a recurrent
/// layer's states, have none), every output otherwise.
std::uint64_t loss_workspace_bytes(const Index& ix, const std::vector<std::size_t>& losses) {
  std::uint64_t bytes = 0;
  for (std::size_t id : losses) {
    const Tensor& t = ix.tensors[id];
    if (t.needs_grad && t.desc.shape.size() == 2 && t.desc.shape[1] > 1) bytes += 2 * t.grad_bytes;
  }
  return bytes;
}

/// The outputs the loss takes (training_step's rule): the marked outputs when the graph marks
/// any, every output otherwise. Only these have gradients when the backward pass begins; another
/// output (a capture's recurrent states) is alive, but no loss differentiates it.
std::vector<std::size_t> loss_outputs(const OpGraph& g, const Index& ix) {
  std::vector<std::size_t> out;
  for (const std::string& name : g.marked_outputs().empty() ? g.outputs() : g.marked_outputs()) {
    const auto id = ix.id.find(name);
    if (id != ix.id.end()) push_unique(out, id->second);
  }
  return out;
}

/// Sums the bytes of the storages whose bits are set in one 64-bit word of a chunk.
class ChunkSum {
 public:
  explicit ChunkSum(const std::array<std::uint64_t, 64>& bytes) {
    for (std::size_t k = 0; k < 8; ++k) {
      table_[k][0] = 0;
      for (std::size_t b = 1; b < 256; ++b) {
        table_[k][b] = table_[k][b & (b - 1)] + bytes[8 * k + static_cast<std::size_t>(__builtin_ctzll(b))];
      }
    }
  }
  std::uint64_t operator()(std::uint64_t word) const {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < 8 && word != 0; ++k, word >>= 8) sum += table_[k][word & 0xff];
    return sum;
  }

 private:
  std::array<std::array<std::uint64_t, 256>, 8> table_;
};

struct Moments {
  std::vector<std::uint64_t> forward_kept;   ///< kept by the op's grad-ancestors
  std::vector<std::uint64_t> backward_kept;  ///< kept by the op and its grad-ancestors, with its segment's
  std::vector<std::uint64_t> io_kept;        ///< of the op's inputs and outputs, those already in forward_kept
};

Moments propagate(const Index& ix, const std::vector<std::int64_t>& op_segment,
                  const std::vector<std::vector<std::size_t>>& io) {
  const std::size_t n = ix.records.size();
  // kept storages by bit, in the order of their first keeper: a chunk's masks are zero before
  // its first keeper, so each pass starts there
  std::vector<std::size_t> bits;
  for (std::size_t s = 0; s < ix.storages.size(); ++s) {
    if (ix.storages[s].saved) bits.push_back(s);
  }
  std::stable_sort(bits.begin(), bits.end(), [&](std::size_t x, std::size_t y) {
    return ix.storages[x].first_saver < ix.storages[y].first_saver;
  });
  std::vector<std::int64_t> bit_of(ix.storages.size(), -1);
  for (std::size_t b = 0; b < bits.size(); ++b) bit_of[bits[b]] = static_cast<std::int64_t>(b);
  Moments m{std::vector<std::uint64_t>(n, 0), std::vector<std::uint64_t>(n, 0), std::vector<std::uint64_t>(n, 0)};
  std::vector<std::uint64_t> own_global(n, 0), own_local(n, 0), global(n, 0), local(n, 0);
  for (std::size_t lo = 0; lo < bits.size(); lo += 64) {
    const std::size_t hi = std::min(bits.size(), lo + 64);
    const std::size_t start = ix.storages[bits[lo]].first_saver;
    std::array<std::uint64_t, 64> bytes{};
    for (std::size_t b = lo; b < hi; ++b) {
      const Storage& st = ix.storages[bits[b]];
      bytes[b - lo] = st.bytes;
      const std::uint64_t mask = std::uint64_t{1} << (b - lo);
      for (std::size_t op : st.global_savers) own_global[op] |= mask;
      for (std::size_t op : st.local_savers) own_local[op] |= mask;
    }
    const ChunkSum sum(bytes);
    for (std::size_t i = start; i < n; ++i) {
      std::uint64_t before = 0, segment_before = 0;
      for (std::size_t p : ix.grad_preds[i]) {
        before |= global[p];
        if (op_segment[i] >= 0 && op_segment[p] == op_segment[i]) segment_before |= local[p];
      }
      global[i] = before | own_global[i];
      local[i] = segment_before | own_local[i];
      if (before != 0) {
        m.forward_kept[i] += sum(before);
        for (std::size_t s : io[i]) {
          const std::int64_t b = bit_of[s];
          if (b >= static_cast<std::int64_t>(lo) && b < static_cast<std::int64_t>(hi) &&
              ((before >> (static_cast<std::size_t>(b) - lo)) & 1) != 0) {
            m.io_kept[i] += ix.storages[s].bytes;
          }
        }
      }
      if ((global[i] | local[i]) != 0) m.backward_kept[i] += sum(global[i] | local[i]);
    }
    // the next chunk starts from zero masks
    std::fill(global.begin() + static_cast<std::ptrdiff_t>(start), global.end(), 0);
    std::fill(local.begin() + static_cast<std::ptrdiff_t>(start), local.end(), 0);
    for (std::size_t b = lo; b < hi; ++b) {
      for (std::size_t op : ix.storages[bits[b]].global_savers) own_global[op] = 0;
      for (std::size_t op : ix.storages[bits[b]].local_savers) own_local[op] = 0;
    }
  }
  return m;
}

void lower_bound(const OpGraph& g, const Index& ix, const std::vector<std::int64_t>& op_segment,
                 std::uint64_t parameter_grad_bytes, ActivationMemory& a) {
  const std::size_t n = g.size();
  auto consider = [&](std::uint64_t kept, std::uint64_t transient, std::size_t op, MemoryPhase phase,
                      std::uint64_t parameter_grads = 0) {
    if (op == kNoOp || kept + transient + parameter_grads > a.lower_with_parameter_gradients_bytes) {
      a.lower_with_parameter_gradients_bytes = kept + transient + parameter_grads;
      a.lower_with_parameter_gradients_op = op == kNoOp ? "loss" : g.op(op).name;
    }
    if (op != kNoOp && kept + transient <= a.lower_bound_bytes) return;
    a.lower_bound_bytes = kept + transient;
    a.peak_saved_bytes = kept;
    a.peak_transient_bytes = transient;
    a.peak_phase = phase;
    a.peak_op_index = op == kNoOp ? n : op;
    a.peak_op = op == kNoOp ? "loss" : g.op(op).name;
  };
  {  // the loss: everything kept, the graph outputs, the gradients of those the loss takes, the
     // loss's own
    std::vector<std::size_t> output_roots;
    std::uint64_t transient = 0;
    const std::vector<std::size_t> losses = loss_outputs(g, ix);
    for (std::size_t out : ix.outputs) {
      for (std::size_t r : ix.tensors[out].roots) push_unique(output_roots, r);
    }
    for (std::size_t out : losses) {
      if (ix.tensors[out].needs_grad) transient += ix.tensors[out].grad_bytes;
    }
    for (std::size_t r : output_roots) {
      if (!ix.storages[r].global) transient += ix.storages[r].bytes;
    }
    transient += loss_workspace_bytes(ix, losses);
    consider(a.saved_bytes, transient, kNoOp, MemoryPhase::kLoss);
  }
  std::vector<std::vector<std::size_t>> io(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto* side : {&ix.op_in[i], &ix.op_out[i]}) {
      for (std::size_t t : *side) {
        for (std::size_t r : ix.tensors[t].roots) push_unique(io[i], r);
      }
    }
  }
  const Moments m = propagate(ix, op_segment, io);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t io_bytes = 0;
    for (std::size_t r : io[i]) io_bytes += ix.storages[r].bytes;
    consider(m.forward_kept[i], io_bytes - m.io_kept[i], i, MemoryPhase::kForward);
    if (!ix.records[i]) continue;
    std::uint64_t grads = 0;
    for (std::size_t t : ix.op_out[i]) grads += ix.tensors[t].needs_grad ? ix.tensors[t].grad_bytes : 0;
    if (!is_view(g.op(i))) {  // a view's input gradient is a view of its output gradient
      for (std::size_t t : ix.op_in[i]) grads += ix.tensors[t].needs_grad ? ix.tensors[t].grad_bytes : 0;
    }
    // the gradients of its own trainable parameters, which this backward writes (no other
    // parameter gradient must exist yet: a weight gradient may be computed as late as the
    // optimizer needs it)
    std::uint64_t parameter_grads = 0;
    std::vector<std::string> seen;
    for (const ParameterDesc& p : g.op(i).parameters) {
      if (!p.trainable || std::find(seen.begin(), seen.end(), p.id) != seen.end()) continue;
      seen.push_back(p.id);
      parameter_grads += p.elements() * parameter_grad_bytes;
    }
    consider(m.backward_kept[i], grads, i, MemoryPhase::kBackward, parameter_grads);
  }
}

/// Gradients in flight in reverse topological order: each lives from the backward of its last
/// consumer (or the loss) to the backward of its producer.
void largest_transient(const OpGraph& g, const Index& ix, ActivationMemory& a) {
  std::vector<bool> live(ix.tensors.size(), false);
  std::uint64_t current = 0;
  const std::vector<std::size_t> losses = loss_outputs(g, ix);
  for (std::size_t t : losses) {
    if (ix.tensors[t].needs_grad && !live[t]) {
      live[t] = true;
      current += ix.tensors[t].grad_bytes;
    }
  }
  a.largest_transient_bytes = current + loss_workspace_bytes(ix, losses);
  a.largest_transient_op = "loss";
  for (std::size_t i = g.size(); i-- > 0;) {
    if (!ix.records[i]) continue;
    for (std::size_t t : ix.op_in[i]) {
      if (ix.tensors[t].needs_grad && !live[t]) {
        live[t] = true;
        current += ix.tensors[t].grad_bytes;
      }
    }
    if (current > a.largest_transient_bytes) {
      a.largest_transient_bytes = current;
      a.largest_transient_op = g.op(i).name;
    }
    for (std::size_t t : ix.op_out[i]) {
      if (live[t]) {
        live[t] = false;
        current -= ix.tensors[t].grad_bytes;
      }
    }
  }
}

}  // namespace

void activation_bounds(const OpGraph& g, const Index& ix, const std::vector<std::int64_t>& op_segment,
                       MemoryLedger& l) {
  ActivationMemory& a = l.activations;
  lower_bound(g, ix, op_segment, graph_precision(l.options) == Precision::kFp32 ? 4 : 2, a);
  largest_transient(g, ix, a);
  for (const Storage& st : ix.storages) {
    // a buffer exists only when kept; an op's internals always (upper bound only)
    if (st.kind != SavedKind::kTensor && !st.saved && !st.internal) continue;
    if (st.segment >= 0 && !st.escapes) {
      l.segments[static_cast<std::size_t>(st.segment)].internal_bytes += st.bytes;
    } else {
      a.forward_bytes += st.bytes;
    }
  }
  for (std::size_t s = 0; s < l.segments.size(); ++s) {
    CheckpointSegment& seg = l.segments[s];
    a.largest_segment_bytes = std::max(a.largest_segment_bytes, seg.internal_bytes);
    if (!seg.recomputed) continue;
    std::vector<std::size_t> inputs;
    for (std::size_t i = seg.first_op; i <= seg.last_op; ++i) {
      for (std::size_t t : ix.op_in[i]) {
        for (std::size_t r : ix.tensors[t].roots) {
          if (ix.storages[r].segment != static_cast<std::int64_t>(s)) push_unique(inputs, r);
        }
      }
    }
    for (std::size_t r : inputs) seg.input_bytes += ix.storages[r].bytes;
  }
  a.upper_bound_bytes = a.forward_bytes + a.largest_segment_bytes + a.largest_transient_bytes;
}

}  // namespace neuralcost::training
