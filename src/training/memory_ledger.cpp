// The memory ledger of a training step (training/memory.hpp, docs/training-memory.md): the
// resident bytes (parameters, gradients, optimizer state, master weights, buffers), what each
// recorded op keeps, which checkpoint segments are recomputed and what their checkpoints keep.
// The activation interval itself is memory_bounds.cpp.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/training/memory.hpp"
#include "training/memory_index.hpp"
#include "training/memory_saves.hpp"

namespace neuralcost {

std::string_view memory_bound_name(MemoryBound bound) { return bound == MemoryBound::kLower ? "lower" : "upper"; }

std::string_view memory_phase_name(MemoryPhase phase) {
  switch (phase) {
    case MemoryPhase::kForward: return "forward";
    case MemoryPhase::kLoss: return "loss";
    case MemoryPhase::kBackward: return "backward";
  }
  return "loss";
}

std::string_view saved_kind_name(SavedKind kind) {
  switch (kind) {
    case SavedKind::kTensor: return "tensor";
    case SavedKind::kStatistics: return "statistics";
    case SavedKind::kIndices: return "indices";
    case SavedKind::kMask: return "mask";
    case SavedKind::kWorkspace: return "workspace";
  }
  return "tensor";
}

std::uint64_t MemoryLedger::resident_bytes() const {
  std::uint64_t total = 0;
  for (std::uint64_t v : {parameter_bytes, buffer_bytes, gradient_bytes, optimizer_state_bytes, master_weight_bytes}) {
    total = checked_add(total, v, "resident bytes");
  }
  return total;
}

std::uint64_t MemoryLedger::persistent_bytes() const { return resident_bytes() - gradient_bytes; }

std::uint64_t MemoryLedger::total_bytes(MemoryBound bound) const {
  // lower: the activation moment (with the gradients of its own parameters) and the optimizer
  // step (every gradient and the temporaries, the activations gone) never overlap; gradients
  // that a framework keeps between steps only add. Upper: nothing is freed.
  if (bound == MemoryBound::kLower) {
    const std::uint64_t optimizer_step = checked_add(gradient_bytes, optimizer_transient_bytes, "step memory");
    return checked_add(persistent_bytes(), std::max(activations.lower_with_parameter_gradients_bytes, optimizer_step),
                       "step memory");
  }
  return checked_add(resident_bytes(),
                     checked_add(activations.upper_bound_bytes, optimizer_transient_bytes, "step memory"),
                     "step memory");
}

std::vector<std::size_t> biggest_savers(const MemoryLedger& ledger, std::size_t count) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < ledger.ops.size(); ++i) {
    if (ledger.ops[i].keeps_bytes > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ledger.ops[a].keeps_bytes > ledger.ops[b].keeps_bytes; });
  if (order.size() > count) order.resize(count);
  return order;
}

