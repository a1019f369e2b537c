// The op graph of a decoder's prefill or decode step (models/decoder.hpp), op by op as
// transformers' LlamaForCausalLM computes it (names as its modules: model.layers.0.self_attn.q_proj),
// so the roofline, the fused bound and every view apply unchanged (the MoE block: experts.cpp).
// docs/llm.md lists the ops.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "models/decoder_builder.hpp"
#include "models/latent_attention.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/number_text.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace detail {

/// q or k [B, heads, T, D] with rotary positions on its first R = cos.shape.back() dims:
/// x·cos + rotate_half(x)·sin, rotate_half(x) = cat(−x[..., R/2:], x[..., :R/2]) (transformers'
/// apply_rotary_pos_emb); with R < D (partial rotary, gpt_neox) the rotated part is concatenated
/// with the other D − R dims, which pass unchanged.
TensorDesc rotary(Builder& b, const std::string& name, const TensorDesc& whole, const TensorDesc& cos,
                  const TensorDesc& sin) {
  const std::int64_t rotated = cos.shape.back();
  if (rotated < whole.shape.back()) {
    const Tweak free_view = [](OpRecord& op) { op.attributes.set("materializes", false); };
    Shape rot_shape = whole.shape, pass_shape = whole.shape;
    rot_shape.back() = rotated;
    pass_shape.back() -= rotated;
    const TensorDesc part = b.op(OpKind::kSlice, name + "#rot", {whole}, rot_shape, {}, std::nullopt, free_view);
    const TensorDesc pass = b.op(OpKind::kSlice, name + "#pass", {whole}, pass_shape, {}, std::nullopt, free_view);
    return b.op(OpKind::kConcat, name + "#cat", {rotary(b, name, part, cos, sin), pass}, whole.shape);
  }
  const TensorDesc& x = whole;
  Shape half = x.shape;
  half.back() /= 2;
  const TensorDesc xc = b.elementwise(OpKind::kBinary, name + "#cos", "mul", {x, cos});
  const TensorDesc neg = b.elementwise(OpKind::kUnary, name + "#neg", "neg", {b.view(name + "#half", x, half)});
  const TensorDesc rot =
      b.op(OpKind::kConcat, name + "#rotate_half", {neg, b.view(name + "#first_half", x, half)}, x.shape);
  const TensorDesc rs = b.elementwise(OpKind::kBinary, name + "#sin", "mul", {rot, sin});
  return b.elementwise(OpKind::kBinary, name, "add", {xc, rs});
}

DType cache_dtype(const Builder& b, const DecoderConfig& c) { return c.kv_cache_dtype.value_or(b.dtype()); }

TensorDesc cache_write(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& y) {
  const DType stored = cache_dtype(b, c);
  const bool integer_or_fp8 = stored == DType::kFp8 || stored == DType::kInt8;
  return b.op(OpKind::kUnary, name, {y}, y.shape, {}, stored, [&](OpRecord& r) {
    r.attributes.set("function", std::string(stored == b.dtype() ? "copy" : integer_or_fp8 ? "quantize" : "cast"));
    // the divide, round and clamp run in the model's type; fp8 or int8 is only what is stored (an
    // A100 serves an fp8 cache without an fp8 peak)
    r.compute_dtype = b.dtype();
  });
}

void mark_cache_read(const Builder& b, const DecoderConfig& c, OpRecord& op) {
  const DType stored = cache_dtype(b, c);
  if (stored == b.dtype()) return;
  op.attributes.set("approximation",
                    fmt::format("reads the KV cache in {} and converts each value to {} as it loads it (a multiply by "
                                "the scale and a conversion a value, not counted), as fused attention kernels do",
                                dtype_name(stored), dtype_name(b.dtype())));
}

}  // namespace detail

using detail::Builder;
using detail::dim;
using detail::product;
using detail::rotary;
using detail::Tweak;

