// Folding the small integer tensors of shape arithmetic (onnx_constant_folding.hpp). Each op
// follows its ONNX operator spec; anything else (or more than 1024 elements) is not folded.
#include "importers/onnx/onnx_constant_folding.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::onnx_import {

using onnx::TensorProto;

namespace {

constexpr std::size_t kMaxFoldedElements = 1024;  // shape arithmetic, never weights

bool is_integer_type(int t) {
  switch (t) {
    case TensorProto::INT64:
    case TensorProto::INT32:
    case TensorProto::INT16:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::UINT16:
    case TensorProto::UINT32:
    case TensorProto::BOOL: return true;
    default: return false;
  }
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
std::optional<IntTensor> elementwise(
    const std::vector<const IntTensor*>& in, int out_type,
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
      for (std::int64_t k = 0; k < inner; ++k)
        out.values.push_back(data.values[static_cast<std::size_t>((o * n + i) * inner + k)]);
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

}  // namespace

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
  const int width = type == TensorProto::INT64                                  ? 8
                    : type == TensorProto::INT32 || type == TensorProto::UINT32 ? 4
                    : type == TensorProto::INT16 || type == TensorProto::UINT16 ? 2
                                                                                : 1;
  const bool is_signed = type == TensorProto::INT64 || type == TensorProto::INT32 || type == TensorProto::INT16 ||
                         type == TensorProto::INT8;
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() != n * static_cast<std::uint64_t>(width)) return std::nullopt;
    for (std::size_t i = 0; i < raw.size(); i += static_cast<std::size_t>(width)) {
      std::uint64_t u = 0;
      for (int b = 0; b < width; ++b)
        u |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i + b])) << (8 * b);
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

/// The value of a node's first output, when every input it reads is known.
std::optional<IntTensor> evaluate(const onnx::NodeProto& n, std::int64_t opset, const std::vector<const IntTensor*>& in,
                                  const std::vector<const onnx::TypeProto*>& types, const onnx::TypeProto* out_type) {
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
    if (in.size() != 3 || x.values.size() != 1 || in[1]->values.size() != 1 || in[2]->values.size() != 1)
      return std::nullopt;
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

}  // namespace neuralcost::onnx_import