namespace {

using training::Index;
using training::kNoOp;
using training::push_unique;
using training::Storage;

void count_parameters(const OpGraph& g, MemoryLedger& l) {
  for (const ParameterDesc& p : g.unique_parameters()) {
    if (p.trainable) {
      l.parameter_count = checked_add(l.parameter_count, p.elements(), "parameter count");
    } else {
      l.buffer_count = checked_add(l.buffer_count, p.elements(), "buffer count");
      l.buffer_bytes = checked_add(l.buffer_bytes, p.bytes(), "buffer bytes");
    }
  }
  const Precision precision = graph_precision(l.options);
  l.parameter_bytes = checked_mul(l.parameter_count, precision == Precision::kFp32 ? 4 : 2, "parameter bytes");
  l.gradient_bytes = l.parameter_bytes;
  const std::uint64_t states = optimizer_state_bytes_per_element(l.options.optimizer, Precision::kFp32);
  const std::uint64_t with_master = optimizer_state_bytes_per_element(l.options.optimizer, precision);
  l.optimizer_state_bytes = checked_mul(l.parameter_count, states, "optimizer state bytes");
  l.master_weight_bytes = checked_mul(l.parameter_count, with_master - states, "master weight bytes");
  // Adam and AdamW update one parameter at a time with two fp32 temporaries the size of that
  // parameter (PyTorch's per-parameter step: sqrt(v) and its scaled denominator); SGD and
  // momentum update in place
  if (l.options.optimizer == Optimizer::kAdam || l.options.optimizer == Optimizer::kAdamW) {
    std::uint64_t largest = 0;
    for (const ParameterDesc& p : g.unique_parameters()) {
      if (p.trainable) largest = std::max(largest, p.elements());
    }
    l.optimizer_transient_bytes = checked_mul(largest, 2 * 4, "optimizer transient bytes");
  }
}

/// What every recorded op keeps by its refined rule; its buffers become storages of their own.
void collect_keeps(const OpGraph& g, Index& ix, MemoryLedger& l) {
  l.ops.resize(g.size());
  std::unordered_map<std::string, std::size_t> shared;  // SavedBuffer::shared -> its storage
  for (std::size_t i = 0; i < g.size(); ++i) {
    const OpRecord& op = g.op(i);
    OpMemory& m = l.ops[i];
    m.op_index = i;
    m.records = ix.records[i];
    const training::OpSaves s = training::saves_of(op, l.options);
    m.rule = s.rule;
    if (s.internal_bytes > 0) {  // made in the forward pass whether recorded or not
      Storage st;
      st.name = op.name + ".internals";
      st.kind = SavedKind::kWorkspace;
      st.bytes = s.internal_bytes;
      st.producer = i;
      st.internal = true;
      ix.storages.push_back(std::move(st));
    }
    if (!m.records) continue;
    if (s.rule == Saves::kUnknown) l.unknown_saves.push_back(op.name);
    std::vector<std::size_t>& keeps = ix.keeps[i];
    std::vector<bool> input_needs_grad;
    for (const TensorDesc& x : op.inputs) input_needs_grad.push_back(ix.tensors[ix.id.at(x.name)].needs_grad);
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      if (!training::keeps_input(s, k, input_needs_grad)) continue;
      for (std::size_t r : ix.tensors[ix.id.at(op.inputs[k].name)].roots) push_unique(keeps, r);
    }
    for (std::size_t t : s.outputs ? ix.op_out[i] : std::vector<std::size_t>{}) {
      for (std::size_t r : ix.tensors[t].roots) push_unique(keeps, r);
    }
    for (const training::SavedBuffer& b : s.buffers) {
      if (!b.shared.empty()) {  // kept by an earlier op already: the same storage
        const auto same = shared.find(b.shared);
        if (same != shared.end()) {
          push_unique(keeps, same->second);
          continue;
        }
        shared.emplace(b.shared, ix.storages.size());
      }
      Storage st;
      st.name = b.shared.empty() ? op.name + "." + b.what : b.shared;
      st.kind = b.kind;
      st.bytes = b.bytes;
      st.producer = i;
      ix.storages.push_back(std::move(st));
      keeps.push_back(ix.storages.size() - 1);
    }
    for (std::size_t r : keeps) m.keeps_bytes = checked_add(m.keeps_bytes, ix.storages[r].bytes, "saved bytes");
  }
}

/// Whether recomputing the fusible run [first, last] frees more than its checkpoint keeps: what
/// its ops produce or keep that someone kept, against its inputs that nothing kept before.
bool selective_run_pays(const Index& ix, std::size_t first, std::size_t last, const std::vector<bool>& kept_before,
                        const std::vector<bool>& output_root) {
  auto inside = [&](std::size_t op) { return op != kNoOp && op >= first && op <= last; };
  std::uint64_t frees = 0, adds = 0;
  std::vector<std::size_t> seen;
  for (std::size_t i = first; i <= last; ++i) {
    for (std::size_t t : ix.op_out[i]) {
      for (std::size_t r : ix.tensors[t].roots) {
        if (ix.storages[r].producer == i && kept_before[r] && !output_root[r]) frees += ix.storages[r].bytes;
      }
    }
    for (std::size_t s : ix.keeps[i]) {
      if (ix.storages[s].kind != SavedKind::kTensor) frees += ix.storages[s].bytes;
    }
    for (std::size_t t : ix.op_in[i]) {
      for (std::size_t r : ix.tensors[t].roots) {
        if (!inside(ix.storages[r].producer) && !kept_before[r] &&
            std::find(seen.begin(), seen.end(), r) == seen.end()) {
          seen.push_back(r);
          adds += ix.storages[r].bytes;
        }
      }
    }
  }
  return frees > adds;
}

/// Ops after the run [first, last] that keep a tensor it produced (keepers: per storage, the ops
/// that keep it).
std::uint64_t later_keepers(const Index& ix, const std::vector<std::vector<std::size_t>>& keepers, std::size_t first,
                            std::size_t last) {
  std::vector<std::size_t> later;
  for (std::size_t i = first; i <= last; ++i) {
    for (std::size_t t : ix.op_out[i]) {
      for (std::size_t r : ix.tensors[t].roots) {
        if (ix.storages[r].producer != i) continue;
        for (std::size_t j : keepers[r]) {
          if (j > last) push_unique(later, j);
        }
      }
    }
  }
  return later.size();
}

