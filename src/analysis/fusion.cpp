// Fused lower bound. Rules (docs/counting.md, "Fused lower bound"):
//  - walking the ops in topological order, an elementwise, activation, softmax or
//    normalisation op joins the group of the op just before it when it reads a tensor that
//    group produced; anything else (its anchor: a matmul, conv, attention, ...) starts a group;
//  - so a group is a run of consecutive ops with at most one anchor, at its start. Consecutive
//    runs cannot depend on each other in a cycle, so every group is one schedulable kernel;
//  - views, unmodeled ops and everything else are groups of their own;
//  - a tensor stays on chip when its producer and all its consumers are in one group, no
//    consumer is the anchor (which reads from memory) and it is not a graph output.
#include "analysis/fusion.hpp"

#include <algorithm>
#include <set>

namespace neuralcost::detail {
namespace {

/// Bytes of the op's distinct outputs: what it writes unless its cost rule says otherwise.
std::uint64_t output_bytes(const OpRecord& op) {
  std::set<std::string> seen;
  std::uint64_t bytes = 0;
  for (const TensorDesc& t : op.outputs) {
    if (seen.insert(t.name).second) bytes += t.bytes();
  }
  return bytes;
}

bool fusible(const OpRecord& op, const OpCost& cost) { return cost.modeled && traits_of(op.kind).fusible; }

}  // namespace

std::vector<FusionGroup> fuse(const OpGraph& graph, const std::vector<OpRoofline>& ops, const HardwareSpec& hardware,
                              double resident_bytes, const std::vector<int>& regions) {
  const std::size_t n = graph.size();
  std::vector<FusionGroup> groups;
  std::vector<std::size_t> group_of(n);
  std::vector<bool> is_fusible(n);
  for (std::size_t i = 0; i < n; ++i) {
    is_fusible[i] = fusible(graph.op(i), ops[i].cost);
    bool joins = false;
    const bool same_region = regions.empty() || (i > 0 && regions.at(i) == regions.at(i - 1));
    if (is_fusible[i] && i > 0 && same_region && !is_view(graph.op(i - 1)) && ops[i - 1].cost.modeled) {
      for (const TensorDesc& t : graph.op(i).inputs) {
        const auto p = graph.producer(t.name);
        joins = joins || (p && group_of[*p] == group_of[i - 1]);
      }
    }
    if (!joins) groups.emplace_back();
    group_of[i] = groups.size() - 1;
    groups.back().ops.push_back(i);
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    FusionGroup& group = groups[g];
    const std::size_t first = group.ops.front();
    const bool anchored = !is_fusible[first];
    auto internal = [&](const std::string& tensor) {
      const auto p = graph.producer(tensor);
      if (!p || group_of[*p] != g || graph.is_output(tensor)) return false;
      for (std::size_t c : graph.consumers(tensor)) {
        if (group_of[c] != g || (anchored && c == first)) return false;
      }
      return true;
    };
    std::set<std::string> read, written, params;
    double compute_seconds = 0;
    double state = 0;  // weights and graph inputs the group reads (HardwareSpec::memory_seconds)
    for (std::size_t i : group.ops) {
      const OpRecord& op = graph.op(i);
      const OpCost& cost = ops[i].cost;
      group.flops += cost.flops;
      compute_seconds += ops[i].compute_seconds;
      if (is_view(op)) continue;
      if (anchored && i == first) {
        // the anchor reads exactly what its own cost says (slices and gathers read part of a tensor)
        group.bytes_read += cost.bytes_read;
        std::uint64_t own_state = cost.parameter_bytes;
        for (const TensorDesc& t : op.inputs) {
          read.insert(t.name);
          if (!graph.producer(t.name)) own_state += t.bytes();
        }
        state += static_cast<double>(std::min<std::uint64_t>(own_state, cost.bytes_read));
        for (const ParameterDesc& p : op.parameters) params.insert(p.id);
      } else {
        for (const TensorDesc& t : op.inputs) {
          if (!internal(t.name) && read.insert(t.name).second) {
            group.bytes_read += t.bytes();
            if (!graph.producer(t.name)) state += static_cast<double>(t.bytes());
          }
        }
        for (const ParameterDesc& p : op.parameters) {
          if (params.insert(p.id).second) group.bytes_read += p.bytes(), state += static_cast<double>(p.bytes());
        }
      }
      if (anchored && i == first && cost.bytes_written != output_bytes(op)) {
        // an op whose rule counts its own writes (a loop body run n times, an in-place update)
        // writes what its cost says
        group.bytes_written += cost.bytes_written;
        for (const TensorDesc& t : op.outputs) written.insert(t.name);
        continue;
      }
      for (const TensorDesc& t : op.outputs) {
        if (!internal(t.name) && written.insert(t.name).second) group.bytes_written += t.bytes();
      }
    }
    const double group_bytes = static_cast<double>(group.bytes_read + group.bytes_written);
    const double memory_seconds = hardware.memory_seconds(group_bytes, state, resident_bytes);
    group.lower_bound_seconds = std::max(compute_seconds, memory_seconds);
    group.bound = compute_seconds > memory_seconds ? Bound::kCompute : Bound::kMemory;
  }
  return groups;
}

}  // namespace neuralcost::detail
