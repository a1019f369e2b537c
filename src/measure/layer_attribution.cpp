// Layers of a measured forward pass: each framework op's records, FLOPs, bytes, lower bound and
// the module users know it by (see profile.hpp, LayerMeasurement).
#include "measure/layer_attribution.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost {
namespace {
/// The longest dotted prefix common to `names` ("encoder0.norm1", "encoder0.linear1" ->
/// "encoder0"); "" when they share none.
std::string common_prefix(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string prefix = names.front();
  for (const std::string& n : names) {
    std::size_t i = 0;
    while (i < prefix.size() && i < n.size() && prefix[i] == n[i]) ++i;
    // cut back to a whole component: "block1" and "block10" share no "block1"
    const bool whole = (i == prefix.size() || prefix[i] == '.') && (i == n.size() || n[i] == '.');
    if (!whole) {
      const std::size_t dot = i == 0 ? std::string::npos : prefix.rfind('.', i - 1);
      i = dot == std::string::npos ? 0 : dot;
    }
    prefix.resize(i);
  }
  return prefix;
}

/// The distinct names of `names` in order, joined by "+" ("stage0.relu+stage0.bn"), at most
/// three and then how many more.
std::string joined(const std::vector<std::string>& names) {
  std::vector<std::string> distinct;
  for (const std::string& n : names) {
    if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
  }
  std::string out;
  for (std::size_t i = 0; i < distinct.size() && i < 3; ++i) out += (i ? "+" : "") + distinct[i];
  if (distinct.size() > 3) out += fmt::format("+{} more", distinct.size() - 3);
  return out;
}

/// The module of the weights a record reads: "block0.linear" from block0.linear.weight/bias.
std::string module_of_parameters(const OpRecord& op) {
  std::vector<std::string> modules;
  for (const ParameterDesc& p : op.parameters) {
    const std::size_t dot = p.id.rfind('.');
    if (dot != std::string::npos && dot > 0) modules.push_back(p.id.substr(0, dot));
  }
  return common_prefix(modules);
}

/// Names, kinds and output shapes of the layers, from their records (see LayerMeasurement).
void describe_layers(std::vector<LayerMeasurement>& layers, const OpGraph& graph, const LayerTiming& t) {
  for (LayerMeasurement& l : layers) {
    std::vector<std::string> modules;
    std::vector<std::string> weights;
    bool every_record_has_weights = true;
    l.kind = l.records.empty() ? "none" : "";
    for (std::size_t i : l.records) {
      const OpRecord& op = graph.op(i);
      const std::string module = op.attributes.get_string("module", "");
      if (!module.empty()) modules.push_back(module);
      const std::string w = module_of_parameters(op);
      if (!w.empty()) weights.push_back(w);
      every_record_has_weights = every_record_has_weights && !w.empty();
      const std::string kind(op_kind_name(op.kind));
      l.kind = l.kind.empty() || l.kind == kind ? kind : "fused";
      if (!op.outputs.empty()) l.output_shape = shape_string(op.outputs.front().shape);
    }
    if (l.event < t.event_modules.size() && !t.event_modules[l.event].empty()) {
      l.module = t.event_modules[l.event];
    } else if (!modules.empty()) {
      l.module = common_prefix(modules);
      if (l.module.empty()) l.module = joined(modules);  // a kernel that fused unrelated layers
    }
    // the weights name a module inside the scope more precisely (encoder0 -> encoder0.linear1),
    // unless some record reads none: a kernel that fused block0.linear with block0.relu is
    // block0, not block0.linear
    const std::string w = common_prefix(weights);
    if (l.module.empty() || (every_record_has_weights && w.rfind(l.module + ".", 0) == 0)) l.module = w;
  }
}

}  // namespace

std::vector<LayerMeasurement> measure_layers(const Analysis& a, const LayerTiming& t) {
  std::vector<LayerMeasurement> layers(t.event_names.size());
  for (std::size_t e = 0; e < layers.size(); ++e) {
    layers[e].event = e;
    layers[e].name = t.event_names[e];
    if (!t.seconds[e].empty()) layers[e].profiled_seconds = median(t.seconds[e]);
  }
  std::vector<double> largest(layers.size(), -1);
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    const std::int64_t event = op.attributes.get_int("event", -1);
    if (t.kernel_events && event < 0) continue;  // no kernel ran it: unattributed
    const auto e = static_cast<std::size_t>(event);
    if (e >= layers.size()) {
      throw Error(ErrorCode::kInternal, fmt::format("op '{}' belongs to framework op #{}, but the profiler saw {} ops",
                                                    op.name, e, layers.size()));
    }
    LayerMeasurement& l = layers[e];
    if (!t.kernel_events && l.name != op.source_type) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("profiled op #{} is '{}' but the captured op is '{}': the runs differ", e, l.name,
                              op.source_type));
    }
    l.records.push_back(r.op_index);
    l.flops += r.cost.flops;
    l.bytes += r.cost.bytes();
    l.lower_bound_seconds += r.lower_bound_seconds;
    l.modeled = l.modeled && r.cost.modeled;
    if (r.lower_bound_seconds > largest[e]) largest[e] = r.lower_bound_seconds, l.bound = r.bound;
  }
  describe_layers(layers, a.graph, t);
  return layers;
}

}  // namespace neuralcost
