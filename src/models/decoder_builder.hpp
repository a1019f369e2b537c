// The op-by-op builder of decoder graphs (decoder.cpp, experts.cpp, latent_attention.cpp): each
// call appends one op record named as transformers' modules name it and returns its output
// tensor. Private to src/models.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/graph.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost::detail {

inline std::uint64_t dim(std::int64_t d) { return static_cast<std::uint64_t>(d); }
inline std::uint64_t product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t p = 1;
  for (std::uint64_t f : factors) p = checked_mul(p, f, "decoder count");
  return p;
}
using Tweak = std::function<void(OpRecord&)>;

class Builder {
 public:
  Builder(const std::string& name, DType dtype, std::optional<WeightQuantization> quantization)
      : graph_(name), dtype_(dtype), quantization_(std::move(quantization)) {}

  TensorDesc op(OpKind kind, const std::string& name, std::vector<TensorDesc> inputs, Shape out,
                std::vector<ParameterDesc> parameters = {}, std::optional<DType> out_dtype = std::nullopt,
                const Tweak& tweak = {}) {
    OpRecord r{name,
               kind,
               std::string(op_kind_name(kind)),
               std::move(inputs),
               {{name, std::move(out), out_dtype.value_or(dtype_)}},
               std::move(parameters),
               {},
               {}};
    r.attributes.set("module", module_of(name));
    if (residual_stream_) r.attributes.set("residual_stream", true);
    if (routed_rows_) r.attributes.set("routed_rows", true);
    // an op asked for fp32 in a model built in a lower precision (the router): computed in fp32
    // whatever the training precision, so the memory ledger keeps its outputs at 4 bytes
    if (out_dtype == DType::kFp32 && dtype_ != DType::kFp32) r.attributes.set("computes_fp32", true);
    if (tweak) tweak(r);
    TensorDesc y = r.outputs.front();
    graph_.add(std::move(r));
    return y;
  }
  /// A block's linear layer (its weight stored quantized when the model's are); `plain`: one that
  /// stays in the compute dtype (lm_head, the router).
  TensorDesc linear(const std::string& name, const TensorDesc& x, std::int64_t out, bool bias,
                    const std::string& weight_id = "", bool plain = false) {
    Shape y = x.shape;
    const std::int64_t in = y.back();
    y.back() = out;
    std::vector<ParameterDesc> p = {{weight_id.empty() ? name + ".weight" : weight_id,
                                     {out, in},
                                     dtype_,
                                     true,
                                     plain ? std::nullopt : quantization_}};
    if (bias) p.push_back({name + ".bias", {out}, dtype_, true});
    if (plain || !w8a8()) return op(OpKind::kLinear, name, {x}, y, p);
    return op(OpKind::kLinear, name, {quantized(x)}, y, p, std::nullopt, [&](OpRecord& r) { w8a8_product(r); });
  }
  /// W8A8 (DecoderConfig::activation_dtype): whether the quantized linears take quantized activations.
  bool w8a8() const { return quantization_ && activations_; }
  /// `x` quantized per token to the activations' type, once per tensor (q, k and v share theirs,
  /// as a fused QKV projection quantizes its input once): each token's absmax gives its scale.
  TensorDesc quantized(const TensorDesc& x) {
    const auto it = quantized_.find(x.name);
    if (it != quantized_.end()) return it->second;
    const TensorDesc q = op(OpKind::kUnary, x.name + "#quantized", {x}, x.shape, {}, *activations_,
                            [](OpRecord& r) { r.attributes.set("function", std::string("quantize_per_token")); });
    return quantized_[x.name] = q;
  }
  /// Marks a linear of quantized operands: it multiplies in their type and scales each sum by the
  /// token's and the output row's (or block's) scales (the contraction cost rule's epilogue).
  void w8a8_product(OpRecord& r) const {
    r.compute_dtype = *activations_;
    r.attributes.set("activation_dtype", std::string(dtype_name(*activations_)));
  }
  void set_activations(std::optional<DType> activations) { activations_ = activations; }
  TensorDesc elementwise(OpKind kind, const std::string& name, const std::string& function, std::vector<TensorDesc> in,
                         bool scalar = false, const Tweak& tweak = {}) {
    Shape y = in.front().shape;
    for (const TensorDesc& t : in) {
      if (t.shape.size() == y.size()) {
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::max(y[i], t.shape[i]);
      }
    }
    return op(kind, name, std::move(in), y, {}, std::nullopt, [&](OpRecord& r) {
      r.attributes.set("function", function);
      if (scalar) r.attributes.set("scalar_operand", true);
      if (tweak) tweak(r);
    });
  }
  TensorDesc view(const std::string& name, const TensorDesc& x, Shape shape) {
    return op(OpKind::kReshape, name, {x}, std::move(shape));
  }
  /// A LayerNorm over the last dimension, with its weight and bias (gpt2, gpt_neox).
  TensorDesc layer_norm(const std::string& name, const TensorDesc& x) {
    const std::int64_t n = x.shape.back();
    return op(OpKind::kLayerNorm, name, {x}, x.shape,
              {{name + ".weight", {n}, dtype_, true}, {name + ".bias", {n}, dtype_, true}}, std::nullopt,
              [](OpRecord& r) { r.attributes.set("normalized_dims", std::int64_t{1}); });
  }
  /// An RMS norm over the last dimension; `offset`: scaled by (1 + weight), as Gemma's.
  TensorDesc rms_norm(const std::string& name, const TensorDesc& x, bool offset) {
    return op(OpKind::kRmsNorm, name, {x}, x.shape, {{name + ".weight", {x.shape.back()}, dtype_, true}}, std::nullopt,
              [offset](OpRecord& r) {
                r.attributes.set("normalized_dims", std::int64_t{1});
                if (offset) r.attributes.set("weight_offset", true);
              });
  }
  /// Builds the ops of `build` marked `residual_stream`: a layer's norms and residual adds, which
  /// read and write the whole hidden state of every token. Under Megatron's tensor parallelism
  /// every device computes them whole; sequence parallelism splits their tokens over the devices
  /// (model_parallel.hpp).
  TensorDesc on_residual_stream(const std::function<TensorDesc()>& build) { return marked(residual_stream_, build); }
  /// Builds the ops of `build` marked `routed_rows`: a MoE layer's experts, which run on the rows
  /// routed to them (k a token). Under expert parallelism with a measured routing, the busiest
  /// device holds λ times an average device's rows of what they keep (model_parallel.hpp).
  TensorDesc on_routed_rows(const std::function<TensorDesc()>& build) { return marked(routed_rows_, build); }
  OpGraph& graph() { return graph_; }
  DType dtype() const { return dtype_; }
  const std::optional<WeightQuantization>& quantization() const { return quantization_; }

