// Shape inference for the ONNX importer: one sweep in node order that calls ONNX's per-op
// inference functions, folds the small integer tensors exporters compute from shapes
// (Shape -> Gather -> Div -> Concat -> Reshape, as PyTorch writes attention) and hands them to
// the next ops as constant input data. ONNX 1.12's own InferShapes propagates such values only
// through some ops (not Div, not into Slice): with it a transformer exported with a symbolic
// batch lost every shape after its first attention block. Driving the ops one by one also
// lets the importer reject, before ONNX reads them, the inputs on which ONNX 1.12's inference
// crashes (zero strides, conv ranks that disagree: found by tests/fuzz).
#include <onnx/shape_inference/implementation.h>

#include <deque>
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::onnx_import {
namespace {

using onnx::TensorProto;

constexpr std::size_t kMaxFoldedElements = 1024;  // shape arithmetic, never weights

/// A small integer tensor (bool as 0/1) with its ONNX element type.
struct IntTensor {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> values;
  int elem_type = TensorProto::INT64;
};

bool is_integer_type(int t) {
  switch (t) {
    case TensorProto::INT64: case TensorProto::INT32: case TensorProto::INT16: case TensorProto::INT8:
    case TensorProto::UINT8: case TensorProto::UINT16: case TensorProto::UINT32: case TensorProto::BOOL:
      return true;
    default:
      return false;
  }
}

std::optional<IntTensor> from_proto(const TensorProto& t) {
  if (!is_integer_type(t.data_type()) || t.data_location() == TensorProto::EXTERNAL) return std::nullopt;
  IntTensor out{{t.dims().begin(), t.dims().end()}, {}, t.data_type()};
  std::uint64_t n = 1;
  for (std::int64_t d : out.dims) {
    if (d < 0 || (n *= static_cast<std::uint64_t>(d)) > kMaxFoldedElements) return std::nullopt;
  }
  // our own bounds-checked reading (never ONNX's ParseData, which writes past its buffer when the
  // raw bytes do not fit the declared size): little-endian raw bytes of exactly n elements, or
  // the typed field ONNX keeps the type in
  const int type = t.data_type();
  const int width = type == TensorProto::INT64                                     ? 8
                    : type == TensorProto::INT32 || type == TensorProto::UINT32    ? 4
                    : type == TensorProto::INT16 || type == TensorProto::UINT16    ? 2
                                                                                   : 1;
  const bool is_signed = type == TensorProto::INT64 || type == TensorProto::INT32 || type == TensorProto::INT16 ||
                         type == TensorProto::INT8;
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() != n * static_cast<std::uint64_t>(width)) return std::nullopt;
    for (std::size_t i = 0; i < raw.size(); i += static_cast<std::size_t>(width)) {
      std::uint64_t u = 0;
      for (int b = 0; b < width; ++b) u |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i + b])) << (8 * b);
      std::int64_t v = static_cast<std::int64_t>(u);
      if (width < 8 && is_signed && ((u >> (8 * width - 1)) & 1)) v -= std::int64_t{1} << (8 * width);
      out.values.push_back(v);
    }
  } else if (type == TensorProto::INT64) {
    out.values.assign(t.int64_data().begin(), t.int64_data().end());
  } else if (type == TensorProto::UINT32) {
    out.values.assign(t.uint64_data().begin(), t.uint64_data().end());
  } else {  // int32 and the small types keep their values in int32_data
    out.values.assign(t.int32_data().begin(), t.int32_data().end());
  }
  if (out.values.size() != n) return std::nullopt;
  return out;
}

TensorProto to_proto(const IntTensor& t, const std::string& name) {
  TensorProto p;
  p.set_name(name);
  p.set_data_type(t.elem_type == TensorProto::INT64 ? TensorProto::INT64 : t.elem_type);
  for (std::int64_t d : t.dims) p.add_dims(d);
  for (std::int64_t v : t.values) {
    if (p.data_type() == TensorProto::INT64) {
      p.add_int64_data(v);
    } else {
      p.add_int32_data(static_cast<std::int32_t>(v));
    }
  }
  return p;
}

std::optional<std::vector<std::int64_t>> static_shape(const onnx::TypeProto* type) {
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape()) return std::nullopt;
  std::vector<std::int64_t> dims;
  for (const auto& d : type->tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

std::int64_t attr_i(const onnx::NodeProto& n, const std::string& name, std::int64_t fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.i();
  }
  return fallback;
}

