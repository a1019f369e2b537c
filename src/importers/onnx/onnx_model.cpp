// Loading, checking, binding and shape inference of ONNX models, and the assembly of the op
// graph (see onnx_importer.hpp). Every failure names the file, and the node or field.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "importers/onnx/onnx_importer.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace onnx_import {
ValueInfo info_of(const onnx::TypeProto& type);

std::optional<DType> dtype_of(int t) {
  using T = onnx::TensorProto;
  switch (t) {
    case T::FLOAT: return DType::kFp32;
    case T::DOUBLE: return DType::kFp64;
    case T::FLOAT16: return DType::kFp16;
    case T::BFLOAT16: return DType::kBf16;
    case T::INT8: case T::UINT8: return DType::kInt8;
    case T::INT32: case T::UINT32: case T::INT16: case T::UINT16: return DType::kInt32;
    case T::INT64: case T::UINT64: return DType::kInt64;
    case T::BOOL: return DType::kBool;
    default: return std::nullopt;
  }
}

void add_values(const onnx::GraphProto& graph, ModelContext& ctx) {
  for (const auto& t : graph.initializer()) {
    ValueInfo v;
    v.dtype = dtype_of(t.data_type()).value_or(DType::kFp32);
    v.shape = Shape(t.dims().begin(), t.dims().end());
    ctx.values[t.name()] = v;
    if (auto ints = small_int_values(t)) ctx.int_values[t.name()] = *ints;
  }
  for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
    for (const auto& vi : *list) {
      const auto it = ctx.values.find(vi.name());
      if (it == ctx.values.end() || !it->second.shape) ctx.values[vi.name()] = info_of(vi.type());
    }
  }
}

bool ModelContext::folded(const onnx::NodeProto& node) const {
  bool any = false;
  for (const auto& o : node.output()) {
    if (o.empty()) continue;
    if (!constants.count(o) || graph_outputs.count(o)) return false;
    any = true;
  }
  return any;
}

void find_constants(const onnx::GraphProto& graph, const std::set<std::string>& shape_values, ModelContext& ctx) {
  for (const auto& t : graph.initializer()) ctx.constants[t.name()] = {t.name(), true};
  // views keep the elements of the weight they view: the weight is counted once through them
  static const std::set<std::string> views = {"Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose"};
  static const std::set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                               "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (const auto& node : graph.node()) {
    const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    if (!standard || random.count(node.op_type())) continue;
    for (const auto& o : node.output()) {
      if (shape_values.count(o)) ctx.constants[o] = {o, false};
    }
    bool constant = true, trainable = false;
    for (const auto& a : node.attribute()) constant = constant && !a.has_g() && a.graphs_size() == 0;
    for (const auto& i : node.input()) {
      if (i.empty()) continue;
      const auto* k = ctx.constant(i);
      constant = constant && k != nullptr;
      trainable = trainable || (k && k->trainable);
    }
    if (!constant) continue;
    const auto* source = node.input_size() > 0 ? ctx.constant(node.input(0)) : nullptr;
    for (const auto& o : node.output()) {
      if (o.empty() || ctx.constants.count(o)) continue;
      const bool view = views.count(node.op_type()) && source && source->trainable;
      ctx.constants[o] = {view ? source->id : o, trainable};
    }
  }
}

}  // namespace onnx_import

namespace {

/// An ONNX library message on one line, at most 300 characters.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text.size() > 300 ? text.substr(0, 300) + "..." : text;
}

using onnx_import::ModelContext;
using onnx_import::ValueInfo;

std::int64_t default_opset(const onnx::ModelProto& model, const std::string& path) {
  std::int64_t opset = 0;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto it = ranges.find("");
  const int known = it == ranges.end() ? 0 : it->second.second;
  if (opset > known) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field 'opset_import' asks for opset {}, newer than this ONNX library knows ({})", path,
                            opset, known));
  }
  return opset;
}

/// External data must exist (and be long enough) unless only the structure is wanted.
void check_external_data(const onnx::GraphProto& graph, const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  for (const auto& t : graph.initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string location;
    std::uint64_t offset = 0, length = 0;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::strtoull(kv.value().c_str(), nullptr, 10);
      if (kv.key() == "length") length = std::strtoull(kv.value().c_str(), nullptr, 10);
    }
    std::error_code ec;
    const auto file = dir / location;
    if (location.empty() || !std::filesystem::is_regular_file(file, ec)) {
      throw Error(ErrorCode::kNotFound, fmt::format("{}: initializer '{}': external data file '{}' is missing", path,
                                                    t.name(), file.string()));
    }
    if (length > 0 && offset + length > std::filesystem::file_size(file, ec)) {
      throw Error(ErrorCode::kDataLoss, fmt::format("{}: initializer '{}': external data file '{}' is shorter than "
                                                    "offset + length ({})", path, t.name(), file.string(), offset + length));
    }
  }
}

