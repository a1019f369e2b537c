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
    case T::INT8:
    case T::UINT8: return DType::kInt8;
    case T::INT32:
    case T::UINT32:
    case T::INT16:
    case T::UINT16: return DType::kInt32;
    case T::INT64:
    case T::UINT64: return DType::kInt64;
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
  // the floating-point weights, and the views of them
  std::set<std::string> weights;
  for (const auto& t : graph.initializer()) {
    ctx.constants[t.name()] = {t.name(), true};
    using T = onnx::TensorProto;
    static const std::set<int> floating = {T::FLOAT, T::DOUBLE, T::FLOAT16, T::BFLOAT16};
    if (floating.count(t.data_type())) weights.insert(t.name());
  }
  // views keep the elements of the weight they view: the weight is counted once through them
  static const std::set<std::string> views = {"Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose"};
  static const std::set<std::string> random = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                               "RandomUniformLike", "Multinomial",   "Bernoulli"};
  // ops that select from or broadcast their first input: of a weight, by an amount that moves
  // with the binding (the rows of a position table a sequence reads, a class token expanded to
  // the batch), not folded into a constant of the result's shape but kept as an op that reads
  // the weight, so that the weight is counted once at the size the file holds. (Q, K and V
  // sliced from one in-projection by constant bounds stay folded: three parameters that add
  // up to it.) `bound`: values that depend on the bound input shapes.
  static const std::set<std::string> selections = {"Gather", "GatherElements", "GatherND", "Expand", "Tile", "Slice"};
  std::set<std::string> bound;
  for (const auto& node : graph.node()) {
    const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    if (!standard || random.count(node.op_type())) continue;
    for (const auto& o : node.output()) {
      if (shape_values.count(o)) ctx.constants[o] = {o, false};
    }
    // the shape of an activation depends on the binding, and so does what is computed from it
    const bool of_activation_shape = (node.op_type() == "Shape" || node.op_type() == "Size") && node.input_size() > 0 &&
                                     !ctx.constant(node.input(0));
    const bool binding = of_activation_shape || std::any_of(node.input().begin(), node.input().end(),
                                                            [&](const std::string& i) { return bound.count(i) != 0; });
    if (binding) {
      for (const auto& o : node.output()) bound.insert(o);
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
    const bool of_weight = node.input_size() > 0 && weights.count(node.input(0));
    if (of_weight && binding && selections.count(node.op_type())) continue;
    const auto* source = node.input_size() > 0 ? ctx.constant(node.input(0)) : nullptr;
    for (const auto& o : node.output()) {
      if (o.empty() || ctx.constants.count(o)) continue;
      const bool view = views.count(node.op_type()) && source && source->trainable;
      ctx.constants[o] = {view ? source->id : o, trainable};
      if (view && of_weight) weights.insert(o);
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

/// Bytes per element of a fixed-width ONNX element type; 0 for strings and unknown types.
std::uint64_t element_width(int type) {
  using T = onnx::TensorProto;
  switch (type) {
    case T::UINT8:
    case T::INT8:
    case T::BOOL: return 1;
    case T::UINT16:
    case T::INT16:
    case T::FLOAT16:
    case T::BFLOAT16: return 2;
    case T::FLOAT:
    case T::INT32:
    case T::UINT32: return 4;
    case T::DOUBLE:
    case T::INT64:
    case T::UINT64:
    case T::COMPLEX64: return 8;
    case T::COMPLEX128: return 16;
    default: return 0;
  }
}

/// Raw bytes must hold exactly the declared elements: ONNX 1.12's ParseData writes past its
/// buffer when they do not (issue 13), and a wrong payload would be a wrong constant anyway.
void check_raw_sizes(const onnx::GraphProto& graph, const std::string& path, bool structure_only) {
  auto check = [&](const onnx::TensorProto& t, const std::string& what) {
    if (!t.has_raw_data() || t.data_location() == onnx::TensorProto::EXTERNAL) return;
    const std::uint64_t width = element_width(t.data_type());
    if (width == 0) return;
    std::uint64_t n = 1;
    for (std::int64_t d : t.dims()) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} '{}' has a bad dimension", path, what, t.name()));
      }
    }
    std::uint64_t bytes = 0;
    const bool overflow = __builtin_mul_overflow(n, width, &bytes);
    // --structure-only read a one-byte stand-in for payloads it skipped (onnx_reader.cpp)
    if (structure_only && t.raw_data().size() == 1) return;
    if (overflow || bytes != t.raw_data().size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} '{}': its raw data is {} bytes, its {} elements of {} bytes need {}", path, what,
                              t.name(), t.raw_data().size(), n, width, n * width));
    }
  };
  for (const auto& t : graph.initializer()) check(t, "initializer");
  for (const auto& node : graph.node()) {
    for (const auto& a : node.attribute()) {
      if (a.has_t()) check(a.t(), fmt::format("node '{}' attribute {}", node.name(), a.name()));
    }
  }
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
    // a location is a relative path inside the model's folder (ONNX's own rule): never absolute,
    // never "..", so a model cannot make us stat or read files elsewhere
    const std::filesystem::path relative(location);
    const bool escapes = relative.is_absolute() ||
                         std::any_of(relative.begin(), relative.end(), [](const auto& part) { return part == ".."; });
    if (escapes) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: initializer '{}': external data location '{}' is "
                                                           "outside the model's folder",
                                                           path, t.name(), location));
    }
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, length, &end)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: initializer '{}': external data offset + length "
                                                           "overflows",
                                                           path, t.name()));
    }
    std::error_code ec;
    const auto file = dir / location;
    if (location.empty() || !std::filesystem::is_regular_file(file, ec)) {
      throw Error(ErrorCode::kNotFound, fmt::format("{}: initializer '{}': external data file '{}' is missing", path,
                                                    t.name(), file.string()));
    }
    if (length > 0 && end > std::filesystem::file_size(file, ec)) {
      throw Error(ErrorCode::kDataLoss, fmt::format("{}: initializer '{}': external data file '{}' is shorter than "
                                                    "offset + length ({})",
                                                    path, t.name(), file.string(), offset + length));
    }
  }
}

