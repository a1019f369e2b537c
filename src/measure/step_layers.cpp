// Rows of a measured training step (see step_layers.hpp).
#include "measure/step_layers.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost {
namespace {

std::string_view phase_of(Pass pass) {
  switch (pass) {
    case Pass::kForward:
    case Pass::kRecompute: return "forward";
    case Pass::kInputGradient:
    case Pass::kWeightGradient: return "backward";
    case Pass::kOptimizer: return "optimizer";
  }
  return "forward";
}

/// Adds record `r` to `l`: its counts, lower bound and, when its bound is the largest, its roof.
void add_record(LayerMeasurement& l, const OpRoofline& r, double& largest) {
  l.records.push_back(r.op_index);
  l.flops += r.cost.flops;
  l.bytes += r.cost.bytes();
  l.lower_bound_seconds += r.lower_bound_seconds;
  l.modeled = l.modeled && r.cost.modeled;
  if (r.lower_bound_seconds > largest) largest = r.lower_bound_seconds, l.bound = r.bound;
}

/// `inner` is `outer` or inside it: "encoder0.norm1" in "encoder0"; everything in "".
bool holds(const std::string& outer, const std::string& inner) {
  return outer.empty() || inner == outer || inner.rfind(outer + ".", 0) == 0;
}

/// The module whose forward or backward runs `op` (the rule of step_layers.hpp).
std::string step_module(const OpGraph& g, const OpRecord& op, int depth = 0) {
  const Pass pass = pass_of(op);
  if (pass == Pass::kOptimizer) return "";
  const bool backward = pass == Pass::kInputGradient || pass == Pass::kWeightGradient;
  if (backward && !op.differentiates && !op.outputs.empty() && depth < 2) {
    // a sum of partial gradients writes "grad:<tensor>" ("grad:param:<id>" for a weight's)
    std::string tensor = op.outputs.front().name;
    if (tensor.rfind("grad:", 0) == 0) tensor.erase(0, 5);
    if (tensor.rfind("param:", 0) == 0) {
      const std::size_t dot = tensor.rfind('.');
      return dot == std::string::npos || dot <= 6 ? "" : tensor.substr(6, dot - 6);
    }
    const std::optional<std::size_t> producer = g.producer(tensor);
    return producer ? step_module(g, g.op(*producer), depth + 1) : "";
  }
  const OpRecord& forward = op.differentiates ? *op.differentiates : op;
  if (forward.kind == OpKind::kLoss) return "loss";
  return forward.attributes.get_string("module", "");
}

/// The kind and output shape of a row: those of the op its record with the largest lower bound
/// runs ("conv"; "conv backward" for a gradient of a conv, the conv's output shape; the
/// optimizer's row has no one shape); "none" without records.
void describe(LayerMeasurement& l, const Analysis& a) {
  const OpRoofline* top = nullptr;
  for (std::size_t i : l.records) {
    if (!top || a.ops[i].lower_bound_seconds > top->lower_bound_seconds) top = &a.ops[i];
  }
  if (!top) {
    l.kind = "none";
    return;
  }
  const OpRecord& op = a.graph.op(top->op_index);
  const OpRecord& of = op.differentiates ? *op.differentiates : op;
  l.kind = std::string(op_kind_name(of.kind)) + (op.differentiates ? " backward" : "");
  if (!of.outputs.empty() && l.pass != "optimizer") l.output_shape = shape_string(of.outputs.front().shape);
}

}  // namespace

std::vector<LayerMeasurement> measure_phases(const Analysis& a, const LayerTiming& t) {
  std::vector<LayerMeasurement> layers(t.event_names.size());
  for (std::size_t e = 0; e < layers.size(); ++e) {
    layers[e].event = e;
    layers[e].name = "step: " + t.event_names[e];
    layers[e].kind = "step phase";
    if (!t.seconds[e].empty()) layers[e].profiled_seconds = median(t.seconds[e]);
  }
  std::vector<double> largest(layers.size(), -1);
  for (const OpRoofline& r : a.ops) {
    const std::string_view phase = phase_of(pass_of(a.graph.op(r.op_index)));
    const auto it = std::find(t.event_names.begin(), t.event_names.end(), phase);
    if (it == t.event_names.end()) {
      throw Error(ErrorCode::kInternal, fmt::format("the backend timed no '{}' phase of the step", phase));
    }
    const auto e = static_cast<std::size_t>(it - t.event_names.begin());
    add_record(layers[e], r, largest[e]);
  }
  return layers;
}

std::vector<LayerMeasurement> measure_step_layers(const Analysis& a, const LayerTiming& t,
                                                  std::vector<std::string>& warnings) {
  if (t.event_modules.size() != t.event_names.size()) {
    throw Error(ErrorCode::kInternal, "the backend's step events and their modules differ in number");
  }
  std::vector<LayerMeasurement> layers;
  std::map<std::pair<std::string, std::string>, std::size_t> row;  // (phase, module) -> layer
  const auto add_row = [&](const std::string& phase, const std::string& module) {
    LayerMeasurement l;
    l.event = layers.size();
    l.pass = phase;
    l.module = module;
    l.name = phase;
    row[{phase, module}] = layers.size();
    layers.push_back(std::move(l));
    return layers.size() - 1;
  };
  for (std::size_t e = 0; e < t.event_names.size(); ++e) {
    const std::string& phase = t.event_names[e];
    if (phase != "forward" && phase != "backward" && phase != "optimizer") {
      throw Error(ErrorCode::kInternal, fmt::format("the backend timed a step phase '{}' (phases: forward, backward, "
                                                    "optimizer)",
                                                    phase));
    }
    if (row.count({t.event_names[e], t.event_modules[e]})) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("the backend timed '{}: {}' twice in one step", t.event_names[e], t.event_modules[e]));
    }
    const std::size_t i = add_row(t.event_names[e], t.event_modules[e]);
    if (!t.seconds[e].empty()) layers[i].profiled_seconds = median(t.seconds[e]);
  }
  const std::size_t timed = layers.size();
  std::vector<std::string> untimed;
  std::vector<double> largest;
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    const std::string phase(phase_of(pass_of(op)));
    const std::string module = step_module(a.graph, op);
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < timed; ++i) {
      const LayerMeasurement& l = layers[i];
      if (l.pass == phase && holds(l.module, module) && (!best || l.module.size() > layers[*best].module.size()))
        best = i;
    }
    if (!best) {
      const auto it = row.find({phase, module});
      best = it != row.end() ? it->second : add_row(phase, module);
      if (it == row.end()) untimed.push_back(module.empty() ? phase : phase + ": " + module);
    }
    largest.resize(layers.size(), -1);
    add_record(layers[*best], r, largest[*best]);
  }
  if (!untimed.empty()) {
    warnings.push_back(
        fmt::format("the backend timed no event for {} (their rows have no time: it is in the "
                    "unattributed rest)",
                    fmt::join(untimed, ", ")));
  }
  std::vector<LayerMeasurement> kept;
  for (const LayerMeasurement& l : layers) {
    const bool container = std::any_of(layers.begin(), layers.end(), [&](const LayerMeasurement& o) {
      return o.pass == l.pass && o.module != l.module && holds(l.module, o.module);
    });
    if (!l.records.empty() || !container) kept.push_back(l);
  }
  for (LayerMeasurement& l : kept) describe(l, a);
  return kept;
}

}  // namespace neuralcost
