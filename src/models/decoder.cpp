// The op graph of a decoder's prefill or decode step (models/decoder.hpp), op by op as
// transformers' LlamaForCausalLM computes it (names as its modules: model.layers.0.self_attn.q_proj),
// so the roofline, the fused bound and every view apply unchanged. docs/llm.md lists the ops.
#include <cmath>

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/number_text.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace {

std::uint64_t dim(std::int64_t d) { return static_cast<std::uint64_t>(d); }
std::uint64_t product(std::initializer_list<std::uint64_t> factors) {
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
    return op(OpKind::kLinear, name, {x}, y, p);
  }
  TensorDesc elementwise(OpKind kind, const std::string& name, const std::string& function, std::vector<TensorDesc> in,
                         bool scalar = false) {
    Shape y = in.front().shape;
    for (const TensorDesc& t : in) {
      if (t.shape.size() == y.size()) {
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::max(y[i], t.shape[i]);
      }
    }
    return op(kind, name, std::move(in), y, {}, std::nullopt, [&](OpRecord& r) {
      r.attributes.set("function", function);
      if (scalar) r.attributes.set("scalar_operand", true);
    });
  }
  TensorDesc view(const std::string& name, const TensorDesc& x, Shape shape) {
    return op(OpKind::kReshape, name, {x}, std::move(shape));
  }
  /// An RMS norm over the last dimension; `offset`: scaled by (1 + weight), as Gemma's.
  TensorDesc rms_norm(const std::string& name, const TensorDesc& x, bool offset) {
    return op(OpKind::kRmsNorm, name, {x}, x.shape, {{name + ".weight", {x.shape.back()}, dtype_, true}}, std::nullopt,
              [offset](OpRecord& r) {
                r.attributes.set("normalized_dims", std::int64_t{1});
                if (offset) r.attributes.set("weight_offset", true);
              });
  }
  OpGraph& graph() { return graph_; }
  DType dtype() const { return dtype_; }
  const std::optional<WeightQuantization>& quantization() const { return quantization_; }

 private:
  static std::string module_of(const std::string& name) {
    const auto hash = name.find('#');
    return hash == std::string::npos ? name : name.substr(0, hash);
  }
  OpGraph graph_;
  DType dtype_;
  std::optional<WeightQuantization> quantization_;
};

/// q or k [B, heads, T, D] with rotary positions: x·cos + rotate_half(x)·sin, rotate_half(x) =
/// cat(−x[..., D/2:], x[..., :D/2]) (transformers' apply_rotary_pos_emb).
TensorDesc rotary(Builder& b, const std::string& name, const TensorDesc& x, const TensorDesc& cos,
                  const TensorDesc& sin) {
  Shape half = x.shape;
  half.back() /= 2;
  const TensorDesc xc = b.elementwise(OpKind::kBinary, name + "#cos", "mul", {x, cos});
  const TensorDesc neg = b.elementwise(OpKind::kUnary, name + "#neg", "neg", {b.view(name + "#half", x, half)});
  const TensorDesc rot =
      b.op(OpKind::kConcat, name + "#rotate_half", {neg, b.view(name + "#first_half", x, half)}, x.shape);
  const TensorDesc rs = b.elementwise(OpKind::kBinary, name + "#sin", "mul", {rot, sin});
  return b.elementwise(OpKind::kBinary, name, "add", {xc, rs});
}