std::uint64_t decoder_parameter_count(const DecoderConfig& c) {
  const std::uint64_t e = dim(c.hidden), d = dim(c.head_dim), h = dim(c.heads), kv = dim(c.kv_heads),
                      i = dim(c.intermediate);
  std::uint64_t attention = checked_add(product({2, e, h, d}), product({2, e, kv, d}), "parameters") +
                            (c.qkv_bias ? product({h + 2 * kv, d}) : 0) + (c.output_bias ? e : 0) +
                            (c.qk_norm ? 2 * d : 0);
  if (c.latent) {  // deepseek_v3: q_a (with its norm) and q_b, or q_proj; kv_a, its norm, kv_b; o_proj
    const DecoderConfig::LatentAttention& la = *c.latent;
    const std::uint64_t qr = dim(la.q_rank), r = dim(la.kv_rank), rope = dim(la.rope_dims),
                        qk = dim(la.nope_dims + la.rope_dims), v = dim(la.value_dims);
    const std::uint64_t q =
        qr > 0 ? product({e, qr}) + qr + product({qr, h, qk}) + (c.qkv_bias ? qr : 0) : product({e, h, qk});
    attention = checked_add(q, product({e, r + rope}) + (c.qkv_bias ? r + rope : 0) + r, "parameters");
    attention = checked_add(attention, product({r, h, dim(la.nope_dims) + v}), "parameters");
    attention = checked_add(attention, product({h, v, e}) + (c.output_bias ? e : 0), "parameters");
  }
  const auto mlp_of = [&](std::uint64_t i) {
    return c.gated_mlp ? product({3, e, i}) + (c.mlp_bias ? 2 * i + e : 0)
                       : product({2, e, i}) + (c.mlp_bias ? i + e : 0);  // fc and proj
  };
  const std::uint64_t dense = mlp_of(i);
  // the experts, their router, and a shared expert with its one-output gate
  const std::uint64_t sparse =
      c.experts > 0 ? checked_add(checked_add(product({dim(c.experts), mlp_of(dim(c.expert_size()))}),
                                              product({e, dim(c.experts)}), "parameters"),
                                  c.shared_expert_intermediate > 0
                                      ? mlp_of(dim(c.shared_expert_intermediate)) + (c.shared_expert_gate ? e : 0)
                                      : 0,
                                  "parameters")
                    : 0;
  const std::uint64_t norm = c.layer_norm ? 2 * e : e;  // LayerNorm's weight and bias; RMSNorm's weight
  const std::uint64_t moe_layers = dim(c.moe_layer_count()), dense_layers = dim(c.layers) - moe_layers;
  const std::uint64_t layers =
      checked_add(checked_add(product({dim(c.layers), attention + (c.sandwich_norms ? 4 : 2) * norm}),
                              product({moe_layers, sparse}), "parameters"),
                  product({dense_layers, dense}), "parameters");
  const std::uint64_t embeddings = product({c.tied_embeddings ? 1u : 2u, dim(c.vocab), e}) +
                                   (c.learned_positions ? product({dim(c.max_positions), e}) : 0);
  return checked_add(checked_add(layers, embeddings, "parameters"), norm, "parameters");
}

std::uint64_t decoder_active_parameter_count(const DecoderConfig& c) {
  if (c.experts == 0) return decoder_parameter_count(c);
  const std::uint64_t expert =
      product({3, dim(c.hidden), dim(c.expert_size())}) + (c.mlp_bias ? 2 * dim(c.expert_size()) + dim(c.hidden) : 0);
  return decoder_parameter_count(c) - product({dim(c.moe_layer_count()), dim(c.experts - c.experts_per_token), expert});
}