std::string dims_text(const onnx::TensorShapeProto& shape) {
  std::string out;
  for (const auto& d : shape.dim()) {
    out += out.empty() ? "" : "x";
    out += d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?";
  }
  return out.empty() ? "a scalar" : out;
}

/// Sets the shapes the user gave (--input NAME=SHAPE, --dim NAME=VALUE, --batch) on the graph
/// inputs and returns the batch: the leading dimension of the first input after binding. A
/// symbolic (or unnamed) leading dimension of the first input takes --batch (its default when
/// not given, said in a note); a fixed one refuses a --batch that disagrees. Shapes given with
/// --input must have the declared rank and keep every fixed dimension. Every symbolic dimension
/// must end up bound: ONNX's shape inference cannot use one (and crashes on some at opset 15+),
/// so an unbound one is an error naming the fix, not a report of unmodeled ops.
std::int64_t bind_inputs(onnx::GraphProto& graph, const ModelRequest& request, const std::string& path,
                         std::vector<std::string>& notes) {
  std::set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  std::map<std::string, bool> used;
  for (const auto& [name, shape] : request.named_inputs) used[name] = false;
  std::set<std::string> symbols;  // the symbolic dimensions of the graph inputs
  std::map<std::string, std::int64_t> dims = request.dims;
  const bool batch_given = request.given.count("batch") > 0;
  std::int64_t batch = 0;
  bool first = true;
  std::vector<std::string> unbound;
  for (auto& input : *graph.mutable_input()) {
    if (initializers.count(input.name())) continue;
    const bool is_first = first;
    first = false;
    if (!input.type().has_tensor_type()) continue;
    auto* tensor = input.mutable_type()->mutable_tensor_type();
    for (const auto& d : tensor->shape().dim()) {
      if (d.has_dim_param()) symbols.insert(d.dim_param());
    }
    auto named = request.named_inputs.find(input.name());
    if (named != request.named_inputs.end()) {
      used[input.name()] = true;
      const Shape& given = named->second;
      if (tensor->has_shape()) {
        const auto& declared = tensor->shape();
        if (static_cast<std::size_t>(declared.dim_size()) != given.size()) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: --input '{}' gives {} dimensions, the input has {} ({})", path, input.name(),
                                  given.size(), declared.dim_size(), dims_text(declared)));
        }
        for (int i = 0; i < declared.dim_size(); ++i) {
          const auto& d = declared.dim(i);
          if (d.has_dim_value() && d.dim_value() != given[static_cast<std::size_t>(i)]) {
            throw Error(
                ErrorCode::kInvalidArgument,
                fmt::format("{}: --input '{}': dimension {} is fixed at {} in the file ({}), not {}", path,
                            input.name(), i, d.dim_value(), dims_text(declared), given[static_cast<std::size_t>(i)]));
          }
        }
      }
      auto* shape = tensor->mutable_shape();
      shape->clear_dim();
      for (std::int64_t d : given) shape->add_dim()->set_dim_value(d);
      if (is_first && !given.empty()) {
        batch = given.front();
        if (batch_given && batch != request.batch) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: --batch {} disagrees with --input '{}' (leading dimension {})", path,
                                  request.batch, input.name(), batch));
        }
        notes.push_back(fmt::format("batch {}: the leading dimension of input '{}' (--input)", batch, input.name()));
      }
      continue;
    }
    if (!tensor->has_shape()) {
      if (is_first && batch_given) {
        throw Error(
            ErrorCode::kInvalidArgument,
            fmt::format("{}: --batch does not apply: input '{}' declares no shape (give it with --input {}=SHAPE)",
                        path, input.name(), input.name()));
      }
      continue;
    }
    auto* shape = tensor->mutable_shape();
    if (is_first) {
      if (shape->dim_size() == 0) {
        if (batch_given) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: --batch does not apply: the first input '{}' is a scalar", path, input.name()));
        }
      } else {
        auto& lead = *shape->mutable_dim(0);
        if (lead.has_dim_value() && lead.dim_value() > 0) {
          batch = lead.dim_value();
          if (batch_given && request.batch != batch) {
            throw Error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: input '{}' fixes the batch at {} ({}); --batch {} does not apply (omit it, or "
                                    "export the model with a dynamic batch dimension)",
                                    path, input.name(), batch, dims_text(*shape), request.batch));
          }
          notes.push_back(
              fmt::format("batch {}: fixed by the file (input '{}' is {})", batch, input.name(), dims_text(*shape)));
        } else if (lead.has_dim_param() && dims.count(lead.dim_param())) {
          batch = dims.at(lead.dim_param());
          if (batch_given && request.batch != batch) {
            throw Error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: --batch {} disagrees with --dim {}={} (the leading dimension of input '{}')",
                                    path, request.batch, lead.dim_param(), batch, input.name()));
          }
          notes.push_back(fmt::format("batch {}: --dim {} (the leading dimension of input '{}')", batch,
                                      lead.dim_param(), input.name()));
        } else if (!lead.has_dim_value()) {
          batch = request.batch;
          const std::string how = batch_given ? "--batch" : fmt::format("the default of --batch ({})", batch);
          if (lead.has_dim_param()) {
            dims[lead.dim_param()] = batch;  // every input sharing the symbol gets the same batch
            notes.push_back(fmt::format("batch {}: the leading dimension '{}' of input '{}' bound by {}", batch,
                                        lead.dim_param(), input.name(), how));
          } else {
            lead.set_dim_value(batch);
            notes.push_back(fmt::format("batch {}: the unnamed leading dimension of input '{}' bound by {}", batch,
                                        input.name(), how));
          }
        }
      }
    }
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto& d = *shape->mutable_dim(i);
      if (d.has_dim_param() && dims.count(d.dim_param())) d.set_dim_value(dims.at(d.dim_param()));
      if (d.has_dim_value() && d.dim_value() < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: input '{}' has a negative dimension ({})", path, input.name(), d.dim_value()));
      }
      if (!d.has_dim_value()) {
        unbound.push_back(d.has_dim_param() ? fmt::format("'{}' (input '{}', dimension {}): --dim {}=VALUE",
                                                          d.dim_param(), input.name(), i, d.dim_param())
                                            : fmt::format("dimension {} of input '{}' (unnamed): --input {}=SHAPE", i,
                                                          input.name(), input.name()));
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
      throw Error(ErrorCode::kNotFound,
                  fmt::format("{}: --dim '{}' is not a symbolic dimension of the graph inputs "
                              "({})",
                              path, name, known.empty() ? "they have none" : "they have: " + known));
    }
  }
  if (!unbound.empty()) {
    std::string list;
    for (const std::string& u : unbound) list += (list.empty() ? "" : "; ") + u;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} input dimension{} not known; bind {}: {}", path, unbound.size(),
                            unbound.size() == 1 ? " is" : "s are", unbound.size() == 1 ? "it" : "them", list));
  }
  return batch;
}

