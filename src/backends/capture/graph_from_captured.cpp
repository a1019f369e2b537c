// Captured ops to an op graph: each op goes to its framework's table by name prefix.
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"

namespace neuralcost::capture {
namespace {

const HandlerTable* table_for(const std::string& name) {
  if (name.rfind("jax::", 0) == 0) return &jax_handlers();
  if (name.rfind("tf::", 0) == 0) return &tf_handlers();
  return &aten_handlers();
}

bool is_recurrent(const std::string& name) {
  static const std::set<std::string> kRecurrent = {"aten::mkldnn_rnn_layer", "aten::lstm", "aten::gru",
                                                   "aten::rnn_tanh", "aten::rnn_relu"};
  return kRecurrent.count(name) > 0;
}

/// The parameter a call casts to another dtype (torch.autocast's aten::_to_copy of an fp32 weight
/// before a low-precision op).
std::optional<CapturedTensor> parameter_cast(const CapturedOp& call) {
  if (call.name != "aten::_to_copy" && call.name != "aten::to" && call.name != "aten::_autocast_to_reduced_precision") {
    return std::nullopt;
  }
  const CapturedTensor* in = tensor_at(call, 0);
  if (!in || !in->parameter || in->buffer || call.outputs.empty() ||
      call.outputs[0].kind != CapturedValue::Kind::kTensor || call.outputs[0].tensors.size() != 1) {
    return std::nullopt;
  }
  const CapturedTensor& out = call.outputs[0].tensors[0];
  if (out.dtype == in->dtype || out.shape != in->shape) return std::nullopt;
  return *in;
}

/// Recurrent rules read their weights as parameters. Under torch.autocast a recurrent op reads
/// casts of them instead, so a cast read by recurrent ops only is folded into its readers: they
/// read the fp32 parameter itself (4 bytes a weight, where the cast reads 4 and writes 2 and the
/// op reads 2: fewer bytes, still a lower bound), and the cast's time and its copy's memory are
/// left out. Other casts stay ops of their own. Returns the folded casts' outputs, each as the
/// parameter its readers read instead.
std::map<std::string, CapturedTensor> recurrent_weight_casts(const std::vector<CapturedOp>& calls) {
  std::map<std::string, CapturedTensor> casts;  // cast output → the parameter in its dtype
  std::map<std::string, bool> foldable;         // read, and by recurrent ops only
  for (const CapturedOp& call : calls) {
    if (auto p = parameter_cast(call)) {
      casts[call.outputs[0].tensors[0].name] = *p;
      continue;
    }
    for (const CapturedValue& v : call.inputs) {
      for (const CapturedTensor& t : v.tensors) {
        if (!casts.count(t.name)) continue;
        auto [it, fresh] = foldable.emplace(t.name, true);
        it->second = it->second && is_recurrent(call.name);
      }
    }
  }
  std::map<std::string, CapturedTensor> folded;
  for (const auto& [name, only_recurrent] : foldable) {
    if (only_recurrent) folded.emplace(name, casts.at(name));
  }
  return folded;
}

}  // namespace

OpGraph graph_from_captured(const std::vector<CapturedOp>& calls, const std::string& graph_name) {
  const std::map<std::string, CapturedTensor> folded = recurrent_weight_casts(calls);
  OpGraph graph(graph_name);
  for (std::size_t e = 0; e < calls.size(); ++e) {
    if (!folded.empty()) {
      if (auto p = parameter_cast(calls[e]); p && folded.count(calls[e].outputs[0].tensors[0].name)) continue;
    }
    CapturedOp substituted;
    if (!folded.empty() && is_recurrent(calls[e].name)) {
      substituted = calls[e];
      for (CapturedValue& v : substituted.inputs) {
        for (CapturedTensor& t : v.tensors) {
          if (auto it = folded.find(t.name); it != folded.end()) t = it->second;
        }
      }
    }
    const CapturedOp& call = substituted.name.empty() ? calls[e] : substituted;
    const HandlerTable& table = *table_for(call.name);
    // TorchScript builtins ("chunk") wrap the ATen op of the same name
    auto it = table.find(call.name);
    if (it == table.end() && call.name.find("::") == std::string::npos) it = table.find("aten::" + call.name);
    std::vector<OpRecord> records = it != table.end() ? it->second(call) : one(record(call, OpKind::kUnknown));
    for (std::size_t k = 0; k < records.size(); ++k) {
      OpRecord& r = records[k];
      if (!call.module.empty()) {
        const bool part = records.size() > 1 && !r.name.empty();
        r.attributes.set("module", part ? call.module + "." + r.name : call.module);
      }
      const std::string base = fmt::format("{}:{}", e, call.name);
      r.name = records.size() == 1 ? base : fmt::format("{}.{}", base, r.name.empty() ? std::to_string(k) : r.name);
      r.attributes.set("event", call.event.value_or(static_cast<std::int64_t>(e)));
      graph.add(std::move(r));
    }
  }
  graph.finalize();
  return graph;
}

}  // namespace neuralcost::capture