namespace {

/// Module names as each architecture's transformers model calls them.
struct Names {
  std::string embed, positions, layers, attn, qkv, o, ln1, ln2, mlp, fc, proj, act, final_norm, rotary, lm_head;
};

Names names_of(const DecoderConfig& c) {
  if (c.architecture == "gpt2") {
    return {"transformer.wte",
            "transformer.wpe",
            "transformer.h",
            "attn",
            "c_attn",
            "c_proj",
            "ln_1",
            "ln_2",
            "mlp",
            "c_fc",
            "c_proj",
            "act",
            "transformer.ln_f",
            "",
            "lm_head"};
  }
  if (c.architecture == "gpt_neox") {
    return {"gpt_neox.embed_in",
            "",
            "gpt_neox.layers",
            "attention",
            "query_key_value",
            "dense",
            "input_layernorm",
            "post_attention_layernorm",
            "mlp",
            "dense_h_to_4h",
            "dense_4h_to_h",
            "act",
            "gpt_neox.final_layer_norm",
            "gpt_neox.rotary_emb",
            "embed_out"};
  }
  return {"model.embed_tokens", "", "model.layers", "self_attn", "qkv_proj", "o_proj", "input_layernorm",
          // gemma2's post_attention_layernorm is on the attention's output; its MLP's is this one
          c.sandwich_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm", "mlp", "up_proj", "down_proj",
          "act_fn", "model.norm", "model.rotary_emb", "lm_head"};
}

/// The shapes of one layer's weights that a quantized model stores quantized (build_decoder's).
std::vector<Shape> quantized_weight_shapes(const DecoderConfig& c, std::int64_t layer) {
  const std::int64_t e = c.hidden, hd = c.heads * c.head_dim, kvd = c.kv_heads * c.head_dim, i = c.intermediate;
  std::vector<Shape> out;
  if (c.latent) {  // every projection of the latent attention, o_proj too
    const DecoderConfig::LatentAttention& la = *c.latent;
    const std::int64_t qk = la.nope_dims + la.rope_dims;
    if (la.q_rank > 0) {
      out.insert(out.end(), {{la.q_rank, e}, {c.heads * qk, la.q_rank}});
    } else {
      out.push_back({c.heads * qk, e});
    }
    out.insert(out.end(), {{la.kv_rank + la.rope_dims, e},
                           {c.heads * (la.nope_dims + la.value_dims), la.kv_rank},
                           {e, c.heads * la.value_dims}});
  } else if (c.fused_projections) {
    out.push_back({hd + 2 * kvd, e});
  } else {
    out.insert(out.end(), {{hd, e}, {kvd, e}, {kvd, e}});
  }
  if (!c.latent) out.push_back({e, hd});
  if (c.moe_layer(layer)) {
    const std::int64_t x = c.expert_size(), s = c.shared_expert_intermediate;
    out.insert(out.end(), {{c.experts, x, e}, {c.experts, x, e}, {c.experts, e, x}});
    if (s > 0) out.insert(out.end(), {{s, e}, {s, e}, {e, s}});
  } else if (!c.gated_mlp) {
    out.insert(out.end(), {{i, e}, {e, i}});
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

DecoderConfig with_kv_cache(DecoderConfig config, const std::string& kv_cache) {
  if (kv_cache.empty()) return config;
  static const std::vector<std::pair<std::string, DType>> known = {{"fp8", DType::kFp8},
                                                                   {"int8", DType::kInt8},
                                                                   {"fp16", DType::kFp16},
                                                                   {"bf16", DType::kBf16},
                                                                   {"fp32", DType::kFp32}};
  for (const auto& [name, dtype] : known) {
    if (kv_cache == name) {
      config.kv_cache_dtype = dtype;
      return config;
    }
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("--kv-cache '{}' is not one of fp8, int8, fp16, bf16, fp32", kv_cache));
}

DecoderConfig with_activations(DecoderConfig config, const std::string& activations) {
  if (activations.empty()) return config;
  if (activations != "int8" && activations != "fp8") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--activations '{}' is not one of int8, fp8", activations));
  }
  if (!config.quantization) config.quantization = parse_weight_quantization(activations);
  const WeightQuantization& w = *config.quantization;
  const bool per_row_int8 = w.format == "int8" && w.group_size == 0 && !w.zero_points;
  if (activations == "int8" ? !per_row_int8 : w.format != "fp8") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--activations {} needs {} weights (--weights {}), not {}: an {} GEMM multiplies two "
                            "{} operands and scales its sums per output row{}",
                            activations, activations, activations, w.spec(), activations, activations,
                            activations == "int8" ? " (int8 weights without zeros or groups)" : " or block"));
  }
  config.activation_dtype = activations == "int8" ? DType::kInt8 : DType::kFp8;
  return config;
}

DecoderConfig with_mla(DecoderConfig config, const std::string& mla) {
  if (mla.empty()) return config;
  if (mla != "absorbed" && mla != "expanded") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--mla '{}' is not one of absorbed, expanded", mla));
  }
  if (!config.latent) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--mla applies to multi-head latent attention (deepseek_v2, deepseek_v3); {} has none",
                            config.architecture));
  }
  config.latent->absorbed = mla == "absorbed";
  return config;
}

