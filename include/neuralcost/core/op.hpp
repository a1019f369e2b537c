// Portable operation records: what one op of a network asks of the machine, independent of the
// framework it came from. Importers (built-in networks, ONNX, TorchScript, ...) produce them;
// the cost model and every analysis only ever read them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "neuralcost/core/tensor.hpp"

namespace neuralcost {

/// Op families the cost model knows. kUnknown is an op the importer saw but nobody models:
/// it is reported as unmodeled, never costed as zero. Each kind's facts (name, cost rule,
/// compute unit, fusion, view rule, what it saves for backward) are one row of the table in
/// neuralcost/cost/op_kinds.hpp; kUnknown stays last.
enum class OpKind {
  kMatMul,           ///< batched, broadcasting A[..,M,K] x B[..,K,N] (+ C) (attrs transpose_a/b)
  kLinear,           ///< x[..,in] x W[out,in]^T (+ bias); weight and bias are parameters
  kExpertLinear,     ///< mixture of experts: rows of x[..,in] through W[E,out,in] of attr top_k of E experts each
  kConv,             ///< 1-D/2-D/3-D convolution: stride, dilation, padding, groups
  kConvTranspose,    ///< transposed convolution, same attributes
  kMaxPool,          ///< kernel, stride, padding, dilation
  kAvgPool,          ///< kernel, stride, padding
  kAdaptiveMaxPool,  ///< output size taken from the output tensor
  kAdaptiveAvgPool,
  kGlobalMaxPool,
  kGlobalAvgPool,
  kUnary,       ///< elementwise math: attr function = exp, log, sqrt, neg, ...
  kBinary,      ///< elementwise with broadcasting: attr function = add, sub, mul, div, ...
  kActivation,  ///< attr function = relu, gelu, sigmoid, tanh, silu, ...
  kSoftmax,     ///< attr axis
  kLayerNorm,   ///< normalises the trailing dims covered by attr normalized_dims (default 1)
  kBatchNorm,   ///< inference form (running statistics)
  kRmsNorm,
  kEmbedding,  ///< gather rows of a table parameter by integer indices
  kAttention,  ///< scaled dot-product attention over q[B,H,Lq,D], k/v[B,Hkv,Lk,D]; attr causal
  kRnn,        ///< Elman RNN: hidden_size, num_layers, bidirectional, nonlinearity
  kGru,
  kLstm,
  kReduction,  ///< attr function = sum, mean, max, min, prod; reduced size from shapes
  kReshape,    ///< view: no FLOPs, no bytes
  kTranspose,  ///< copies unless attr materializes = false
  kConcat,
  kSlice,
  kSplit,
  kPad,
  kEinsum,               ///< general contraction: attr equation, subscripts of the inputs then the parameters
  kFill,                 ///< writes its output from no tensor data: attr function = constant (default) or range
  kGather,               ///< reads what it gathers or copies (a lookup, one-hot, tile), computes nothing
  kScatter,              ///< writes updates (the last input) into data: attrs reduction, in_place
  kCumulative,           ///< running sum/product along attr axis
  kWindowReduction,      ///< max/min/sum over windows of any dims: attr window (one size per dim)
  kLoop,                 ///< `body` run attr iterations times (each body op reads and writes every time)
  kResize,               ///< interpolation along every dim whose size changes: attr mode = linear | cubic
  kLocalResponseNorm,    ///< LRN over a window of attr size channels (dim 1)
  kLoss,                 ///< training loss of a step graph: attr function = cross_entropy (inputs logits, labels) | mse
  kContractionGradient,  ///< a part of a contraction's gradient (dgrad, wgrad): `differentiates` is the forward op,
                         ///< attr part
  kGradient,             ///< a part of another op's gradient: `differentiates` is the forward op, attr part
  kOptimizerStep,        ///< one parameter's update: attr function = sgd | momentum | adam | adamw, attr precision
  kCustom,               ///< FLOPs given by attr flops (and optional transcendentals)
  kUnknown,              ///< not modeled: listed as such with its share of the graph
};

using AttributeValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>>;

/// Named op attributes with typed, checked access. A wrong type or a missing required
/// attribute throws kInvalidArgument naming the attribute (the cost model adds the op name).
class Attributes {
 public:
  void set(const std::string& key, AttributeValue value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, AttributeValue>& all() const { return values_; }

  bool get_bool(const std::string& key, bool fallback) const;
  std::int64_t get_int(const std::string& key) const;
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  /// Per-dimension list: a missing key gives `fallback` repeated, a single value is broadcast,
  /// otherwise exactly `rank` values are required.
  std::vector<std::int64_t> get_ints(const std::string& key, std::size_t rank, std::int64_t fallback) const;
  /// A list of any length (a single integer is a list of one); missing throws.
  std::vector<std::int64_t> get_list(const std::string& key) const;

 private:
  std::map<std::string, AttributeValue> values_;
};

class OpGraph;

/// One operation: its activations in and out, the parameters it reads, and its attributes.
struct OpRecord {
  std::string name;  ///< unique within a graph, e.g. "encoder0.attn.in_proj"
  OpKind kind = OpKind::kUnknown;
  std::string source_type;  ///< what the importer called it ("Conv", "aten::linear", ...)
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<ParameterDesc> parameters;
  Attributes attributes;
  /// Type the arithmetic runs in; empty means the first arithmetic dtype (fp*, tf32, bf16,
  /// int8) among the outputs, then the inputs (tf32 differs from its fp32 storage).
  std::optional<DType> compute_dtype;
  /// kLoop: the ops of one iteration, with their own tensors (the cost model walks them).
  std::shared_ptr<const OpGraph> body = nullptr;
  /// kGradient, kContractionGradient: the forward op whose gradient this record computes.
  std::shared_ptr<const OpRecord> differentiates = nullptr;

  DType effective_compute_dtype() const;
};

}  // namespace neuralcost