std::optional<std::vector<std::int64_t>> attr_is(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
  }
  return std::nullopt;
}

/// Elementwise over a scalar and a vector or two vectors of one length; nullopt when the
/// function refuses (division by zero, overflow) or the shapes need general broadcasting.
std::optional<IntTensor> elementwise(const std::vector<const IntTensor*>& in, int out_type,
                                     const std::function<std::optional<std::int64_t>(const std::vector<std::int64_t>&)>& f) {
  const IntTensor* widest = in[0];
  for (const IntTensor* t : in) {
    if (t->dims.size() > 1) return std::nullopt;
    if (t->values.size() > widest->values.size()) widest = t;
  }
  for (const IntTensor* t : in) {
    if (t->values.size() != 1 && t->values.size() != widest->values.size()) return std::nullopt;
  }
  IntTensor out{widest->dims, {}, out_type};
  for (std::size_t i = 0; i < widest->values.size(); ++i) {
    std::vector<std::int64_t> args;
    for (const IntTensor* t : in) args.push_back(t->values[t->values.size() == 1 ? 0 : i]);
    const auto v = f(args);
    if (!v) return std::nullopt;
    out.values.push_back(*v);
  }
  return out;
}

std::optional<std::int64_t> arith(const std::string& op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (op == "Add") return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Sub") return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Mul") return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Div") return b == 0 || (a == INT64_MIN && b == -1) ? std::nullopt : std::optional(a / b);
  if (op == "Mod") return b == 0 || (a == INT64_MIN && b == -1) ? std::nullopt : std::optional(a % b);
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "Equal") return std::int64_t{a == b};
  if (op == "Less") return std::int64_t{a < b};
  if (op == "Greater") return std::int64_t{a > b};
  if (op == "And") return std::int64_t{a && b};
  if (op == "Or") return std::int64_t{a || b};
  return std::nullopt;
}

/// Python-style slice of one axis, its bounds clamped as ONNX's Slice does.
std::optional<IntTensor> slice_axis(const IntTensor& data, std::int64_t axis, std::int64_t start, std::int64_t end,
                                    std::int64_t step) {
  const auto rank = static_cast<std::int64_t>(data.dims.size());
  if (axis < 0) axis += rank;
  if (step == 0 || axis < 0 || axis >= rank) return std::nullopt;
  const std::int64_t n = data.dims[static_cast<std::size_t>(axis)];
  auto clamp = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v = v <= INT64_MIN + n ? lo : v + n;
    return std::clamp(v, lo, hi);
  };
  start = step > 0 ? clamp(start, 0, n) : clamp(start, -1, n - 1);
  end = step > 0 ? clamp(end, 0, n) : clamp(end, -1, n - 1);
  std::vector<std::int64_t> kept;
  for (std::int64_t i = start; step > 0 ? i < end : i > end; i += step) kept.push_back(i);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= data.dims[static_cast<std::size_t>(d)];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= data.dims[static_cast<std::size_t>(d)];
  IntTensor out{data.dims, {}, data.elem_type};
  out.dims[static_cast<std::size_t>(axis)] = static_cast<std::int64_t>(kept.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i : kept) {
      for (std::int64_t k = 0; k < inner; ++k) out.values.push_back(data.values[static_cast<std::size_t>((o * n + i) * inner + k)]);
    }
  }
  return out;
}

std::optional<IntTensor> slice_1d(const IntTensor& data, std::int64_t start, std::int64_t end, std::int64_t step) {
  if (data.dims.size() != 1) return std::nullopt;
  return slice_axis(data, 0, start, end, step);
}