/// Mixtral's sparse MoE block on m [B, T, E] (transformers' MixtralSparseMoeBlock): the router
/// (a linear to the experts' logits, softmax in fp32, top-k, the k weights renormalised), then
/// each token through its k SwiGLU experts (w1 gate, w3 up, w2 down: kExpertLinear), their outputs
/// weighted and summed.
TensorDesc mixture_of_experts(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& m) {
  const std::int64_t batch = m.shape[0], t = m.shape[1], e = c.hidden, n = c.experts, k = c.experts_per_token;
  const std::int64_t tokens = batch * t;
  const auto typed = [&](OpKind kind, const std::string& op, const std::string& function, std::vector<TensorDesc> in,
                         DType dtype) {
    const Shape shape = in.front().shape;
    return b.op(kind, name + op, std::move(in), shape, {}, dtype,
                [&](OpRecord& r) { r.attributes.set("function", function); });
  };
  const TensorDesc logits =
      typed(OpKind::kUnary, "#logits_to_fp32", "cast", {b.linear(name + ".gate", m, n, false, "", true)}, DType::kFp32);
  const TensorDesc probs = b.op(OpKind::kSoftmax, name + "#softmax", {logits}, {batch, t, n}, {}, DType::kFp32,
                                [](OpRecord& r) { r.attributes.set("axis", std::int64_t{-1}); });
  // top-k of E per token: k passes of E − 1 comparisons (torch.topk's work is not specified)
  const TensorDesc top =
      b.op(OpKind::kCustom, name + "#topk", {probs}, {batch, t, k}, {}, DType::kFp32, [&](OpRecord& r) {
        r.attributes.set("flops", static_cast<std::int64_t>(tokens * k * (n - 1)));
        r.attributes.set("approximation",
                         fmt::format("top-{} of {} experts counted as {} passes of {} comparisons", k, n, k, n - 1));
      });
  const TensorDesc sum = b.op(OpKind::kReduction, name + "#weights_sum", {top}, {batch, t, 1}, {}, DType::kFp32,
                              [](OpRecord& r) { r.attributes.set("function", std::string("sum")); });
  const TensorDesc normalised =
      b.op(OpKind::kBinary, name + "#weights_normalised", {top, sum}, {batch, t, k}, {}, DType::kFp32,
           [](OpRecord& r) { r.attributes.set("function", std::string("div")); });
  const TensorDesc weights = typed(OpKind::kUnary, "#weights_to_dtype", "cast", {normalised}, b.dtype());
  const auto expert_linear = [&](const std::string& w, const TensorDesc& x, Shape out, std::int64_t rows_out) {
    const std::int64_t in = x.shape.back();
    return b.op(OpKind::kExpertLinear, name + ".experts." + w, {x}, std::move(out),
                {{name + ".experts." + w + ".weight", {n, rows_out, in}, b.dtype(), true, b.quantization()}},
                std::nullopt, [&](OpRecord& r) {
                  r.attributes.set("top_k", k);
                  r.attributes.set("tokens", tokens);
                  r.attributes.set(
                      "approximation",
                      fmt::format("the weights of E·(1 − (1 − k/E)^N) = {:.2f} of {} experts read for {} tokens: "
                                  "the expectation under uniform routing",
                                  expected_experts_reached(c, static_cast<std::uint64_t>(tokens)), n, tokens));
                });
  };
  const TensorDesc gate = b.elementwise(OpKind::kActivation, name + ".experts.act_fn", "silu",
                                        {expert_linear("w1", m, {batch, t, k, c.intermediate}, c.intermediate)});
  const TensorDesc up = expert_linear("w3", m, {batch, t, k, c.intermediate}, c.intermediate);
  const TensorDesc hidden = b.elementwise(OpKind::kBinary, name + ".experts#gate_up", "mul", {gate, up});
  const TensorDesc down = expert_linear("w2", hidden, {batch, t, k, e}, e);
  const TensorDesc weighted = b.elementwise(OpKind::kBinary, name + "#weighted", "mul",
                                            {down, b.view(name + "#weights_unsqueeze", weights, {batch, t, k, 1})});
  return b.op(OpKind::kReduction, name + "#sum_experts", {weighted}, {batch, t, e}, {}, std::nullopt,
              [](OpRecord& r) { r.attributes.set("function", std::string("sum")); });
}

}  // namespace

