// Builds op graphs layer by layer with shapes inferred as it goes, the way torch::nn modules
// compose. Used by the reference networks; each call appends one op record and returns its
// output tensor.
#pragma once

#include <string>

#include "neuralcost/core/graph.hpp"

namespace neuralcost::detail {

class GraphBuilder {
 public:
  GraphBuilder(std::string graph_name, DType dtype) : graph_(std::move(graph_name)), dtype_(dtype) {}

  TensorDesc input(const std::string& name, Shape shape) const { return {name, std::move(shape), dtype_}; }

  TensorDesc linear(const std::string& name, const TensorDesc& x, std::int64_t out, bool bias = true);
  TensorDesc conv2d(const std::string& name, const TensorDesc& x, std::int64_t out, std::int64_t kernel,
                    std::int64_t padding);
  TensorDesc activation(const std::string& name, const TensorDesc& x, const std::string& function);
  TensorDesc binary(const std::string& name, const TensorDesc& a, const TensorDesc& b, const std::string& function);
  TensorDesc layer_norm(const std::string& name, const TensorDesc& x);
  TensorDesc batch_norm(const std::string& name, const TensorDesc& x);
  TensorDesc max_pool2d(const std::string& name, const TensorDesc& x, std::int64_t kernel);
  TensorDesc global_avg_pool(const std::string& name, const TensorDesc& x);
  /// Mean over one axis (the axis disappears).
  TensorDesc mean(const std::string& name, const TensorDesc& x, std::size_t axis);
  /// A view with a new shape (no bytes moved).
  TensorDesc view(const std::string& name, const TensorDesc& x, Shape shape);
  /// x[:, t, :] of a [B, T, D] sequence, as a view.
  TensorDesc select_step(const std::string& name, const TensorDesc& x, std::int64_t t);
  /// Splits [B, T, 3*d] packed projections into q, k, v of [B, heads, T, d/heads] (strided views).
  std::vector<TensorDesc> split_heads(const std::string& name, const TensorDesc& qkv, std::int64_t heads);
  /// [B, heads, T, dh] back to [B, T, heads*dh] (a copy).
  TensorDesc merge_heads(const std::string& name, const TensorDesc& x);
  TensorDesc attention(const std::string& name, const TensorDesc& q, const TensorDesc& k, const TensorDesc& v);
  /// A multi-layer RNN/GRU/LSTM over [B, T, I], batch first, biases on; returns the output sequence.
  TensorDesc recurrent(const std::string& name, OpKind kind, const TensorDesc& x, std::int64_t hidden,
                       std::int64_t layers);

  /// Marks `y` as the graph's output and returns the finished graph.
  OpGraph finish(const TensorDesc& y);

 private:
  TensorDesc add(OpRecord op);
  ParameterDesc param(const std::string& id, Shape shape, bool trainable = true) const {
    return {id, std::move(shape), dtype_, trainable};
  }

  OpGraph graph_;
  DType dtype_;
};

}  // namespace neuralcost::detail
