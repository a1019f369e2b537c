// What the ONNX importer's node mappers share (onnx_ops.cpp, onnx_control_flow.cpp): attribute
// readers, the Builder that turns a node's operands into an op record, and the mappers of Loop,
// Scan and If bodies. Private to the importer.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/checked_math.hpp"

namespace neuralcost::onnx_import {

using Ints = std::vector<std::int64_t>;

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name);
std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t fallback);
Ints attr_ints(const onnx::NodeProto& n, const std::string& name);
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback);

/// Builds the record of a node: initializers become parameters, values with known shapes
/// tensors; a value whose shape is unknown makes the record unmodeled with the reason.
class Builder {
 public:
  Builder(const onnx::NodeProto& node, const ModelContext& ctx) : node_(node), ctx_(ctx) {}

  /// A record of `kind` from the inputs at `inputs` (all when empty), in that order. With
  /// `ordered` (products), only trailing initializers become parameters, so that operands
  /// keep their order (inputs first, then parameters, as the cost model reads them).
  OpRecord make(OpKind kind, const std::vector<int>& inputs = {}, bool all_outputs = false, bool ordered = false) {
    OpRecord r;
    r.kind = kind;
    r.source_type = node_.op_type();
    std::vector<int> order = inputs;
    if (order.empty()) {
      for (int i = 0; i < node_.input_size(); ++i) order.push_back(i);
    }
    std::vector<std::string> names;
    for (int i : order) {
      if (i < node_.input_size() && !node_.input(i).empty()) names.push_back(node_.input(i));
    }
    std::size_t first_param = names.size();
    while (ordered && first_param > 0 && ctx_.constant(names[first_param - 1])) --first_param;
    for (std::size_t i = 0; i < names.size(); ++i) add_operand(r, names[i], ordered && i < first_param);
    for (int i = 0; i < node_.output_size() && (all_outputs || i == 0); ++i) {
      if (node_.output(i).empty()) continue;
      const auto v = find(node_.output(i));
      if (!v) continue;
      r.outputs.push_back({node_.output(i), *v->shape, v->dtype});
    }
    if (!missing_.empty())
      return unknown(fmt::format("shape of '{}' could not be inferred ({})", missing_, missing_why_));
    if (r.outputs.empty()) return unknown("no output shape");
    // every count below is a product of dims: bound them (as the cost model bounds attributes)
    auto absurd = [](const Shape& shape) {
      return shape.size() > 16 || std::any_of(shape.begin(), shape.end(),
                                              [](std::int64_t d) { return d < 0 || d > (std::int64_t{1} << 40); });
    };
    for (const TensorDesc& t : r.inputs) {
      if (absurd(t.shape))
        return unknown(fmt::format("'{}' has shape {}: a negative or absurd dimension", t.name, shape_string(t.shape)));
    }
    for (const TensorDesc& t : r.outputs) {
      if (absurd(t.shape))
        return unknown(fmt::format("'{}' has shape {}: a negative or absurd dimension", t.name, shape_string(t.shape)));
    }
    for (const ParameterDesc& p : r.parameters) {
      if (absurd(p.shape))
        return unknown(fmt::format("'{}' has shape {}: a negative or absurd dimension", p.id, shape_string(p.shape)));
    }
    return r;
  }

  OpRecord unknown(const std::string& reason) const {
    OpRecord r;
    r.kind = OpKind::kUnknown;
    r.source_type = node_.op_type();
    r.attributes.set("reason", reason);
    // keep what is known, so its bytes still count and edges stay connected
    for (const auto& name : node_.input()) {
      const auto it = ctx_.values.find(name);
      if (name.empty() || it == ctx_.values.end() || !it->second.shape) continue;
      if (const auto* k = ctx_.constant(name)) {
        r.parameters.push_back({k->id, *it->second.shape, it->second.dtype, k->trainable});
      } else {
        r.inputs.push_back({name, *it->second.shape, it->second.dtype});
      }
    }
    for (const auto& name : node_.output()) {
      const auto it = ctx_.values.find(name);
      if (!name.empty() && it != ctx_.values.end() && it->second.shape) {
        r.outputs.push_back({name, *it->second.shape, it->second.dtype});
      }
    }
    return r;
  }

  const ValueInfo* find(const std::string& name) {
    const auto it = ctx_.values.find(name);
    if (it == ctx_.values.end() || !it->second.shape) {
      if (missing_.empty()) {
        missing_ = name;
        missing_why_ = it == ctx_.values.end()
                           ? "no type information"
                           : "symbolic dimension '" + it->second.unknown_dim + "': bind it with --dim or --input";
      }
      return nullptr;
    }
    return &it->second;
  }

  const Shape* shape_of(int input) {
    if (input >= node_.input_size() || node_.input(input).empty()) return nullptr;
    const auto* v = find(node_.input(input));
    return v ? &*v->shape : nullptr;
  }

 private:
  void add_operand(OpRecord& r, const std::string& name, bool force_input) {
    const auto* v = find(name);
    if (!v) return;
    const auto* k = ctx_.constant(name);
    if (k && !force_input) {
      r.parameters.push_back({k->id, *v->shape, v->dtype, k->trainable});
    } else {
      r.inputs.push_back({name, *v->shape, v->dtype});
    }
  }

  const onnx::NodeProto& node_;
  const ModelContext& ctx_;
  std::string missing_, missing_why_;
};

using Mapper = std::function<std::vector<OpRecord>(const onnx::NodeProto&, const ModelContext&)>;

inline std::vector<OpRecord> one(OpRecord r) { return {std::move(r)}; }

/// Counts are computed in 128 bits (saturating) from dims the Builder bounded (<= 2^40, rank
/// <= 16), and set only when they fit 64 bits.
inline Wide elements(const Shape& shape) { return saturating_elements(shape); }

/// Sets integer attribute `key` of a record; false (and nothing set) when it does not fit.
inline bool set_count(OpRecord& r, const std::string& key, Wide value) {
  if (!fits_int64(value)) return false;
  r.attributes.set(key, static_cast<std::int64_t>(value));
  return true;
}

/// The graph attribute `name` of a node (a body or branch), null when it has none.
const onnx::GraphProto* graph_attribute(const onnx::NodeProto& n, const std::string& name);
/// A Loop or Scan (or an If's chosen branch, once): a kLoop record carrying its body's mapped
/// ops as a sub-graph, which the cost model walks and counts `iterations` times.
std::vector<OpRecord> repeated(const onnx::NodeProto& n, const ModelContext& c, const onnx::GraphProto& body,
                               std::int64_t iterations, const std::string& approximation);
std::vector<OpRecord> scan(const onnx::NodeProto& n, const ModelContext& c);
std::vector<OpRecord> loop(const onnx::NodeProto& n, const ModelContext& c);

}  // namespace neuralcost::onnx_import