std::uint64_t decoder_weight_bytes(const DecoderConfig& c, DType dtype) {
  const std::uint64_t all = decoder_parameter_count(c);
  if (!c.quantization) return checked_mul(all, dtype_bytes(dtype), "weight bytes");
  std::uint64_t quantized = 0, stored = 0;
  // a layer with experts and a dense one, each times the layers of its kind
  for (const bool moe : {false, true}) {
    const std::int64_t layers = moe ? c.moe_layer_count() : c.layers - c.moe_layer_count();
    if (layers == 0) continue;
    std::int64_t like = 0;
    while (c.moe_layer(like) != moe) ++like;
    std::uint64_t q = 0, st = 0;
    for (const Shape& s : quantized_weight_shapes(c, like)) {
      q += element_count(s, "weight");
      st = checked_add(st, c.quantization->bytes(s), "weight bytes");
    }
    quantized = checked_add(quantized, checked_mul(q, dim(layers), "weight bytes"), "weight bytes");
    stored = checked_add(stored, checked_mul(st, dim(layers), "weight bytes"), "weight bytes");
  }
  return checked_add(checked_mul(all - quantized, dtype_bytes(dtype), "weight bytes"), stored, "weight bytes");
}

std::string decoder_layer_name(const DecoderConfig& config, std::int64_t layer) {
  return fmt::format("{}.{}", names_of(config).layers, layer);
}

namespace {
/// Elements one layer's cache keeps per token: a key and a value per KV head, or the latent.
std::uint64_t cache_elements_per_token(const DecoderConfig& c) {
  return c.latent ? dim(c.latent->kv_rank + c.latent->rope_dims) : product({2, dim(c.kv_heads), dim(c.head_dim)});
}
}  // namespace

std::uint64_t kv_cache_bytes_per_token(const DecoderConfig& c, DType dtype) {
  return product({dim(c.layers), cache_elements_per_token(c), dtype_bytes(c.kv_cache_dtype.value_or(dtype))});
}

std::uint64_t kv_cache_bytes(const DecoderConfig& c, DType dtype, std::int64_t context) {
  std::uint64_t tokens = 0;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::int64_t w = c.window_of(l);
    tokens = checked_add(tokens, dim(w > 0 ? std::min(context, w) : context), "KV cache tokens");
  }
  return product({tokens, cache_elements_per_token(c), dtype_bytes(c.kv_cache_dtype.value_or(dtype))});
}