/// The policy's segments, which of them are recomputed, and their recompute FLOPs. Returns each
/// op's recomputed segment or -1.
std::vector<std::int64_t> choose_segments(const OpGraph& g, const Index& ix, MemoryLedger& l) {
  const std::size_t n = g.size();
  l.segments = checkpoint_segments(g, l.options.checkpoint);
  for (CheckpointSegment& seg : l.segments) {
    for (std::size_t i = seg.first_op; i <= seg.last_op; ++i) seg.recomputed = seg.recomputed || ix.records[i];
  }
  const CheckpointKind kind = l.options.checkpoint.kind;
  if ((kind == CheckpointKind::kFull || kind == CheckpointKind::kEveryK) && !l.segments.empty() &&
      l.segments.back().recomputed) {
    l.segments.back().recomputed = false;
    l.notes.push_back(fmt::format("the last segment ({}) is not recomputed: its backward follows its forward at once",
                                  l.segments.back().name));
  }
  if (kind == CheckpointKind::kSelective) {
    std::vector<bool> kept_before(ix.storages.size(), false), output_root(ix.storages.size(), false);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t s : ix.keeps[i]) kept_before[s] = true;
    }
    for (std::size_t out : ix.outputs) {
      for (std::size_t r : ix.tensors[out].roots) output_root[r] = true;
    }
    std::size_t skipped = 0;
    for (CheckpointSegment& seg : l.segments) {
      if (seg.recomputed && !selective_run_pays(ix, seg.first_op, seg.last_op, kept_before, output_root)) {
        seg.recomputed = false;
        ++skipped;
      }
    }
    if (skipped > 0) {
      l.notes.push_back(
          fmt::format("selective: {} of {} elementwise/normalisation runs are kept, not recomputed: "
                      "recomputing them would keep more (their inputs) than it frees",
                      skipped, l.segments.size()));
    }
  }
  std::vector<std::vector<std::size_t>> keepers(kind == CheckpointKind::kSelective ? ix.storages.size() : 0);
  for (std::size_t i = 0; i < n && !keepers.empty(); ++i) {
    for (std::size_t s : ix.keeps[i]) keepers[s].push_back(i);
  }
  std::vector<std::int64_t> op_segment(n, -1);
  for (std::size_t s = 0; s < l.segments.size(); ++s) {
    CheckpointSegment& seg = l.segments[s];
    if (!seg.recomputed) continue;
    std::uint64_t seg_contraction = 0;
    for (std::size_t i = seg.first_op; i <= seg.last_op; ++i) {
      op_segment[i] = static_cast<std::int64_t>(s);
      l.ops[i].segment = op_segment[i];
      const OpCost c = cost_of(training_form(g.op(i)));
      if (!c.modeled) l.unmodeled_recompute.push_back(g.op(i).name);
      seg.recompute_flops = checked_add(seg.recompute_flops, c.flops, "recompute FLOPs");
      seg_contraction = checked_add(seg_contraction, c.contraction_flops, "recompute FLOPs");
    }
    // selective: once before the run's own backward, and once for each later op that keeps one
    // of its outputs (that op's backward comes first and needs it)
    const std::uint64_t times =
        kind == CheckpointKind::kSelective ? 1 + later_keepers(ix, keepers, seg.first_op, seg.last_op) : 1;
    seg.runs = times;
    seg.recompute_flops = checked_mul(seg.recompute_flops, times, "recompute FLOPs");
    l.recompute_flops = checked_add(l.recompute_flops, seg.recompute_flops, "recompute FLOPs");
    l.recompute_contraction_flops = checked_add(
        l.recompute_contraction_flops, checked_mul(seg_contraction, times, "recompute FLOPs"), "recompute FLOPs");
  }
  return op_segment;
}

