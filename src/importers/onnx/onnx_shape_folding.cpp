// Shape inference for the ONNX importer: one sweep in node order that calls ONNX's per-op
// inference functions, folds the small integer tensors exporters compute from shapes
// (Shape -> Gather -> Div -> Concat -> Reshape, as PyTorch writes attention) and hands them to
// the next ops as constant input data. ONNX 1.12's own InferShapes propagates such values only
// through some ops (not Div, not into Slice): with it a transformer exported with a symbolic
// batch lost every shape after its first attention block. Driving the ops one by one also
// lets the importer reject, before ONNX reads them, the inputs on which ONNX 1.12's inference
// crashes (zero strides, conv ranks that disagree: found by tests/fuzz).
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "importers/onnx/onnx_constant_folding.hpp"
#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::onnx_import {
namespace {

using onnx::TensorProto;

bool fully_static(const onnx::TypeProto* t) { return static_shape(t).has_value(); }

/// ONNX 1.12's checker accepts, and its shape inference then divides by, a zero stride,
/// dilation or group (found by tests/fuzz): reject those first, in subgraphs too.
void reject_what_inference_divides_by(const onnx::GraphProto& graph, const std::string& path) {
  static const std::set<std::string> positive = {"strides", "dilations", "kernel_shape", "group", "blocksize"};
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) reject_what_inference_divides_by(a.g(), path);
      for (const auto& g : a.graphs()) reject_what_inference_divides_by(g, path);
      if (!positive.count(a.name())) continue;
      std::vector<std::int64_t> values(a.ints().begin(), a.ints().end());
      if (a.type() == onnx::AttributeProto::INT) values.push_back(a.i());
      for (std::int64_t v : values) {
        if (v <= 0) {
          throw Error(
              ErrorCode::kInvalidArgument,
              fmt::format("{}: node '{}' ({}): attribute '{}' has {}; it must be positive", path,
                          node.name().empty() ? fmt::format("#{}", i) : node.name(), node.op_type(), a.name(), v));
        }
      }
    }
  }
}

/// Conv-family inference in ONNX 1.12 reads the weight's spatial dims at the input's indices:
/// an input of another rank than the weight is an out-of-bounds read (found by tests/fuzz).
void reject_rank_mismatch(const onnx::NodeProto& node, const std::unordered_map<std::string, onnx::TypeProto*>& types,
                          std::size_t index, const std::string& path) {
  static const std::map<std::string, std::pair<int, int>> operands = {
      {"Conv", {0, 1}}, {"ConvInteger", {0, 1}}, {"ConvTranspose", {0, 1}}, {"QLinearConv", {0, 3}}};
  const auto it = operands.find(node.op_type());
  if (it == operands.end() || node.input_size() <= it->second.second) return;
  auto rank = [&](int i) -> int {
    const auto t = types.find(node.input(i));
    if (t == types.end() || !t->second->has_tensor_type() || !t->second->tensor_type().has_shape()) return -1;
    return t->second->tensor_type().shape().dim_size();
  };
  const int x = rank(it->second.first), w = rank(it->second.second);
  if (x >= 0 && w >= 0 && (x != w || x < 3)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: node '{}' ({}): input '{}' has rank {} but weight '{}' has rank {} (both must be "
                            "N x C x spatial...)",
                            path, node.name().empty() ? fmt::format("#{}", index) : node.name(), node.op_type(),
                            node.input(it->second.first), x, node.input(it->second.second), w));
  }
}

/// Keeps the better of what the model declared and what inference found for a value.
bool better(const onnx::TypeProto& inferred, const onnx::TypeProto* declared) {
  if (fully_static(&inferred)) return true;
  if (!declared || fully_static(declared)) return false;
  const bool has = inferred.has_tensor_type() && inferred.tensor_type().has_shape();
  return has && !(declared->has_tensor_type() && declared->tensor_type().has_shape());
}