OpGraph build_decoder(const DecoderConfig& configured, const DecoderRequest& r, const std::string& name) {
  DecoderVariant rest = r.variant;  // the weights and activations apply to cq below
  rest.weights.clear();
  rest.activations.clear();
  const DecoderConfig c = with_variant(configured, rest);
  const bool decode = r.phase == DecoderPhase::kDecode;
  if (decode && r.training) {
    throw Error(ErrorCode::kInvalidArgument, "a training step is a prefill of its tokens, not a decode step");
  }
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
                decode
                    ? fmt::format("a decode step of {} new token(s) at context {} reaches {} positions, beyond the "
                                  "model's {} (max_position_embeddings)",
                                  t, r.context, keys, c.max_positions)
                    : fmt::format("a prompt of {} tokens is beyond the model's {} positions (max_position_embeddings)",
                                  r.prompt, c.max_positions));
  }
  // a sliding window of W (mistral, phi3, qwen2 with use_sliding_window): each query attends to its
  // W most recent keys, and the cache keeps the W - 1 before the step's tokens (transformers'
  // sliding-window cache layer), so a decode step reads at most W - 1 + t cached and new keys
  // (gemma2: on the layers layer_types names; the others attend to every key)
  const bool windowed = c.sliding_window > 0 && keys > c.sliding_window;
  const auto windowed_at = [&](std::int64_t layer) { return c.window_of(layer) > 0 && keys > c.window_of(layer); };
  const std::int64_t batch = r.batch, e = c.hidden, d = c.head_dim, h = c.heads, kv = c.kv_heads;
  const DecoderConfig cq = with_activations(with_weights(c, r.variant.weights), r.variant.activations);
  Builder b(name, r.dtype, cq.quantization);
  b.set_activations(cq.activation_dtype);
  OpGraph& g = b.graph();
  const Names nm = names_of(c);
  const std::int64_t rd = c.rotary_dims;
  const TensorDesc ids{"input_ids", {batch, t}, DType::kInt64};
  TensorDesc x =
      b.op(OpKind::kEmbedding, nm.embed, {ids}, {batch, t, e}, {{nm.embed + ".weight", {c.vocab, e}, r.dtype, true}});
  if (c.embedding_scale) {  // Gemma: · sqrt(hidden_size), a scalar in the weights' dtype
    x = b.elementwise(OpKind::kBinary, nm.embed + "#scale", "mul", {x}, true);
  }
  if (c.learned_positions) {  // gpt2: wpe's rows of this step's positions, added to every sequence's
    const TensorDesc position_ids{"position_ids", {1, t}, DType::kInt64};
    const TensorDesc pos = b.op(OpKind::kEmbedding, nm.positions, {position_ids}, {1, t, e},
                                {{nm.positions + ".weight", {c.max_positions, e}, r.dtype, true}});
    x = b.elementwise(OpKind::kBinary, nm.embed + "#add_positions", "add", {x, pos});
  }
  const Tweak free_view = [](OpRecord& op) { op.attributes.set("materializes", false); };
  TensorDesc tables[2];
  if (rd > 0 && c.latent && c.latent->complex_rotary) {  // deepseek_v2: one complex table
    tables[0] = tables[1] = detail::complex_rotary_table(b, nm.rotary, t, rd);
  } else if (rd > 0) {
    // rotary tables, once per step for every sequence (their positions are the same): inv_freq
    // [1, D/2, 1] @ positions [1, 1, T], cat, cos and sin in fp32
    const TensorDesc positions{"position_ids", {1, 1, t}, DType::kFp32};
    const TensorDesc inv = b.op(OpKind::kReshape, nm.rotary + "#expand", {}, {1, rd / 2, 1},
                                {{nm.rotary + ".inv_freq", {rd / 2}, DType::kFp32, false}}, DType::kFp32);
    TensorDesc freqs = b.op(OpKind::kMatMul, nm.rotary + "#freqs", {inv, positions}, {1, rd / 2, t}, {}, DType::kFp32);
    freqs = b.op(OpKind::kTranspose, nm.rotary + "#transpose", {freqs}, {1, t, rd / 2}, {}, DType::kFp32, free_view);
    const TensorDesc emb = b.op(OpKind::kConcat, nm.rotary + "#cat", {freqs, freqs}, {1, t, rd}, {}, DType::kFp32);
    for (int k = 0; k < 2; ++k) {
      const std::string f = k == 0 ? "cos" : "sin";
      OpRecord u{
          nm.rotary + "#" + f, OpKind::kUnary, f, {emb}, {{nm.rotary + "#" + f, {1, t, rd}, DType::kFp32}}, {}, {}, {}};
      u.attributes.set("function", f);
      u.attributes.set("module", nm.rotary);
      g.add(u);
      OpRecord s{nm.rotary + "#" + f + "_scaled",
                 OpKind::kBinary,
                 "mul",
                 {u.outputs[0]},
                 {{nm.rotary + "#" + f + "_scaled", {1, t, rd}, DType::kFp32}},
                 {},
                 {},
                 {}};
      s.attributes.set("function", std::string("mul"));  // · attention_scaling
      s.attributes.set("scalar_operand", true);
      s.attributes.set("module", nm.rotary);
      g.add(s);
      tables[k] = s.outputs[0];
      if (r.dtype != DType::kFp32)
        tables[k] = b.elementwise(OpKind::kUnary, nm.rotary + "#" + f + "_to_dtype", "cast", {tables[k]});
      tables[k] = b.view(nm.rotary + "#" + f + "_unsqueeze", tables[k], {1, 1, t, rd});
    }
  }
  std::uint64_t cache_read = 0;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("{}.{}", nm.layers, l), a = p + "." + nm.attn;
    const bool windowed_here = windowed_at(l);
    const std::int64_t kept_keys = windowed_here && decode ? std::min(keys, c.sliding_window - 1 + r.tokens) : keys;
    const auto norm = [&](const std::string& which, const TensorDesc& in) {
      return b.on_residual_stream([&] {
        return c.layer_norm ? b.layer_norm(p + "." + which, in) : b.rms_norm(p + "." + which, in, c.norm_offset);
      });
    };
    const auto residual = [&](const std::string& which, const TensorDesc& u, const TensorDesc& v) {
      return b.on_residual_stream([&] { return b.elementwise(OpKind::kBinary, p + which, "add", {u, v}); });
    };
    const TensorDesc normed = norm(nm.ln1, x);
    TensorDesc o;
    if (c.latent) {
      o = detail::latent_attention(b, c, a, normed, tables[0], tables[1], decode, decode ? keys : t, r.training,
                                   cache_read);
    } else {
      // phi3's qkv_proj, gpt2's c_attn, gpt_neox's query_key_value: q, k and v are views of it (no copy)
      const std::optional<TensorDesc> qkv =
          c.fused_projections
              ? std::optional<TensorDesc>(b.linear(a + "." + nm.qkv, normed, (h + 2 * kv) * d, c.qkv_bias))
              : std::nullopt;
      auto heads_of = [&](const std::string& proj, std::int64_t n) {
        const TensorDesc y = qkv ? b.op(OpKind::kSlice, a + "." + nm.qkv + "#" + proj.substr(0, 1), {*qkv},
                                        {batch, t, n * d}, {}, std::nullopt, free_view)
                                 : b.linear(a + "." + proj, normed, n * d, c.qkv_bias);
        const TensorDesc v = b.view(a + "." + proj + "#view", y, {batch, t, n, d});
        return b.op(OpKind::kTranspose, a + "." + proj + "#transpose", {v}, {batch, n, t, d}, {}, std::nullopt,
                    free_view);
      };
      // qwen3's q_norm and k_norm: an RMS norm over each head's dims, before the rotary positions
      const auto normed_heads = [&](const std::string& proj, std::int64_t n) {
        const TensorDesc y = heads_of(proj, n);
        return c.qk_norm ? b.rms_norm(a + "." + proj.substr(0, 1) + "_norm", y, false) : y;
      };
      const TensorDesc q = rd > 0 ? rotary(b, a + "#rotary_q", normed_heads("q_proj", h), tables[0], tables[1])
                                  : normed_heads("q_proj", h);
      const TensorDesc k = rd > 0 ? rotary(b, a + "#rotary_k", normed_heads("k_proj", kv), tables[0], tables[1])
                                  : normed_heads("k_proj", kv);
      const TensorDesc v = heads_of("v_proj", kv);
      // the KV cache: this step's keys and values written into it; decode attends to the cache
      // of C earlier tokens and this one, read from memory (compulsory bytes)
      TensorDesc keys_in = k, values_in = v;
      for (const auto& [which, y] : {std::pair<const char*, TensorDesc>{"key", k}, {"value", v}}) {
        if (r.training) break;  // a training step keeps no cache
        detail::cache_write(b, c, fmt::format("{}#cache_{}_write", a, which), y);
        if (decode) {
          const TensorDesc cache{
              fmt::format("{}.{}_cache", a, which), {batch, kv, kept_keys, d}, detail::cache_dtype(b, c)};
          cache_read += cache.bytes();
          (std::string(which) == "key" ? keys_in : values_in) = cache;
        }
      }
      // decode: its one query sees every cached key; prefill: causal over the prompt; a verify
      // step's queries see the cache and the new tokens up to their own (causal, bottom right)
      o = b.op(OpKind::kAttention, a + "#attention", {q, keys_in, values_in}, {batch, h, t, d}, {}, std::nullopt,
               [&](OpRecord& op) {
                 op.attributes.set("causal", !decode || t > 1 || windowed_here);
                 if (decode && (t > 1 || windowed_here))
                   op.attributes.set("causal_alignment", std::string("bottom_right"));
                 if (windowed_here) op.attributes.set("window", c.sliding_window);
                 if (c.attention_softcap > 0) op.attributes.set("softcap", c.attention_softcap);
                 if (decode) detail::mark_cache_read(b, c, op);
               });
      // the attention kernel writes [B, T, H, D] (SDPA's flash kernels; the transpose and
      // reshape before o_proj copy nothing), as the reference transformer's merge_heads
      o = b.op(OpKind::kTranspose, a + "#merge_heads", {o}, {batch, t, h, d}, {}, std::nullopt, free_view);
      o = b.view(a + "#reshape", o, {batch, t, h * d});
      o = b.linear(a + "." + nm.o, o, e, c.output_bias);
    }
    if (c.sandwich_norms) o = norm("post_attention_layernorm", o);  // gemma2: on the attention's output
    const TensorDesc before = x;
    // gpt_neox's parallel residual: the MLP reads the layer's input, not the attention's sum
    if (!c.parallel_residual) x = residual("#residual_attention", x, o);
    const TensorDesc m = norm(nm.ln2, x);
    if (!c.gated_mlp) {  // gpt2, gpt_neox: fc, activation, proj
      const std::string mp = p + "." + nm.mlp;
      const TensorDesc hidden = b.elementwise(OpKind::kActivation, mp + "." + nm.act, c.activation,
                                              {b.linear(mp + "." + nm.fc, m, c.intermediate, c.mlp_bias)});
      const TensorDesc out = b.linear(mp + "." + nm.proj, hidden, e, c.mlp_bias);
      x = c.parallel_residual ? residual("#residual", residual("#attention_mlp", out, o), before)
                              : residual("#residual_mlp", x, out);
      continue;
    }
    if (c.moe_layer(l)) {
      x = residual(
          "#residual_mlp", x,
          detail::mixture_of_experts(b, c, p + (c.architecture == "mixtral" ? ".block_sparse_moe" : ".mlp"), m, l));
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
    TensorDesc down = b.linear(p + ".mlp.down_proj",
                               b.elementwise(OpKind::kBinary, p + ".mlp#gate_up", "mul", {gate, up}), e, c.mlp_bias);
    if (c.sandwich_norms) down = norm("post_feedforward_layernorm", down);  // gemma2: on the MLP's output
    x = residual("#residual_mlp", x, down);
  }
  x = b.on_residual_stream(
      [&] { return c.layer_norm ? b.layer_norm(nm.final_norm, x) : b.rms_norm(nm.final_norm, x, c.norm_offset); });
  // logits of the last position only, as generation asks for them (logits_to_keep = 1); a verify
  // step needs every new token's
  if (!decode && t > 1 && !r.training) {
    x = b.op(OpKind::kSlice, "model#last_position", {x}, {batch, 1, e});
  }
  TensorDesc logits = b.linear(nm.lm_head, x, c.vocab, false, c.tied_embeddings ? nm.embed + ".weight" : "", true);
  if (c.final_softcap > 0) {  // gemma2: cap · tanh(logits / cap), as three ops
    logits = b.elementwise(OpKind::kBinary, nm.lm_head + "#softcap_divide", "div", {logits}, true);
    logits = b.elementwise(OpKind::kActivation, nm.lm_head + "#softcap_tanh", "tanh", {logits});
    logits = b.elementwise(OpKind::kBinary, nm.lm_head + "#softcap_scale", "mul", {logits}, true);
  }
  if (r.training) {  // every token's logits as the rows of the loss's cross entropy
    logits = b.view("model#logits_rows", logits, {batch * t, c.vocab});
  }
  g.mark_output(logits.name);
  g.set_batch(batch);
  g.add_note(
      decode && t > 1
          ? fmt::format("verify: {} new tokens per sequence at a context of {} cached tokens (up to {} keys "
                        "attended, causal among the new ones), logits for each; the KV cache read is {} B",
                        t, r.context, std::min(keys, windowed && c.sliding_layers.empty() ? c.sliding_window : keys),
                        grouped(cache_read))
      : decode
          ? fmt::format("decode: one token per sequence at a context of {} cached tokens ({} keys attended); "
                        "the KV cache read is {} B at this batch",
                        r.context, windowed && c.sliding_layers.empty() ? c.sliding_window : keys, grouped(cache_read))
      : r.training
          ? fmt::format("training: {} tokens per sequence, causal attention, no KV cache; logits of every position "
                        "(the loss's rows); the memory ledger keeps what fused kernels keep (a norm its input and "
                        "1/rms: transformers' eager RMSNorm also keeps its normalised input, 4 B an element per "
                        "norm; docs/training-memory.md)",
                        r.prompt)
          : fmt::format("prefill: {} prompt tokens per sequence, causal attention; logits of the last position "
                        "only (logits_to_keep = 1)",
                        r.prompt));
  g.add_note(fmt::format(
      "{}: {} layers, {} heads ({} kv heads, head_dim {}), {} parameters, KV cache {} B per token in {}; {}",
      c.architecture, c.layers, c.heads, c.kv_heads, c.head_dim, grouped(decoder_parameter_count(c)),
      grouped(kv_cache_bytes_per_token(c, r.dtype)), dtype_name(c.kv_cache_dtype.value_or(r.dtype)), c.source));
  if (c.latent) {
    const DecoderConfig::LatentAttention& la = *c.latent;
    g.add_note(fmt::format(
        "multi-head latent attention: {}keys and values from a latent of {} + {} rotary dims a token, which the KV "
        "cache keeps ({} B per token in {}; {} B if it kept each head's key and value); {}",
        la.q_rank > 0 ? fmt::format("queries through a rank-{} q_a_proj; ", la.q_rank) : "", la.kv_rank, la.rope_dims,
        grouped(kv_cache_bytes_per_token(c, r.dtype)), dtype_name(c.kv_cache_dtype.value_or(r.dtype)),
        grouped(product(
            {dim(c.layers), dim(c.heads), dim(la.nope_dims + la.rope_dims + la.value_dims), dtype_bytes(r.dtype)})),
        decode && la.absorbed
            ? "kv_b_proj absorbed (--mla absorbed): each head's query and output go through its kv_b_proj rows, and "
              "attention reads the latent cache as stored, as DeepSeek's inference code, vLLM and FlashMLA decode"
        : decode ? fmt::format("every step expands the cache's {} tokens through kv_b_proj, as transformers does: "
                               "kernels that absorb kv_b_proj into the query and the output (FlashMLA, vLLM's MLA; "
                               "--mla absorbed) skip that expansion",
                               keys)
                 : "the prompt's latent goes through kv_b_proj, as every implementation's prefill does"));
  }
  if (c.unbuilt_prediction_layers > 0) {
    g.add_note(
        fmt::format("the config's {} multi-token prediction layer{} (num_nextn_predict_layers) {} not in the "
                    "graph nor its parameters, as transformers does not build them",
                    c.unbuilt_prediction_layers, c.unbuilt_prediction_layers == 1 ? "" : "s",
                    c.unbuilt_prediction_layers == 1 ? "is" : "are"));
  }
  for (const std::string& note : c.notes) g.add_note(note);
  if (windowed) {
    std::int64_t sliding = 0;
    for (std::int64_t l = 0; l < c.layers; ++l) sliding += c.window_of(l) > 0;
    g.add_note(fmt::format(
        "sliding window of {}{}: each query attends to its {} most recent keys{}", c.sliding_window,
        sliding < c.layers
            ? fmt::format(" on {} of the {} layers (layer_types; the others attend to every key)", sliding, c.layers)
            : "",
        c.sliding_window,
        decode ? fmt::format(", and the cache keeps the {} before this step's tokens (a sliding-window "
                             "cache, as transformers keeps it)",
                             c.sliding_window - 1)
               : ""));
  }
  if (cq.activation_dtype) {
    const WeightQuantization& q = *cq.quantization;
    const std::string a(dtype_name(*cq.activation_dtype));
    g.add_note(fmt::format(
        "W8A8: the blocks' linear layers multiply {} activations by {} weights ({}) in {}: each linear's input "
        "quantized per token, once (each token's absmax its scale: an absolute value, a max, a divide, a round, a "
        "clamp and a conversion a value; the token's scale, 4 B, not counted), each sum scaled by the token's and "
        "the weight's scale{}; embeddings, norms{}, attention, lm_head and the KV cache in {}; {} B of weights in all",
        a, a, q.describe(), a, q.group_size > 0 ? " once per block of the inputs" : "",
        c.experts > 0 ? ", the router" : "", dtype_name(r.dtype), grouped(decoder_weight_bytes(cq, r.dtype))));
  } else if (cq.quantization) {
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
                    "{} tokens reach {:.2f} experts per layer ({})",
                    c.experts_per_token, c.experts, grouped(decoder_active_parameter_count(c)), n_tokens,
                    expected_experts_reached(c, n_tokens), detail::routing_said(c, n_tokens)));
  }
  g.finalize();
  return g;
}

}  // namespace neuralcost
