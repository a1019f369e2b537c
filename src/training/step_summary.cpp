// Step analyses read per forward op and per pass (training/step_summary.hpp).
#include "neuralcost/training/step_summary.hpp"

#include <map>

#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost {
namespace {

void add(StepWork& work, const OpRoofline& r) {
  work.flops += r.cost.flops;
  work.contraction_flops += r.cost.contraction_flops;
  work.bytes += r.cost.bytes();
  work.lower_bound_seconds += r.lower_bound_seconds;
  work.records += 1;
}

/// The forward op a step record belongs to: itself, the op its gradient differentiates, the
/// producer of the tensor whose gradients an accumulation sums ("grad:<tensor>/sum"), or the
/// op a recomputation repeats ("<op>/recompute", "<op>/recompute2", ...).
std::string owner(const OpRecord& op, const std::map<std::string, std::string>& producer_of) {
  if (op.differentiates != nullptr) return op.differentiates->name;
  const auto slash = op.name.rfind("/recompute");
  if (pass_of(op) == Pass::kRecompute && slash != std::string::npos) return op.name.substr(0, slash);
  if (op.name.rfind("grad:", 0) == 0 && op.name.size() > 9 && op.name.compare(op.name.size() - 4, 4, "/sum") == 0) {
    const std::string tensor = op.name.substr(5, op.name.size() - 9);
    const auto it = producer_of.find(tensor);
    if (it != producer_of.end()) return it->second;
    return tensor.rfind("param:", 0) == 0 ? std::string("(parameter gradients)") : tensor;
  }
  return op.name;
}

}  // namespace

StepSummary summarize_step(const Analysis& step) {
  StepSummary s;
  std::map<std::string, std::size_t> row_of;
  std::map<std::string, std::string> producer_of;
  for (const OpRoofline& r : step.ops) {
    const OpRecord& op = step.graph.op(r.op_index);
    if (pass_of(op) != Pass::kForward) continue;
    row_of.emplace(op.name, s.ops.size());
    s.ops.push_back({op.name, std::string(op_kind_name(op.kind)), {}, {}, {}, true});
    for (const TensorDesc& t : op.outputs) producer_of[t.name] = op.name;
  }
  std::map<Pass, StepWork> passes;
  for (const OpRoofline& r : step.ops) {
    const OpRecord& op = step.graph.op(r.op_index);
    const Pass pass = pass_of(op);
    add(passes[pass], r);
    if (pass == Pass::kOptimizer) {
      add(s.optimizer, r);
      s.optimizer_parameters += 1;
      continue;
    }
    const std::string name = owner(op, producer_of);
    auto it = row_of.find(name);
    if (it == row_of.end()) {
      it = row_of.emplace(name, s.ops.size()).first;
      s.ops.push_back({name, "", {}, {}, {}, true});
    }
    StepOpRow& row = s.ops[it->second];
    switch (pass) {
      case Pass::kForward:
      case Pass::kRecompute: add(row.forward, r); break;
      case Pass::kInputGradient: add(row.input_gradient, r); break;
      case Pass::kWeightGradient: add(row.weight_gradient, r); break;
      case Pass::kOptimizer: break;
    }
    if (!r.cost.modeled) {
      row.modeled = false;
      if (pass == Pass::kInputGradient || pass == Pass::kWeightGradient) {
        bool listed = false;
        for (const auto& [n, why] : s.unmodeled_gradients) listed = listed || n == name;
        if (!listed) s.unmodeled_gradients.emplace_back(name, r.cost.unmodeled_reason);
      }
    }
  }
  for (Pass p : {Pass::kForward, Pass::kRecompute, Pass::kInputGradient, Pass::kWeightGradient, Pass::kOptimizer}) {
    if (passes.count(p)) s.passes.push_back({p, passes.at(p)});
  }
  return s;
}

}  // namespace neuralcost