/// The inference sweep (see the file comment); updates the model's value_info and outputs and
/// returns the folded values. `progress` is set to each node's index before ONNX reads it.
/// Einsum's output dims by our own rule: ONNX 1.12's inference gives it a rank but no dims,
/// which would leave every op after it unknown.
void einsum_shape(const onnx::NodeProto& node, std::unordered_map<std::string, onnx::TypeProto*>& types,
                  std::deque<onnx::TypeProto>& owned, std::set<std::string>& inferred) {
  if (node.output_size() != 1 || node.output(0).empty()) return;
  const auto known = types.find(node.output(0));
  if (known != types.end() && static_shape(known->second)) return;
  std::vector<Shape> operands;
  int elem_type = 0;
  for (const auto& name : node.input()) {
    const auto t = types.find(name);
    const auto shape = static_shape(t == types.end() ? nullptr : t->second);
    if (!shape) return;
    operands.push_back(*shape);
    if (elem_type == 0) elem_type = t->second->tensor_type().elem_type();
  }
  Shape out;
  try {
    std::string equation;
    for (const auto& a : node.attribute()) {
      if (a.name() == "equation") equation = a.s();
    }
    out = einsum_output_shape(equation, operands);
  } catch (const Error&) {
    return;  // the cost model reports the malformed equation on the record
  }
  owned.emplace_back();
  auto* tensor = owned.back().mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  for (std::int64_t d : out) tensor->mutable_shape()->add_dim()->set_dim_value(d);
  types[node.output(0)] = &owned.back();
  inferred.insert(node.output(0));
}

std::vector<TensorProto> sweep(onnx::ModelProto& model, std::int64_t opset, const std::string& path,
                               std::int64_t& progress) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::unordered_map<std::string, onnx::TypeProto*> types;
  std::deque<onnx::TypeProto> owned;  // types of initializers and of values inference finds
  for (auto* list : {g.mutable_input(), g.mutable_value_info(), g.mutable_output()}) {
    for (auto& vi : *list) types[vi.name()] = vi.mutable_type();
  }
  std::unordered_map<std::string, const TensorProto*> data;
  std::unordered_map<std::string, IntTensor> values;
  std::deque<TensorProto> folded;
  for (const auto& t : g.initializer()) {
    data[t.name()] = &t;
    if (auto v = from_proto(t)) values[t.name()] = std::move(*v);
    if (!types.count(t.name())) {
      owned.emplace_back();
      owned.back().mutable_tensor_type()->set_elem_type(t.data_type());
      for (std::int64_t d : t.dims()) owned.back().mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
      types[t.name()] = &owned.back();
    }
  }
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : model.opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  onnx::shape_inference::SymbolTableImpl symbols;
  symbols.addFromGraph(g);
  std::unordered_map<std::string, onnx::TensorShapeProto> shape_data;
  onnx::shape_inference::GraphInferenceContext subgraphs(types, opsets, &symbols, {},
                                                         onnx::OpSchemaRegistry::Instance(), &shape_data,
                                                         static_cast<int>(model.ir_version()));
  const std::unordered_map<std::string, const onnx::SparseTensorProto*> no_sparse;
  std::set<std::string> inferred;
  for (int index = 0; index < g.node_size(); ++index) {
    progress = index;
    auto& node = *g.mutable_node(index);
    const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    const auto* schema = standard ? onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset)) : nullptr;
    if (schema) reject_rank_mismatch(node, types, static_cast<std::size_t>(index), path);
    try {
      onnx::shape_inference::InferenceContextImpl ctx(node, types, data, no_sparse, &shape_data, &subgraphs);
      if (schema && schema->has_type_and_shape_inference_function()) {
        schema->GetTypeAndShapeInferenceFunction()(ctx);
      } else if (schema && schema->HasFunction()) {
        onnx::shape_inference::InferShapeForFunctionNode(*schema->GetFunction(), onnx::OpSchemaRegistry::Instance(),
                                                         ctx, {}, {}, &symbols, &shape_data);
      }
      for (int i = 0; i < node.output_size(); ++i) {
        const std::string& o = node.output(i);
        const auto known = types.find(o);
        if (o.empty() || !better(ctx.allOutputTypes_[i], known == types.end() ? nullptr : known->second)) continue;
        owned.push_back(ctx.allOutputTypes_[i]);
        types[o] = &owned.back();
        inferred.insert(o);
      }
      if (schema && schema->has_data_propagation_function()) {
        onnx::shape_inference::DataPropagationContextImpl propagation(node, types, data, shape_data);
        schema->GetDataPropagationFunction()(propagation);
      }
    } catch (const std::exception&) {
      // as ONNX's own non-strict pass: this node's outputs stay unknown and are reported unmodeled
    }
    if (standard && node.op_type() == "Einsum") einsum_shape(node, types, owned, inferred);
    if (!standard || node.output_size() == 0 || node.output(0).empty()) continue;
    std::vector<const IntTensor*> in;
    std::vector<const onnx::TypeProto*> in_types;
    for (const auto& name : node.input()) {
      const auto it = values.find(name);
      in.push_back(it == values.end() ? nullptr : &it->second);
      const auto t = types.find(name);
      in_types.push_back(t == types.end() ? nullptr : t->second);
    }
    const std::string& out = node.output(0);
    const auto out_type = types.find(out);
    if (node.op_type() == "Constant" && node.attribute_size() == 1 && node.attribute(0).has_t() &&
        node.attribute(0).name() == "value" && !data.count(out)) {
      data[out] = &node.attribute(0).t();  // any dtype: Resize reads its float scales this way
    }
    if (auto v = evaluate(node, opset, in, in_types, out_type == types.end() ? nullptr : out_type->second)) {
      folded.push_back(to_proto(*v, out));
      data[out] = &folded.back();
      values[out] = std::move(*v);
    }
  }
  // what inference found goes into the model as value_info (or onto the graph outputs)
  for (auto* list : {g.mutable_value_info(), g.mutable_output()}) {
    for (auto& vi : *list) {
      if (inferred.erase(vi.name())) *vi.mutable_type() = *types[vi.name()];
    }
  }
  for (const auto& name : inferred) {
    auto* vi = g.add_value_info();
    vi->set_name(name);
    *vi->mutable_type() = *types[name];
  }
  return {folded.begin(), folded.end()};
}

}  // namespace

