// The synthetic graph the analysis and ledger benchmarks share: `blocks` transformer-like blocks
// of 10 ops each (linear, split, attention, views, residual add, layer norm, gelu).
#pragma once

#include <string>

#include "neuralcost/core/graph.hpp"

namespace neuralcost::bench {

/// `blocks` blocks of 10 ops each, chained through tensor names.
inline OpGraph synthetic_graph(std::int64_t blocks) {
  OpGraph g("synthetic");
  const std::int64_t b = 8, t = 128, d = 512, h = 8;
  auto tensor = [&](const std::string& name, Shape s) { return TensorDesc{name, std::move(s), DType::kBf16}; };
  auto param = [&](const std::string& id, Shape s) { return ParameterDesc{id, std::move(s), DType::kBf16, true}; };
  std::string x = "x0";
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::string p = "b" + std::to_string(i) + ".";
    auto add = [&](OpKind kind, const std::string& name, std::vector<TensorDesc> in, std::vector<TensorDesc> out,
                   std::vector<ParameterDesc> params = {}, const char* function = nullptr) {
      OpRecord op;
      op.name = p + name;
      op.kind = kind;
      op.inputs = std::move(in);
      op.outputs = std::move(out);
      op.parameters = std::move(params);
      if (function) op.attributes.set("function", std::string(function));
      g.add(std::move(op));
    };
    add(OpKind::kLinear, "qkv", {tensor(x, {b, t, d})}, {tensor(p + "qkv", {b, t, 3 * d})},
        {param(p + "wqkv", {3 * d, d}), param(p + "bqkv", {3 * d})});
    add(OpKind::kSplit, "split", {tensor(p + "qkv", {b, t, 3 * d})},
        {tensor(p + "q", {b, h, t, d / h}), tensor(p + "k", {b, h, t, d / h}), tensor(p + "v", {b, h, t, d / h})});
    add(OpKind::kAttention, "sdpa",
        {tensor(p + "q", {b, h, t, d / h}), tensor(p + "k", {b, h, t, d / h}), tensor(p + "v", {b, h, t, d / h})},
        {tensor(p + "att", {b, h, t, d / h})});
    add(OpKind::kReshape, "merge", {tensor(p + "att", {b, h, t, d / h})}, {tensor(p + "merged", {b, t, d})});
    add(OpKind::kLinear, "out", {tensor(p + "merged", {b, t, d})}, {tensor(p + "o", {b, t, d})},
        {param(p + "wo", {d, d})});
    add(OpKind::kBinary, "res1", {tensor(x, {b, t, d}), tensor(p + "o", {b, t, d})}, {tensor(p + "r1", {b, t, d})}, {},
        "add");
    add(OpKind::kLayerNorm, "ln", {tensor(p + "r1", {b, t, d})}, {tensor(p + "n", {b, t, d})},
        {param(p + "g", {d}), param(p + "beta", {d})});
    add(OpKind::kLinear, "up", {tensor(p + "n", {b, t, d})}, {tensor(p + "u", {b, t, 4 * d})},
        {param(p + "wu", {4 * d, d})});
    add(OpKind::kActivation, "gelu", {tensor(p + "u", {b, t, 4 * d})}, {tensor(p + "a", {b, t, 4 * d})}, {}, "gelu");
    add(OpKind::kLinear, "down", {tensor(p + "a", {b, t, 4 * d})}, {tensor(p + "x", {b, t, d})},
        {param(p + "wd", {d, 4 * d})});
    x = p + "x";
  }
  g.finalize();
  return g;
}

}  // namespace neuralcost::bench