/// Transpose of a small tensor (perm: ONNX's default reverses the dims).
std::optional<IntTensor> transpose(const IntTensor& x, std::vector<std::int64_t> perm) {
  const std::size_t rank = x.dims.size();
  if (perm.empty()) {
    for (std::size_t i = rank; i > 0; --i) perm.push_back(static_cast<std::int64_t>(i - 1));
  }
  if (perm.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (std::int64_t p : perm) {
    if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(p)]) return std::nullopt;
    seen[static_cast<std::size_t>(p)] = true;
  }
  std::vector<std::int64_t> strides(rank, 1);
  for (std::size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * x.dims[d];
  IntTensor out{{}, {}, x.elem_type};
  for (std::int64_t p : perm) out.dims.push_back(x.dims[static_cast<std::size_t>(p)]);
  std::vector<std::int64_t> index(rank, 0);  // over the output's dims
  for (std::size_t count = 0; count < x.values.size(); ++count) {
    std::int64_t source = 0;
    for (std::size_t d = 0; d < rank; ++d) source += index[d] * strides[static_cast<std::size_t>(perm[d])];
    out.values.push_back(x.values[static_cast<std::size_t>(source)]);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < out.dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

/// The value of a node's first output, when every input it reads is known.
std::optional<IntTensor> evaluate(const onnx::NodeProto& n, std::int64_t opset,
                                  const std::vector<const IntTensor*>& in, const std::vector<const onnx::TypeProto*>& types,
                                  const onnx::TypeProto* out_type) {
  const std::string& op = n.op_type();
  auto known = [&](std::size_t i) { return i < in.size() && in[i] != nullptr; };
  if (op == "Constant") {
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) return from_proto(a.t());
      if (a.name() == "value_int") return IntTensor{{}, {a.i()}};
      if (a.name() == "value_ints" && static_cast<std::size_t>(a.ints_size()) <= kMaxFoldedElements) {
        return IntTensor{{a.ints_size()}, {a.ints().begin(), a.ints().end()}};
      }
    }
    return std::nullopt;
  }
  if (op == "Shape" || op == "Size") {
    const auto shape = static_shape(types.empty() ? nullptr : types[0]);
    if (!shape) return std::nullopt;
    if (op == "Size") {
      std::int64_t size = 1;
      for (std::int64_t d : *shape) {
        if (__builtin_mul_overflow(size, d, &size)) return std::nullopt;
      }
      return IntTensor{{}, {size}};
    }
    return slice_1d(IntTensor{{static_cast<std::int64_t>(shape->size())}, *shape},
                    opset >= 15 ? attr_i(n, "start", 0) : 0, opset >= 15 ? attr_i(n, "end", INT64_MAX) : INT64_MAX, 1);
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!n.input(static_cast<int>(i)).empty() && !known(i)) return std::nullopt;
  }
  if (in.empty() || !known(0)) return std::nullopt;
  const IntTensor& x = *in[0];
  // ops that keep the values and change only the dims: take the dims ONNX inferred
  if (op == "Identity" || op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten" || op == "Cast") {
    const auto dims = static_shape(out_type);
    if (!dims) return std::nullopt;
    IntTensor out{*dims, x.values, x.elem_type};
    if (op == "Cast") {
      out.elem_type = static_cast<int>(attr_i(n, "to", 0));
      if (!is_integer_type(out.elem_type)) return std::nullopt;
      if (out.elem_type == TensorProto::BOOL) {
        for (auto& v : out.values) v = v != 0;
      }
    }
    return out;
  }
  if (op == "Gather") {
    if (!known(1) || x.dims.size() != 1 || attr_i(n, "axis", 0) != 0) return std::nullopt;
    IntTensor out{in[1]->dims, {}, x.elem_type};
    const auto size = static_cast<std::int64_t>(x.values.size());
    for (std::int64_t i : in[1]->values) {
      if (i < -size || i >= size) return std::nullopt;
      out.values.push_back(x.values[i < 0 ? i + size : i]);
    }
    return out;
  }
  if (op == "Concat") {
    IntTensor out{{0}, {}, x.elem_type};
    for (const IntTensor* t : in) {
      if (t->dims.size() != 1) return std::nullopt;
      out.values.insert(out.values.end(), t->values.begin(), t->values.end());
    }
    out.dims[0] = static_cast<std::int64_t>(out.values.size());
    return out;
  }
  if (op == "Slice") {
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (opset < 10) {
      starts = attr_is(n, "starts").value_or(starts);
      ends = attr_is(n, "ends").value_or(ends);
      axes = attr_is(n, "axes").value_or(axes);
    } else {
      if (!known(1) || !known(2)) return std::nullopt;
      starts = in[1]->values;
      ends = in[2]->values;
      if (known(3)) axes = in[3]->values;
      if (known(4)) steps = in[4]->values;
    }
    if (starts.empty() || starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
        (!steps.empty() && steps.size() != starts.size())) {
      return std::nullopt;
    }
    std::optional<IntTensor> out = x;
    for (std::size_t i = 0; i < starts.size() && out; ++i) {
      out = slice_axis(*out, axes.empty() ? static_cast<std::int64_t>(i) : axes[i], starts[i], ends[i],
                       steps.empty() ? 1 : steps[i]);
    }
    return out;
  }
  if (op == "Transpose") return transpose(x, attr_is(n, "perm").value_or(std::vector<std::int64_t>{}));
  if (op == "Neg" || op == "Abs") {
    return elementwise(in, x.elem_type, [&](const std::vector<std::int64_t>& a) -> std::optional<std::int64_t> {
      if (a[0] == INT64_MIN) return std::nullopt;
      return op == "Neg" ? -a[0] : std::abs(a[0]);
    });
  }
  if (op == "Where") {
    if (in.size() != 3) return std::nullopt;
    return elementwise(in, in[1]->elem_type, [](const std::vector<std::int64_t>& a) { return a[0] ? a[1] : a[2]; });
  }
  if (op == "ConstantOfShape") {
    std::uint64_t count = 1;
    for (std::int64_t d : x.values) {
      if (d < 0 || (count *= static_cast<std::uint64_t>(d)) > kMaxFoldedElements) return std::nullopt;
    }
    IntTensor fill{{}, {0}, TensorProto::FLOAT};
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) {
        const auto v = from_proto(a.t());
        if (!v || v->values.size() != 1) return std::nullopt;
        fill = *v;
      }
    }
    if (!is_integer_type(fill.elem_type)) return std::nullopt;
    return IntTensor{x.values, std::vector<std::int64_t>(count, fill.values[0]), fill.elem_type};
  }
  if (op == "Range") {
    if (in.size() != 3 || x.values.size() != 1 || in[1]->values.size() != 1 || in[2]->values.size() != 1) return std::nullopt;
    const std::int64_t start = x.values[0], limit = in[1]->values[0], delta = in[2]->values[0];
    if (delta == 0) return std::nullopt;
    IntTensor out{{0}, {}, x.elem_type};
    for (std::int64_t v = start; delta > 0 ? v < limit : v > limit; v += delta) {
      if (out.values.size() >= kMaxFoldedElements) return std::nullopt;
      out.values.push_back(v);
    }
    out.dims[0] = static_cast<std::int64_t>(out.values.size());
    return out;
  }
  if (in.size() == 2 && arith(op, 1, 1)) {
    const bool logical = op == "Equal" || op == "Less" || op == "Greater" || op == "And" || op == "Or";
    return elementwise(in, logical ? TensorProto::BOOL : x.elem_type,
                       [&](const std::vector<std::int64_t>& a) { return arith(op, a[0], a[1]); });
  }
  return std::nullopt;
}

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
          throw Error(ErrorCode::kInvalidArgument,
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
                            "N x C x spatial...)", path, node.name().empty() ? fmt::format("#{}", index) : node.name(),
                            node.op_type(), node.input(it->second.first), x, node.input(it->second.second), w));
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
  for (const auto& o : model.opset_import()) opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  onnx::shape_inference::SymbolTableImpl symbols;
  symbols.addFromGraph(g);
  std::unordered_map<std::string, onnx::TensorShapeProto> shape_data;
  onnx::shape_inference::GraphInferenceContext subgraphs(types, opsets, &symbols, {}, onnx::OpSchemaRegistry::Instance(),
                                                         &shape_data, static_cast<int>(model.ir_version()));
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
        onnx::shape_inference::InferShapeForFunctionNode(*schema->GetFunction(), onnx::OpSchemaRegistry::Instance(), ctx,
                                                         {}, {}, &symbols, &shape_data);
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
          const bool subgraphs = std::any_of(node.attribute().begin(), node.attribute().end(),
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
        return fmt::format("{}: ONNX's shape inference (the ONNX library, not this tool) {} at node '{}' ({}); "
                           "the model may still be valid: give every input dimension (--input, --dim) or simplify "
                           "the node", path, how, n.name().empty() ? fmt::format("#{}", at) : n.name(), n.op_type());
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
