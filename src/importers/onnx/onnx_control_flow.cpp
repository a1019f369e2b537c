// ONNX control flow to op records (onnx_node_records.hpp): Loop and Scan bodies become a kLoop
// record's sub-graph, counted per iteration; If's branch when its condition is a known constant.
#include <fmt/format.h>

#include "importers/onnx/onnx_node_records.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::onnx_import {

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t fallback) {
  const auto* a = attr(n, name);
  return a && a->has_i() ? a->i() : fallback;
}
Ints attr_ints(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = attr(n, name);
  return a ? Ints(a->ints().begin(), a->ints().end()) : Ints{};
}
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback) {
  const auto* a = attr(n, name);
  return a && a->has_s() ? a->s() : fallback;
}

const onnx::GraphProto* graph_attribute(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = attr(n, name);
  return a && a->has_g() ? &a->g() : nullptr;
}

namespace {
constexpr int kMaxSubgraphDepth = 8;
}  // namespace

std::vector<OpRecord> repeated(const onnx::NodeProto& n, const ModelContext& c, const onnx::GraphProto& body,
                               std::int64_t iterations, const std::string& approximation) {
  Builder b(n, c);
  if (c.depth >= kMaxSubgraphDepth)
    return one(b.unknown(fmt::format("subgraphs nested deeper than {}", kMaxSubgraphDepth)));
  if (iterations < 0) return one(b.unknown(fmt::format("{} iterations", iterations)));
  OpRecord r = b.make(OpKind::kLoop, {}, true);
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  ModelContext inner = c;  // the outer graph's values stay visible to the body (ONNX scoping)
  inner.depth = c.depth + 1;
  inner.graph_outputs.clear();
  for (const auto& o : body.output()) inner.graph_outputs.insert(o.name());
  add_values(body, inner);
  find_constants(body, {}, inner);
  auto graph = std::make_shared<OpGraph>(n.name().empty() ? n.op_type() + " body" : n.name() + " body");
  r.parameters.clear();
  try {
    for (int i = 0; i < body.node_size(); ++i) {
      for (OpRecord& op : map_node(body.node(i), static_cast<std::size_t>(i), inner)) {
        if (op.kind == OpKind::kUnknown) {
          return one(b.unknown(fmt::format("body op '{}' ({}): {}", op.name, op.source_type,
                                           op.attributes.get_string("reason", "not modeled"))));
        }
        for (const ParameterDesc& p : op.parameters) r.parameters.push_back(p);
        graph->add(std::move(op));
      }
    }
    graph->finalize();
  } catch (const Error& e) {
    return one(b.unknown(fmt::format("its body: {}", e.what())));
  }
  r.body = std::move(graph);
  r.attributes.set("iterations", iterations);
  if (!approximation.empty()) r.attributes.set("approximation", approximation);
  return one(std::move(r));
}

std::vector<OpRecord> scan(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  const auto* body = graph_attribute(n, "body");
  if (!body) return one(b.unknown("Scan without a body"));
  if (c.opset < 9) return one(b.unknown("Scan before opset 9 (with a batch dimension) is not modeled"));
  const std::int64_t m = attr_int(n, "num_scan_inputs", 0);
  if (m < 1 || m > n.input_size()) return one(b.unknown("Scan needs num_scan_inputs between 1 and its inputs"));
  const int first = n.input_size() - static_cast<int>(m);
  const Shape* x = b.shape_of(first);
  if (!x) return one(b.make(OpKind::kLoop));  // unknown, naming the missing shape
  const Ints axes = attr_ints(n, "scan_input_axes");
  std::int64_t axis = axes.empty() ? 0 : axes[0];
  if (axis < 0) axis += static_cast<std::int64_t>(x->size());
  if (axis < 0 || axis >= static_cast<std::int64_t>(x->size()))
    return one(b.unknown("scan axis outside the input's rank"));
  return repeated(n, c, *body, (*x)[static_cast<std::size_t>(axis)], "");
}

std::vector<OpRecord> loop(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  const auto* body = graph_attribute(n, "body");
  if (!body) return one(b.unknown("Loop without a body"));
  const std::string trips = n.input_size() > 0 ? n.input(0) : "";
  const auto known = trips.empty() ? c.int_values.end() : c.int_values.find(trips);
  if (known == c.int_values.end() || known->second.size() != 1 || known->second[0] < 0) {
    return one(
        b.unknown("Loop's trip count M is not known before it runs (a while loop): its iterations cannot be counted"));
  }
  const bool condition = n.input_size() > 1 && !n.input(1).empty();
  return repeated(n, c, *body, known->second[0],
                  condition ? fmt::format("Loop counted at its trip count M = {}; its condition may end it sooner",
                                          known->second[0])
                            : "");
}

}  // namespace neuralcost::onnx_import