std::map<std::string, std::vector<std::int64_t>> infer_shapes(onnx::ModelProto& model, std::int64_t opset,
                                                              const std::string& path) {
  reject_what_inference_divides_by(model.graph(), path);
  // the child sends back, in a GraphProto used only as transport: the inferred value_info and
  // outputs, the folded values (as initializers), and the nodes whose subgraphs inference
  // filled in (doc_string: the node's index)
  const std::string reply = run_isolated(
      [&](std::int64_t& progress) {
        const std::vector<TensorProto> folded = sweep(model, opset, path, progress);
        onnx::GraphProto result;
        *result.mutable_value_info() = model.graph().value_info();
        *result.mutable_output() = model.graph().output();
        for (const TensorProto& t : folded) *result.add_initializer() = t;
        for (int i = 0; i < model.graph().node_size(); ++i) {
          const auto& node = model.graph().node(i);
          const bool subgraphs =
              std::any_of(node.attribute().begin(), node.attribute().end(),
                          [](const onnx::AttributeProto& a) { return a.has_g() || a.graphs_size(); });
          if (!subgraphs) continue;
          onnx::NodeProto* copy = result.add_node();
          *copy->mutable_attribute() = node.attribute();
          copy->set_doc_string(std::to_string(i));
        }
        return result.SerializeAsString();
      },
      [&](std::int64_t at, const std::string& how) {
        const bool node = at >= 0 && at < model.graph().node_size();
        const auto& n = node ? model.graph().node(static_cast<int>(at)) : onnx::NodeProto();
        return fmt::format(
            "{}: ONNX's shape inference (the ONNX library, not this tool) {} at node '{}' ({}); "
            "the model may still be valid: give every input dimension (--input, --dim) or simplify "
            "the node",
            path, how, n.name().empty() ? fmt::format("#{}", at) : n.name(), n.op_type());
      });
  onnx::GraphProto result;
  if (!result.ParseFromString(reply) || result.output_size() != model.graph().output_size()) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: shape inference returned an unreadable result", path));
  }
  onnx::GraphProto& g = *model.mutable_graph();
  g.mutable_value_info()->Swap(result.mutable_value_info());
  g.mutable_output()->Swap(result.mutable_output());
  for (const auto& node : result.node()) {
    const int index = std::atoi(node.doc_string().c_str());
    if (index >= 0 && index < g.node_size()) *g.mutable_node(index)->mutable_attribute() = node.attribute();
  }
  std::map<std::string, std::vector<std::int64_t>> folded;
  for (const auto& t : result.initializer()) {
    if (auto v = from_proto(t)) folded[t.name()] = v->values;
  }
  return folded;
}

std::optional<std::vector<std::int64_t>> small_int_values(const onnx::TensorProto& tensor) {
  auto v = from_proto(tensor);
  return v ? std::optional(v->values) : std::nullopt;
}

}  // namespace neuralcost::onnx_import