/// Sets the shapes the user gave (--input NAME=SHAPE, --dim NAME=VALUE) on the graph inputs.
void bind_inputs(onnx::GraphProto& graph, const ModelRequest& request, const std::string& path) {
  std::vector<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.push_back(t.name());
  std::map<std::string, bool> used;
  for (const auto& [name, shape] : request.named_inputs) used[name] = false;
  std::set<std::string> symbols;  // the symbolic dimensions of the graph inputs
  for (auto& input : *graph.mutable_input()) {
    if (std::find(initializers.begin(), initializers.end(), input.name()) != initializers.end()) continue;
    auto* tensor = input.mutable_type()->mutable_tensor_type();
    for (const auto& d : tensor->shape().dim()) {
      if (d.has_dim_param()) symbols.insert(d.dim_param());
    }
    auto named = request.named_inputs.find(input.name());
    if (named != request.named_inputs.end()) {
      used[input.name()] = true;
      auto* shape = tensor->mutable_shape();
      shape->clear_dim();
      for (std::int64_t d : named->second) shape->add_dim()->set_dim_value(d);
      continue;
    }
    if (!tensor->has_shape()) continue;
    for (auto& d : *tensor->mutable_shape()->mutable_dim()) {
      if (d.has_dim_param() && request.dims.count(d.dim_param())) d.set_dim_value(request.dims.at(d.dim_param()));
      if (d.has_dim_value() && d.dim_value() < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: input '{}' has a negative dimension ({})", path, input.name(), d.dim_value()));
      }
    }
  }
  for (const auto& [name, was_used] : used) {
    if (!was_used) {
      throw Error(ErrorCode::kNotFound, fmt::format("{}: --input '{}' is not an input of the graph", path, name));
    }
  }
  for (const auto& [name, value] : request.dims) {
    if (!symbols.count(name)) {
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      throw Error(ErrorCode::kNotFound, fmt::format("{}: --dim '{}' is not a symbolic dimension of the graph inputs "
                                                    "({})", path, name, known.empty() ? "they have none" : "they have: " + known));
    }
  }
}

}  // namespace

ValueInfo onnx_import::info_of(const onnx::TypeProto& type) {
  ValueInfo v;
  if (!type.has_tensor_type()) {
    v.unknown_dim = "(not a tensor)";
    return v;
  }
  const auto& t = type.tensor_type();
  v.dtype = onnx_import::dtype_of(t.elem_type()).value_or(DType::kFp32);
  if (!t.has_shape()) {
    v.unknown_dim = "(unknown rank)";
    return v;
  }
  Shape shape;
  for (const auto& d : t.shape().dim()) {
    if (!d.has_dim_value()) {
      v.unknown_dim = d.has_dim_param() ? d.dim_param() : "(unnamed)";
      return v;
    }
    shape.push_back(d.dim_value());
  }
  v.shape = shape;
  return v;
}

bool OnnxImporter::accepts(const ModelRequest& request) const {
  const std::string& m = request.model;
  return m.size() > 5 && m.compare(m.size() - 5, 5, ".onnx") == 0;
}

OpGraph OnnxImporter::import(const ModelRequest& request) const {
  const std::string& path = request.model;
  onnx::ModelProto model = onnx_import::read_model(path, request.structure_only);
  ModelContext ctx;
  ctx.file = path;
  ctx.opset = default_opset(model, path);
  if (!request.structure_only) check_external_data(model.graph(), path);
  try {
    // the checker finds external data files relative to the model file, so it reads the file
    // again; without external data (or with structure_only, which dropped it) it checks the
    // model already in memory
    const auto& inits = model.graph().initializer();
    const bool external = std::any_of(inits.begin(), inits.end(), [](const onnx::TensorProto& t) {
      return t.data_location() == onnx::TensorProto::EXTERNAL;
    });
    if (external) {
      onnx::checker::check_model(path);
    } else {
      onnx::checker::check_model(model);
    }
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the ONNX checker rejects it: {}", path, one_line(e.what())));
  }
  bind_inputs(*model.mutable_graph(), request, path);
  ctx.int_values = onnx_import::infer_shapes(model, ctx.opset, path);
  std::set<std::string> shape_values;
  for (const auto& [name, v] : ctx.int_values) shape_values.insert(name);
  const onnx::GraphProto& graph = model.graph();
  onnx_import::find_constants(graph, shape_values, ctx);
  for (const auto& out : graph.output()) ctx.graph_outputs.insert(out.name());
  onnx_import::add_values(graph, ctx);
  OpGraph g(std::filesystem::path(path).filename().string());
  std::set<std::string> names;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (OpRecord& r : onnx_import::map_node(graph.node(i), static_cast<std::size_t>(i), ctx)) {
      // node names are optional and need not be unique in ONNX; op names must be
      if (!names.insert(r.name).second) {
        r.name = fmt::format("{}#{}", r.name, i);
        names.insert(r.name);
      }
      try {
        g.add(std::move(r));
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
      }
    }
  }
  try {
    g.finalize();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
  }
  for (const auto& out : graph.output()) {
    if (g.producer(out.name())) g.mark_output(out.name());
  }
  return g;
}

}  // namespace neuralcost