/// Who keeps each storage, and for how long: ops outside recomputed segments from the forward
/// pass on (global), a checkpoint its segment's inputs (global, held by every op of the segment),
/// segment ops only while their segment is recomputed (local). Selective recomputation keeps no
/// output of a recomputed run either: an op after it that keeps one has it recomputed for its
/// own backward (local to that op).
void mark_saves(const OpGraph& g, Index& ix, const std::vector<std::int64_t>& op_segment, const MemoryLedger& l) {
  auto save = [&](std::size_t s, std::size_t op, bool global) {
    Storage& st = ix.storages[s];
    st.saved = true;
    st.first_saver = std::min(st.first_saver, op);
    if (global) {
      st.global = true;
      st.first_global_saver = std::min(st.first_global_saver, op);
      push_unique(st.global_savers, op);
    } else {
      push_unique(st.local_savers, op);
    }
  };
  for (Storage& st : ix.storages) st.segment = st.producer == kNoOp ? -1 : op_segment[st.producer];
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::size_t t : ix.op_in[i]) {
      for (std::size_t r : ix.tensors[t].roots) {
        if (ix.storages[r].segment == op_segment[i]) continue;
        ix.storages[r].escapes = true;
        if (op_segment[i] < 0) continue;
        const CheckpointSegment& seg = l.segments[static_cast<std::size_t>(op_segment[i])];
        for (std::size_t k = seg.first_op; k <= seg.last_op; ++k) save(r, k, true);
      }
    }
  }
  for (std::size_t out : ix.outputs) {
    for (std::size_t r : ix.tensors[out].roots) ix.storages[r].escapes = true;
  }
  const bool selective = l.options.checkpoint.kind == CheckpointKind::kSelective;
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::size_t s : ix.keeps[i]) {
      const bool recomputed_output = selective && ix.storages[s].segment >= 0;
      save(s, i, op_segment[i] < 0 && !recomputed_output);
    }
  }
}

}  // namespace

MemoryLedger memory_ledger(const OpGraph& g, const TrainingOptions& options) {
  MemoryLedger l;
  l.model = g.name();
  l.batch = g.batch();
  l.options = options;
  count_parameters(g, l);
  Index ix = training::build_index(g, graph_precision(options));
  collect_keeps(g, ix, l);
  const std::vector<std::int64_t> op_segment = choose_segments(g, ix, l);
  mark_saves(g, ix, op_segment, l);
  {  // every sum of storages and gradients below fits in 64 bits from here on
    std::uint64_t total = 0;
    for (const Storage& st : ix.storages) total = checked_add(total, st.bytes, "activation bytes");
    for (const training::Tensor& t : ix.tensors) total = checked_add(total, t.grad_bytes, "activation bytes");
  }
  ActivationMemory& a = l.activations;
  std::vector<std::size_t> saved;  // storages someone keeps, in first-saver order
  for (std::size_t s = 0; s < ix.storages.size(); ++s) {
    if (ix.storages[s].saved) saved.push_back(s);
  }
  std::stable_sort(saved.begin(), saved.end(), [&](std::size_t x, std::size_t y) {
    return ix.storages[x].first_saver < ix.storages[y].first_saver;
  });
  std::vector<std::size_t> listed(ix.storages.size(), kNoOp);
  for (std::size_t s : saved) {
    const Storage& st = ix.storages[s];
    const bool graph_input = st.producer == kNoOp;
    listed[s] = l.saved.size();
    l.saved.push_back({st.name, st.kind, st.bytes, st.first_saver, graph_input, st.global});
    if (st.global) {
      a.saved_bytes += st.bytes;
      if (graph_input) a.saved_graph_input_bytes += st.bytes;
      l.ops[st.first_global_saver].saved_bytes += st.bytes;
    } else if (st.segment >= 0) {
      l.segments[static_cast<std::size_t>(st.segment)].recompute_saved_bytes += st.bytes;
    }
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::size_t s : ix.keeps[i]) l.ops[i].keeps.push_back(listed[s]);
  }
  training::activation_bounds(g, ix, op_segment, l);

  if (options.precision != Precision::kFp32 && options.autocast) {
    l.notes.push_back(fmt::format(
        "{} as torch.autocast runs it: parameters, gradients and optimizer state fp32 (the parameters are the master "
        "weights); activations in the dtypes the captured graph holds, autocast's casts of the parameters among them",
        precision_name(options.precision)));
  } else if (options.precision != Precision::kFp32) {
    l.notes.push_back(
        fmt::format("{}: fp32 activations and their gradients are counted at 2 bytes; statistics stay fp32",
                    precision_name(options.precision)));
  }
  if (a.saved_graph_input_bytes > 0) {
    l.notes.push_back(fmt::format("graph inputs kept by the ops that read them count as saved activations ({})",
                                  memory_size_string(a.saved_graph_input_bytes)));
  }
  if (!l.unknown_saves.empty()) {
    l.notes.push_back(fmt::format("{} op(s) keep tensors the ledger does not know: the lower bound misses them",
                                  l.unknown_saves.size()));
  }
  return l;
}

}  // namespace neuralcost
