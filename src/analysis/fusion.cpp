// Fused lower bound. Rules (docs/counting.md, "Fused lower bound"):
//  - elementwise, activation, softmax and normalisation ops fuse into the group that produced
//    one of their inputs; a group holds at most one other op (its anchor: a matmul, conv, ...);
//  - views, unmodeled ops and everything else start a group of their own;
//  - a tensor stays on chip when its producer and all its consumers are in one group, no
//    consumer is the anchor (which reads from memory) and it is not a graph output.
#include "analysis/fusion.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace neuralcost::detail {
namespace {

bool fusible(const OpRecord& op, const OpCost& cost) {
  if (!cost.modeled) return false;
  switch (op.kind) {
    case OpKind::kUnary: case OpKind::kBinary: case OpKind::kActivation: case OpKind::kSoftmax:
    case OpKind::kLayerNorm: case OpKind::kBatchNorm: case OpKind::kRmsNorm:
      return true;
    default:
      return false;
  }
}

bool is_view(const OpCost& cost) { return cost.bytes() == 0; }

struct UnionFind {
  std::vector<std::size_t> parent;
  std::vector<std::optional<std::size_t>> anchor;
  std::size_t find(std::size_t i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
};

}  // namespace

std::vector<FusionGroup> fuse(const OpGraph& graph, const std::vector<OpRoofline>& ops,
                              const HardwareSpec& hardware) {
  const std::size_t n = graph.size();
  UnionFind uf;
  uf.parent.resize(n);
  std::iota(uf.parent.begin(), uf.parent.end(), 0);
  uf.anchor.resize(n);
  std::vector<bool> is_fusible(n);
  for (std::size_t i = 0; i < n; ++i) {
    is_fusible[i] = fusible(graph.op(i), ops[i].cost);
    if (!is_fusible[i]) uf.anchor[i] = i;
  }
  for (std::size_t c = 0; c < n; ++c) {
    if (!is_fusible[c]) continue;
    for (const TensorDesc& t : graph.op(c).inputs) {
      const auto p = graph.producer(t.name);
      if (!p || is_view(ops[*p].cost) || !ops[*p].cost.modeled) continue;
      std::size_t a = uf.find(*p), b = uf.find(c);
      if (a == b || (uf.anchor[a] && uf.anchor[b])) continue;
      uf.parent[b] = a;
      if (!uf.anchor[a]) uf.anchor[a] = uf.anchor[b];
    }
  }
  std::map<std::size_t, std::size_t> group_of_root;
  std::vector<FusionGroup> groups;
  std::vector<std::size_t> group_of(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto [it, inserted] = group_of_root.emplace(uf.find(i), groups.size());
    if (inserted) groups.emplace_back();
    group_of[i] = it->second;
    groups[it->second].ops.push_back(i);
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    FusionGroup& group = groups[g];
    const auto anchor = uf.anchor[uf.find(group.ops.front())];
    auto internal = [&](const std::string& tensor) {
      const auto p = graph.producer(tensor);
      if (!p || group_of[*p] != g || graph.is_output(tensor)) return false;
      for (std::size_t c : graph.consumers(tensor)) {
        if (group_of[c] != g || (anchor && c == *anchor)) return false;
      }
      return true;
    };
    std::set<std::string> read, written, params;
    double compute_seconds = 0;
    // the anchor first, so that ops fused after it do not count its inputs again
    std::vector<std::size_t> order = group.ops;
    std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return !is_fusible[i]; });
    for (std::size_t i : order) {
      const OpRecord& op = graph.op(i);
      const OpCost& cost = ops[i].cost;
      group.flops += cost.flops;
      compute_seconds += ops[i].compute_seconds;
      if (is_view(cost)) continue;
      if (!is_fusible[i]) {
        // an anchor reads and writes exactly what its own cost says (slices, gathers, ...)
        group.bytes_read += cost.bytes_read;
        for (const TensorDesc& t : op.inputs) read.insert(t.name);
        for (const ParameterDesc& p : op.parameters) params.insert(p.id);
        for (const TensorDesc& t : op.outputs) {
          if (!internal(t.name) && written.insert(t.name).second) group.bytes_written += t.bytes();
        }
        continue;
      }
      for (const TensorDesc& t : op.inputs) {
        if (!internal(t.name) && read.insert(t.name).second) group.bytes_read += t.bytes();
      }
      for (const ParameterDesc& p : op.parameters) {
        if (params.insert(p.id).second) group.bytes_read += p.bytes();
      }
      for (const TensorDesc& t : op.outputs) {
        if (!internal(t.name) && written.insert(t.name).second) group.bytes_written += t.bytes();
      }
    }
    const double memory_seconds = static_cast<double>(group.bytes_read + group.bytes_written) /
                                  hardware.memory_bandwidth_bytes_per_second;
    group.lower_bound_seconds = std::max(compute_seconds, memory_seconds);
    group.bound = compute_seconds > memory_seconds ? Bound::kCompute : Bound::kMemory;
  }
  return groups;
}

}  // namespace neuralcost::detail
