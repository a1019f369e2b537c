// Layer-by-layer graph construction with shape inference (see graph_builder.hpp).
#include "models/graph_builder.hpp"

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost::detail {

TensorDesc GraphBuilder::add(OpRecord op) {
  TensorDesc y = op.outputs.front();
  graph_.add(std::move(op));
  return y;
}

TensorDesc GraphBuilder::linear(const std::string& name, const TensorDesc& x, std::int64_t out, bool bias) {
  OpRecord op{name, OpKind::kLinear, "Linear", {x}, {}, {}, {}, {}};
  Shape y = x.shape;
  const std::int64_t in = y.back();
  y.back() = out;
  op.outputs = {{name, y, dtype_}};
  op.parameters.push_back(param(name + ".weight", {out, in}));
  if (bias) op.parameters.push_back(param(name + ".bias", {out}));
  return add(std::move(op));
}

TensorDesc GraphBuilder::conv2d(const std::string& name, const TensorDesc& x, std::int64_t out, std::int64_t kernel,
                                std::int64_t padding) {
  OpRecord op{name, OpKind::kConv, "Conv2d", {x}, {}, {}, {}, {}};
  const std::int64_t h = x.shape[2] + 2 * padding - kernel + 1;
  const std::int64_t w = x.shape[3] + 2 * padding - kernel + 1;
  op.outputs = {{name, {x.shape[0], out, h, w}, dtype_}};
  op.parameters = {param(name + ".weight", {out, x.shape[1], kernel, kernel}), param(name + ".bias", {out})};
  op.attributes.set("padding", padding);
  return add(std::move(op));
}

TensorDesc GraphBuilder::activation(const std::string& name, const TensorDesc& x, const std::string& function) {
  OpRecord op{name, OpKind::kActivation, function, {x}, {{name, x.shape, dtype_}}, {}, {}, {}};
  op.attributes.set("function", function);
  return add(std::move(op));
}

TensorDesc GraphBuilder::binary(const std::string& name, const TensorDesc& a, const TensorDesc& b,
                                const std::string& function) {
  OpRecord op{name, OpKind::kBinary, function, {a, b}, {{name, a.shape, dtype_}}, {}, {}, {}};
  op.attributes.set("function", function);
  return add(std::move(op));
}

TensorDesc GraphBuilder::layer_norm(const std::string& name, const TensorDesc& x) {
  OpRecord op{name, OpKind::kLayerNorm, "LayerNorm", {x}, {{name, x.shape, dtype_}}, {}, {}, {}};
  op.parameters = {param(name + ".weight", {x.shape.back()}), param(name + ".bias", {x.shape.back()})};
  return add(std::move(op));
}

TensorDesc GraphBuilder::batch_norm(const std::string& name, const TensorDesc& x) {
  const std::int64_t c = x.shape[1];
  OpRecord op{name, OpKind::kBatchNorm, "BatchNorm2d", {x}, {{name, x.shape, dtype_}}, {}, {}, {}};
  op.parameters = {param(name + ".weight", {c}), param(name + ".bias", {c}), param(name + ".running_mean", {c}, false),
                   param(name + ".running_var", {c}, false)};
  return add(std::move(op));
}

TensorDesc GraphBuilder::max_pool2d(const std::string& name, const TensorDesc& x, std::int64_t kernel) {
  OpRecord op{name, OpKind::kMaxPool, "MaxPool2d", {x}, {}, {}, {}, {}};
  op.outputs = {{name, {x.shape[0], x.shape[1], x.shape[2] / kernel, x.shape[3] / kernel}, dtype_}};
  op.attributes.set("kernel", kernel);
  op.attributes.set("stride", kernel);
  return add(std::move(op));
}

TensorDesc GraphBuilder::global_avg_pool(const std::string& name, const TensorDesc& x) {
  OpRecord op{name, OpKind::kGlobalAvgPool, "AdaptiveAvgPool2d(1)", {x}, {}, {}, {}, {}};
  op.outputs = {{name, {x.shape[0], x.shape[1], 1, 1}, dtype_}};
  return add(std::move(op));
}

TensorDesc GraphBuilder::mean(const std::string& name, const TensorDesc& x, std::size_t axis) {
  Shape y = x.shape;
  y.erase(y.begin() + static_cast<std::ptrdiff_t>(axis));
  OpRecord op{name, OpKind::kReduction, "mean", {x}, {{name, y, dtype_}}, {}, {}, {}};
  op.attributes.set("function", std::string("mean"));
  op.attributes.set("axes", std::vector<std::int64_t>{static_cast<std::int64_t>(axis)});
  return add(std::move(op));
}

TensorDesc GraphBuilder::view(const std::string& name, const TensorDesc& x, Shape shape) {
  OpRecord op{name, OpKind::kReshape, "view", {x}, {{name, std::move(shape), dtype_}}, {}, {}, {}};
  return add(std::move(op));
}

TensorDesc GraphBuilder::select_step(const std::string& name, const TensorDesc& x, std::int64_t t) {
  OpRecord op{name, OpKind::kSlice, "select", {x}, {{name, {x.shape[0], x.shape[2]}, dtype_}}, {}, {}, {}};
  op.attributes.set("axis", std::int64_t{1});
  op.attributes.set("index", t);
  op.attributes.set("materializes", false);
  return add(std::move(op));
}

std::vector<TensorDesc> GraphBuilder::split_heads(const std::string& name, const TensorDesc& qkv, std::int64_t heads) {
  const std::int64_t d = qkv.shape[2] / 3;
  const Shape s{qkv.shape[0], heads, qkv.shape[1], d / heads};
  OpRecord op{name, OpKind::kSplit, "split_heads", {qkv}, {}, {}, {}, {}};
  op.outputs = {{name + ".q", s, dtype_}, {name + ".k", s, dtype_}, {name + ".v", s, dtype_}};
  op.attributes.set("materializes", false);  // the attention kernel reads heads in place
  std::vector<TensorDesc> out = op.outputs;
  graph_.add(std::move(op));
  return out;
}

TensorDesc GraphBuilder::merge_heads(const std::string& name, const TensorDesc& x) {
  OpRecord op{name, OpKind::kTranspose, "merge_heads", {x}, {}, {}, {}, {}};
  op.outputs = {{name, {x.shape[0], x.shape[2], x.shape[1] * x.shape[3]}, dtype_}};
  op.attributes.set("materializes", false);  // the attention kernel writes [B, T, H, dh]
  return add(std::move(op));
}

TensorDesc GraphBuilder::attention(const std::string& name, const TensorDesc& q, const TensorDesc& k,
                                   const TensorDesc& v) {
  OpRecord op{name, OpKind::kAttention, "scaled_dot_product_attention", {q, k, v}, {}, {}, {}, {}};
  op.outputs = {{name, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}, dtype_}};
  return add(std::move(op));
}

