// Captured ops to an op graph: each op goes to its framework's table by name prefix.
#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"

namespace neuralcost::capture {
namespace {

const HandlerTable* table_for(const std::string& name) {
  if (name.rfind("jax::", 0) == 0) return &jax_handlers();
  if (name.rfind("tf::", 0) == 0) return &tf_handlers();
  return &aten_handlers();
}

}  // namespace

OpGraph graph_from_captured(const std::vector<CapturedOp>& calls, const std::string& graph_name) {
  OpGraph graph(graph_name);
  for (std::size_t e = 0; e < calls.size(); ++e) {
    const CapturedOp& call = calls[e];
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