std::uint64_t decoder_parameter_count(const DecoderConfig& c) {
  const std::uint64_t e = dim(c.hidden), d = dim(c.head_dim), h = dim(c.heads), kv = dim(c.kv_heads),
                      i = dim(c.intermediate);
  const std::uint64_t attention = checked_add(product({2, e, h, d}), product({2, e, kv, d}), "parameters") +
                                  (c.qkv_bias ? product({h + 2 * kv, d}) : 0) + (c.output_bias ? e : 0);
  const std::uint64_t expert = product({3, e, i}) + (c.mlp_bias ? 2 * i + e : 0);
  const std::uint64_t mlp = c.experts > 0 ? checked_add(product({dim(c.experts), expert}), product({e, dim(c.experts)}),
                                                        "parameters")  // the experts and their router
                                          : expert;
  const std::uint64_t layer = attention + mlp + 2 * e;
  const std::uint64_t embeddings = product({c.tied_embeddings ? 1u : 2u, dim(c.vocab), e});
  return checked_add(checked_add(product({dim(c.layers), layer}), embeddings, "parameters"), e, "parameters");
}

std::uint64_t decoder_active_parameter_count(const DecoderConfig& c) {
  if (c.experts == 0) return decoder_parameter_count(c);
  const std::uint64_t expert =
      product({3, dim(c.hidden), dim(c.intermediate)}) + (c.mlp_bias ? 2 * dim(c.intermediate) + dim(c.hidden) : 0);
  return decoder_parameter_count(c) - product({dim(c.layers), dim(c.experts - c.experts_per_token), expert});
}

double expected_experts_reached(const DecoderConfig& c, std::uint64_t tokens) {
  if (c.experts == 0) return 0;
  const double e = static_cast<double>(c.experts);
  return e * (1 - std::pow(1 - static_cast<double>(c.experts_per_token) / e, static_cast<double>(tokens)));
}

namespace {

/// The shapes of one layer's weights that a quantized model stores quantized (build_decoder's).
std::vector<Shape> quantized_weight_shapes(const DecoderConfig& c) {
  const std::int64_t e = c.hidden, hd = c.heads * c.head_dim, kvd = c.kv_heads * c.head_dim, i = c.intermediate;
  std::vector<Shape> out;
  if (c.fused_projections) {
    out.push_back({hd + 2 * kvd, e});
  } else {
    out.insert(out.end(), {{hd, e}, {kvd, e}, {kvd, e}});
  }
  out.push_back({e, hd});
  if (c.experts > 0) {
    out.insert(out.end(), {{c.experts, i, e}, {c.experts, i, e}, {c.experts, e, i}});
  } else if (c.fused_projections) {
    out.insert(out.end(), {{2 * i, e}, {e, i}});
  } else {
    out.insert(out.end(), {{i, e}, {i, e}, {e, i}});
  }
  return out;
}

}  // namespace

DecoderConfig with_weights(DecoderConfig config, const std::string& weights) {
  if (!weights.empty()) config.quantization = parse_weight_quantization(weights);
  return config;
}

std::uint64_t decoder_weight_bytes(const DecoderConfig& c, DType dtype) {
  const std::uint64_t all = decoder_parameter_count(c);
  if (!c.quantization) return checked_mul(all, dtype_bytes(dtype), "weight bytes");
  std::uint64_t quantized = 0, stored = 0;
  for (const Shape& s : quantized_weight_shapes(c)) {
    quantized += element_count(s, "weight");
    stored = checked_add(stored, c.quantization->bytes(s), "weight bytes");
  }
  quantized = checked_mul(quantized, dim(c.layers), "weight bytes");
  stored = checked_mul(stored, dim(c.layers), "weight bytes");
  return checked_add(checked_mul(all - quantized, dtype_bytes(dtype), "weight bytes"), stored, "weight bytes");
}

std::uint64_t kv_cache_bytes_per_token(const DecoderConfig& c, DType dtype) {
  return product({2, dim(c.layers), dim(c.kv_heads), dim(c.head_dim), dtype_bytes(dtype)});
}