 private:
  /// Runs `build` with `flag` set (the ops it adds carry the flag's attribute), then restores it.
  static TensorDesc marked(bool& flag, const std::function<TensorDesc()>& build) {
    const bool outer = flag;
    flag = true;
    const TensorDesc y = build();
    flag = outer;
    return y;
  }
  static std::string module_of(const std::string& name) {
    const auto hash = name.find('#');
    return hash == std::string::npos ? name : name.substr(0, hash);
  }
  OpGraph graph_;
  DType dtype_;
  std::optional<WeightQuantization> quantization_;
  bool residual_stream_ = false;
  bool routed_rows_ = false;
  std::optional<DType> activations_;
  std::map<std::string, TensorDesc> quantized_;  ///< W8A8: each activation's quantized copy, by name
};

/// This step's keys or values (or latent) `y` written into the KV cache in its storage type: a
/// copy, or with a quantized cache (--kv-cache fp8 or int8) a quantize (a divide by the scale, a
/// round and a clamp, a conversion), or a cast to another float type (decoder.cpp).
TensorDesc cache_write(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& y);
/// A sparse MoE block on m [B, T, E] (experts.cpp): the router, each token through its k experts,
/// their outputs weighted and summed, and a shared expert where the model has one.
TensorDesc mixture_of_experts(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& m,
                              std::int64_t layer);
/// How the experts a step's `tokens` reach are expected, for the graph's note (experts.cpp).
std::string routing_said(const DecoderConfig& c, std::uint64_t tokens);
/// The KV cache's storage type: the config's kv_cache_dtype, else the compute dtype.
DType cache_dtype(const Builder& b, const DecoderConfig& c);
/// Marks `op`, which reads a cache stored in another type than it computes in, with the
/// approximation that names the conversions it makes as it loads (not counted).
void mark_cache_read(const Builder& b, const DecoderConfig& c, OpRecord& op);

/// q or k [B, heads, T, D] with rotary positions on its first cos.shape.back() dims (decoder.cpp).
TensorDesc rotary(Builder& b, const std::string& name, const TensorDesc& whole, const TensorDesc& cos,
                  const TensorDesc& sin);

}  // namespace neuralcost::detail