TensorDesc GraphBuilder::recurrent(const std::string& name, OpKind kind, const TensorDesc& x, std::int64_t hidden,
                                   std::int64_t layers) {
  const std::int64_t gates = kind == OpKind::kLstm ? 4 : kind == OpKind::kGru ? 3 : 1;
  OpRecord op{name, kind, std::string(op_kind_name(kind)), {x}, {}, {}, {}, {}};
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::int64_t in = l == 0 ? x.shape[2] : hidden;
    const std::string s = fmt::format("_l{}", l);
    op.parameters.push_back(param(name + ".weight_ih" + s, {gates * hidden, in}));
    op.parameters.push_back(param(name + ".weight_hh" + s, {gates * hidden, hidden}));
    op.parameters.push_back(param(name + ".bias_ih" + s, {gates * hidden}));
    op.parameters.push_back(param(name + ".bias_hh" + s, {gates * hidden}));
  }
  op.attributes.set("hidden_size", hidden);
  op.attributes.set("num_layers", layers);
  op.attributes.set("batch_first", true);
  op.outputs = {{name, {x.shape[0], x.shape[1], hidden}, dtype_},
                {name + ".h_n", {layers, x.shape[0], hidden}, dtype_}};
  if (kind == OpKind::kLstm) op.outputs.push_back({name + ".c_n", {layers, x.shape[0], hidden}, dtype_});
  return add(std::move(op));
}

OpGraph GraphBuilder::finish(const TensorDesc& y) {
  graph_.mark_output(y.name);
  graph_.finalize();
  return std::move(graph_);
}

}  // namespace neuralcost::detail