OpGraph build_decoder(const DecoderConfig& c, const DecoderRequest& r, const std::string& name) {
  const bool decode = r.phase == DecoderPhase::kDecode;
  for (const auto& [what, value] : {std::pair<const char*, std::int64_t>{"batch", r.batch},
                                    {decode ? "context" : "prompt", decode ? r.context : r.prompt}}) {
    if (value < 1 || value >= (std::int64_t{1} << 31)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--{} {} must be a positive integer below 2^31", what, value));
    }
  }
  if (decode && (r.tokens < 1 || r.tokens > 4096)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a decode step of {} new tokens must have 1 to 4096", r.tokens));
  }
  const std::int64_t t = decode ? r.tokens : r.prompt;   // tokens this step computes
  const std::int64_t keys = decode ? r.context + t : t;  // keys the last query attends to (its own included)
  if (keys > c.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {} tokens are beyond the model's {} positions (max_position_embeddings)",
                            decode ? "a decode step at context" : "a prompt of", decode ? r.context : r.prompt,
                            c.max_positions));
  }
  if (c.sliding_window > 0 && keys > c.sliding_window) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{} tokens attend beyond the sliding window of {}: banded attention is not modeled yet",
                            keys, c.sliding_window));
  }
  const std::int64_t batch = r.batch, e = c.hidden, d = c.head_dim, h = c.heads, kv = c.kv_heads;
  const DecoderConfig& cq = r.weights.empty() ? c : with_weights(c, r.weights);
  Builder b(name, r.dtype, cq.quantization);
  OpGraph& g = b.graph();
  const TensorDesc ids{"input_ids", {batch, t}, DType::kInt64};
  TensorDesc x = b.op(OpKind::kEmbedding, "model.embed_tokens", {ids}, {batch, t, e},
                      {{"model.embed_tokens.weight", {c.vocab, e}, r.dtype, true}});
  if (c.embedding_scale) {  // Gemma: · sqrt(hidden_size), a scalar in the weights' dtype
    x = b.elementwise(OpKind::kBinary, "model.embed_tokens#scale", "mul", {x}, true);
  }
  // rotary tables, once per step for every sequence (their positions are the same): inv_freq
  // [1, D/2, 1] @ positions [1, 1, T], cat, cos and sin in fp32
  const TensorDesc positions{"position_ids", {1, 1, t}, DType::kFp32};
  const Tweak free_view = [](OpRecord& op) { op.attributes.set("materializes", false); };
  const TensorDesc inv = b.op(OpKind::kReshape, "model.rotary_emb#expand", {}, {1, d / 2, 1},
                              {{"model.rotary_emb.inv_freq", {d / 2}, DType::kFp32, false}}, DType::kFp32);
  TensorDesc freqs = b.op(OpKind::kMatMul, "model.rotary_emb#freqs", {inv, positions}, {1, d / 2, t}, {}, DType::kFp32);
  freqs = b.op(OpKind::kTranspose, "model.rotary_emb#transpose", {freqs}, {1, t, d / 2}, {}, DType::kFp32, free_view);
  const TensorDesc emb = b.op(OpKind::kConcat, "model.rotary_emb#cat", {freqs, freqs}, {1, t, d}, {}, DType::kFp32);
  TensorDesc tables[2];
  for (int k = 0; k < 2; ++k) {
    const std::string f = k == 0 ? "cos" : "sin";
    OpRecord u{"model.rotary_emb#" + f,
               OpKind::kUnary,
               f,
               {emb},
               {{"model.rotary_emb#" + f, {1, t, d}, DType::kFp32}},
               {},
               {},
               {}};
    u.attributes.set("function", f);
    u.attributes.set("module", std::string("model.rotary_emb"));
    g.add(u);
    OpRecord s{"model.rotary_emb#" + f + "_scaled",
               OpKind::kBinary,
               "mul",
               {u.outputs[0]},
               {{"model.rotary_emb#" + f + "_scaled", {1, t, d}, DType::kFp32}},
               {},
               {},
               {}};
    s.attributes.set("function", std::string("mul"));  // · attention_scaling
    s.attributes.set("scalar_operand", true);
    s.attributes.set("module", std::string("model.rotary_emb"));
    g.add(s);
    tables[k] = s.outputs[0];
    if (r.dtype != DType::kFp32)
      tables[k] = b.elementwise(OpKind::kUnary, "model.rotary_emb#" + f + "_to_dtype", "cast", {tables[k]});
    tables[k] = b.view("model.rotary_emb#" + f + "_unsqueeze", tables[k], {1, 1, t, d});
  }
  std::uint64_t cache_read = 0;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}", l), a = p + ".self_attn";
    const TensorDesc normed = b.rms_norm(p + ".input_layernorm", x, c.norm_offset);
    // phi3: one qkv_proj, its q, k and v slices views of it (no copy)
    const std::optional<TensorDesc> qkv =
        c.fused_projections ? std::optional<TensorDesc>(b.linear(a + ".qkv_proj", normed, (h + 2 * kv) * d, false))
                            : std::nullopt;
    auto heads_of = [&](const std::string& proj, std::int64_t n) {
      const TensorDesc y = qkv ? b.op(OpKind::kSlice, a + ".qkv_proj#" + proj.substr(0, 1), {*qkv}, {batch, t, n * d},
                                      {}, std::nullopt, free_view)
                               : b.linear(a + "." + proj, normed, n * d, c.qkv_bias);
      const TensorDesc v = b.view(a + "." + proj + "#view", y, {batch, t, n, d});
      return b.op(OpKind::kTranspose, a + "." + proj + "#transpose", {v}, {batch, n, t, d}, {}, std::nullopt,
                  free_view);
    };
    const TensorDesc q = rotary(b, a + "#rotary_q", heads_of("q_proj", h), tables[0], tables[1]);
    const TensorDesc k = rotary(b, a + "#rotary_k", heads_of("k_proj", kv), tables[0], tables[1]);
    const TensorDesc v = heads_of("v_proj", kv);
    // the KV cache: this step's keys and values written into it; decode attends to the cache
    // of C earlier tokens and this one, read from memory (compulsory bytes)
    TensorDesc keys_in = k, values_in = v;
    for (const auto& [which, y] : {std::pair<const char*, TensorDesc>{"key", k}, {"value", v}}) {
      b.elementwise(OpKind::kUnary, fmt::format("{}#cache_{}_write", a, which), "copy", {y});
      if (decode) {
        const TensorDesc cache{fmt::format("{}.{}_cache", a, which), {batch, kv, keys, d}, r.dtype};
        cache_read += cache.bytes();
        (std::string(which) == "key" ? keys_in : values_in) = cache;
      }
    }
    // decode: its one query sees every cached key; prefill: causal over the prompt; a verify
    // step's queries see the cache and the new tokens up to their own (causal, bottom right)
    TensorDesc o = b.op(OpKind::kAttention, a + "#attention", {q, keys_in, values_in}, {batch, h, t, d}, {},
                        std::nullopt, [&](OpRecord& op) {
                          op.attributes.set("causal", !decode || t > 1);
                          if (decode && t > 1) op.attributes.set("causal_alignment", std::string("bottom_right"));
                        });
    o = b.op(OpKind::kTranspose, a + "#merge_heads", {o}, {batch, t, h, d});
    o = b.view(a + "#reshape", o, {batch, t, h * d});
    o = b.linear(a + ".o_proj", o, e, c.output_bias);
    x = b.elementwise(OpKind::kBinary, p + "#residual_attention", "add", {x, o});
    const TensorDesc m = b.rms_norm(p + ".post_attention_layernorm", x, c.norm_offset);
    if (c.experts > 0) {
      x = b.elementwise(OpKind::kBinary, p + "#residual_mlp", "add",
                        {x, mixture_of_experts(b, c, p + ".block_sparse_moe", m)});
      continue;
    }
    TensorDesc gate_in, up;
    if (c.fused_projections) {  // phi3: one gate_up_proj, chunked in two by views
      const TensorDesc gate_up = b.linear(p + ".mlp.gate_up_proj", m, 2 * c.intermediate, false);
      const Shape half = {batch, t, c.intermediate};
      gate_in = b.op(OpKind::kSlice, p + ".mlp.gate_up_proj#gate", {gate_up}, half, {}, std::nullopt, free_view);
      up = b.op(OpKind::kSlice, p + ".mlp.gate_up_proj#up", {gate_up}, half, {}, std::nullopt, free_view);
    } else {
      gate_in = b.linear(p + ".mlp.gate_proj", m, c.intermediate, c.mlp_bias);
      up = b.linear(p + ".mlp.up_proj", m, c.intermediate, c.mlp_bias);
    }
    const TensorDesc gate = b.elementwise(
        OpKind::kActivation, p + (c.fused_projections ? ".mlp.activation_fn" : ".mlp.act_fn"), c.activation, {gate_in});
    const TensorDesc down = b.linear(
        p + ".mlp.down_proj", b.elementwise(OpKind::kBinary, p + ".mlp#gate_up", "mul", {gate, up}), e, c.mlp_bias);
    x = b.elementwise(OpKind::kBinary, p + "#residual_mlp", "add", {x, down});
  }
  x = b.rms_norm("model.norm", x, c.norm_offset);
  // logits of the last position only, as generation asks for them (logits_to_keep = 1); a verify
  // step needs every new token's
  if (!decode && t > 1) {
    x = b.op(OpKind::kSlice, "model#last_position", {x}, {batch, 1, e});
  }
  const TensorDesc logits =
      b.linear("lm_head", x, c.vocab, false, c.tied_embeddings ? "model.embed_tokens.weight" : "", true);
  g.mark_output(logits.name);
  g.set_batch(batch);
  g.add_note(decode && t > 1
                 ? fmt::format("verify: {} new tokens per sequence at a context of {} cached tokens (up to {} keys "
                               "attended, causal among the new ones), logits for each; the KV cache read is {} B",
                               t, r.context, keys, grouped(cache_read))
             : decode
                 ? fmt::format("decode: one token per sequence at a context of {} cached tokens ({} keys attended); "
                               "the KV cache read is {} B at this batch",
                               r.context, keys, grouped(cache_read))
                 : fmt::format("prefill: {} prompt tokens per sequence, causal attention; logits of the last position "
                               "only (logits_to_keep = 1)",
                               r.prompt));
  g.add_note(fmt::format(
      "{}: {} layers, {} heads ({} kv heads, head_dim {}), {} parameters, KV cache {} B per token in {}; {}",
      c.architecture, c.layers, c.heads, c.kv_heads, c.head_dim, grouped(decoder_parameter_count(c)),
      grouped(kv_cache_bytes_per_token(c, r.dtype)), dtype_name(r.dtype), c.source));
  if (cq.quantization) {
    const WeightQuantization& q = *cq.quantization;
    g.add_note(fmt::format(
        "weights: the blocks' linear layers stored as {}; embeddings, norms{}, lm_head and the KV cache in {}; "
        "{} B of weights in all ({} B all in {}); each quantized weight is dequantized once per call, value by value "
        "(a multiply by its scale{}), as weight-only kernels (AWQ, Marlin, bitsandbytes) do: an approximation, a "
        "kernel that scales partial sums instead does less",
        q.describe(), c.experts > 0 ? ", the router" : "", dtype_name(r.dtype),
        grouped(decoder_weight_bytes(cq, r.dtype)),
        grouped(checked_mul(decoder_parameter_count(c), dtype_bytes(r.dtype), "weight bytes")), dtype_name(r.dtype),
        q.zero_points ? " and a subtraction of its zero" : ""));
  }
  if (c.experts > 0) {
    const std::uint64_t n_tokens = static_cast<std::uint64_t>(batch * t);
    g.add_note(
        fmt::format("mixture of experts: {} of {} experts per token, {} parameters active per token; this step's "
                    "{} tokens reach {:.2f} experts per layer (expected under uniform routing)",
                    c.experts_per_token, c.experts, grouped(decoder_active_parameter_count(c)), n_tokens,
                    expected_experts_reached(c, n_tokens)));
  }
  g.finalize();
  return g;
}

}  // namespace neuralcost