/// --dtype on an ONNX model: "what if it ran in this dtype". Every floating-point tensor
/// (inputs, weights, activations) is counted in `dtype`; integer and boolean tensors (indices,
/// shapes, masks) keep theirs. Says what it converted.
void convert_floats(ModelContext& ctx, DType dtype, std::vector<std::string>& notes) {
  std::map<DType, std::size_t> converted;
  for (auto& [name, v] : ctx.values) {
    const bool floating =
        v.dtype == DType::kFp64 || v.dtype == DType::kFp32 || v.dtype == DType::kFp16 || v.dtype == DType::kBf16;
    if (!floating || v.dtype == dtype) continue;
    ++converted[v.dtype];
    v.dtype = dtype;
  }
  std::string what;
  for (const auto& [from, n] : converted) what += fmt::format("{}{} {}", what.empty() ? "" : ", ", n, dtype_name(from));
  notes.push_back(what.empty() ? fmt::format("--dtype {}: the file's floating-point tensors are already {}",
                                             dtype_name(dtype), dtype_name(dtype))
                               : fmt::format("--dtype {}: {} floating-point tensors counted as {} (integer and boolean "
                                             "tensors keep their types)",
                                             dtype_name(dtype), what, dtype_name(dtype)));
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
  check_raw_sizes(model.graph(), path, request.structure_only);
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
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the ONNX checker rejects it: {}", path, one_line(e.what())));
  }
  for (const char* option : {"seq", "width", "depth"}) {
    if (request.given.count(option)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: --{} does not apply to an ONNX model (its shapes come from the file: bind symbolic "
                              "dimensions with --dim NAME=VALUE or --input NAME=SHAPE)",
                              path, option));
    }
  }
  for (const char* option : {"phase", "prompt", "context"}) {
    if (request.given.count(option)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: --{} applies to decoder LLMs (a preset or config.json); an ONNX model is one pass "
                              "over the inputs the file gives",
                              path, option));
    }
  }
  if (!request.variant.weights.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: --weights applies to decoder LLMs (a preset or config.json); an ONNX model's weights "
                            "are stored as the file says",
                            path));
  }
  if (!request.variant.activations.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: --activations applies to decoder LLMs (a preset or config.json); an ONNX model's "
                            "quantized ops are as the file says",
                            path));
  }
  if (!request.variant.mla.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: --mla applies to decoder LLMs with latent attention (deepseek_v3)", path));
  }
  if (!request.variant.kv_cache.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: --kv-cache applies to decoder LLMs (a preset or config.json); an ONNX model keeps no "
                            "KV cache this tool models",
                            path));
  }
  if (!request.variant.routing.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: --routing applies to decoder LLMs with experts (a preset or config.json)", path));
  }
  std::vector<std::string> notes;
  const std::int64_t batch = bind_inputs(*model.mutable_graph(), request, path, notes);
  ctx.int_values = onnx_import::infer_shapes(model, ctx.opset, path);
  std::set<std::string> shape_values;
  for (const auto& [name, v] : ctx.int_values) shape_values.insert(name);
  const onnx::GraphProto& graph = model.graph();
  onnx_import::find_constants(graph, shape_values, ctx);
  for (std::string& n : onnx_import::tied_copy_notes(graph)) notes.push_back(std::move(n));
  for (const auto& out : graph.output()) ctx.graph_outputs.insert(out.name());
  onnx_import::add_values(graph, ctx);
  if (request.given.count("dtype")) convert_floats(ctx, request.dtype, notes);
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
  g.set_batch(batch);
  for (std::string& n : notes) g.add_note(std::move(n));
  return g;
}

}  // namespace neuralcost
