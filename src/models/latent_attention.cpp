// Multi-head latent attention and the grouped sigmoid router of deepseek_v3 (latent_attention.hpp).
#include "models/latent_attention.hpp"

#include <fmt/format.h>

namespace neuralcost::detail {
namespace {

const Tweak free_view = [](OpRecord& op) { op.attributes.set("materializes", false); };

Shape with_last(Shape s, std::int64_t last) {
  s.back() = last;
  return s;
}

/// apply_rotary_pos_emb_interleave on x [B, H, T, R]: the pairs (x0, x1), (x2, x3), ... rotated by
/// the first half of the tables, cat(x1·cos − x2·sin, x2·cos + x1·sin), x1 and x2 the even and odd
/// dims (strided views)
TensorDesc rotary_interleaved(Builder& b, const std::string& name, const TensorDesc& x, const TensorDesc& cos,
                              const TensorDesc& sin) {
  const std::int64_t half = x.shape.back() / 2;
  const TensorDesc ch =
      b.op(OpKind::kSlice, name + "#cos_half", {cos}, with_last(cos.shape, half), {}, std::nullopt, free_view);
  const TensorDesc sh =
      b.op(OpKind::kSlice, name + "#sin_half", {sin}, with_last(sin.shape, half), {}, std::nullopt, free_view);
  const Shape hs = with_last(x.shape, half);
  const TensorDesc x1 = b.op(OpKind::kSlice, name + "#even", {x}, hs, {}, std::nullopt, free_view);
  const TensorDesc x2 = b.op(OpKind::kSlice, name + "#odd", {x}, hs, {}, std::nullopt, free_view);
  const TensorDesc first = b.elementwise(OpKind::kBinary, name + "#first", "sub",
                                         {b.elementwise(OpKind::kBinary, name + "#even_cos", "mul", {x1, ch}),
                                          b.elementwise(OpKind::kBinary, name + "#odd_sin", "mul", {x2, sh})});
  const TensorDesc second = b.elementwise(OpKind::kBinary, name + "#second", "add",
                                          {b.elementwise(OpKind::kBinary, name + "#odd_cos", "mul", {x2, ch}),
                                           b.elementwise(OpKind::kBinary, name + "#even_sin", "mul", {x1, sh})});
  return b.op(OpKind::kConcat, name, {first, second}, x.shape);
}

/// deepseek_v2's apply_rotary_emb on x [B, H, T, R] with the complex table [1, 1, T, R/2, 2]: x in
/// fp32 viewed as R/2 complex pairs, times the table (a complex product), viewed back as R reals and
/// cast to x's type.
TensorDesc rotary_complex(Builder& b, const std::string& name, const TensorDesc& x, const TensorDesc& table) {
  const bool fp32 = b.dtype() == DType::kFp32;
  TensorDesc y = fp32 ? x : b.op(OpKind::kUnary, name + "#to_fp32", {x}, x.shape, {}, DType::kFp32, [](OpRecord& r) {
    r.attributes.set("function", std::string("cast"));
  });
  Shape pairs = x.shape;
  pairs.back() /= 2;
  pairs.push_back(2);
  y = b.op(OpKind::kReshape, name + "#view_as_complex", {y}, pairs, {}, DType::kFp32);
  y = b.op(OpKind::kBinary, name + "#complex_mul", {y, table}, pairs, {}, DType::kFp32,
           [](OpRecord& r) { r.attributes.set("function", std::string("complex_mul")); });
  y = b.op(OpKind::kReshape, name + "#view_as_real", {y}, x.shape, {}, DType::kFp32);
  return fp32 ? y : b.op(OpKind::kUnary, name, {y}, x.shape, {}, b.dtype(), [](OpRecord& r) {
    r.attributes.set("function", std::string("cast"));
  });
}

TensorDesc rotary_of(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& x,
                     const TensorDesc& cos, const TensorDesc& sin) {
  if (c.latent->complex_rotary) return rotary_complex(b, name, x, cos);
  return c.latent->interleave ? rotary_interleaved(b, name, x, cos, sin) : rotary(b, name, x, cos, sin);
}

/// A decode step with kv_b_proj absorbed (DeepSeek-V3's inference code, attn_impl "absorb"; vLLM's
/// and FlashMLA's decode): each head's nope query times its kv_b_proj key rows gives a query in the
/// latent space; attention runs over the cache as it is stored (one key of kv_rank + rope dims a
/// token shared by every head, its first kv_rank dims the value); each head's latent output times
/// its kv_b_proj value rows gives its value dims. The latent and the rotary key are kept side by
/// side, one cache tensor [B, 1, K, kv_rank + rope] (FlashMLA's layout).
TensorDesc absorbed_decode(Builder& b, const DecoderConfig& c, const std::string& a, const TensorDesc& q_pass,
                           const TensorDesc& q_rotated, std::int64_t keys, std::uint64_t& cache_read) {
  const DecoderConfig::LatentAttention& la = *c.latent;
  const std::int64_t batch = q_pass.shape[0], h = c.heads, t = q_pass.shape[2], r = la.kv_rank;
  const std::int64_t width = r + la.rope_dims;
  const TensorDesc cache{a + ".latent_cache", {batch, 1, keys, width}, cache_dtype(b, c)};
  cache_read += cache.bytes();
  // kv_b_proj's weight [H·(nope + v), R] as each head's key rows [H, nope, R] and value rows [H, v, R],
  // in the compute dtype: with quantized weights, vLLM dequantizes them once when it loads the model
  const std::string w = a + ".kv_b_proj.weight";
  const Tweak dequantized_rows = [&](OpRecord& op) {
    if (b.quantization()) {
      op.attributes.set("approximation",
                        fmt::format("kv_b_proj's rows read in {} by the absorbed decode: with {} weights, vLLM "
                                    "dequantizes them once when it loads the model",
                                    dtype_name(b.dtype()), b.quantization()->spec()));
    }
  };
  const TensorDesc q_latent =
      b.op(OpKind::kMatMul, a + ".kv_b_proj#absorb_key", {q_pass}, {batch, h, t, r},
           {{w + "#key", {h, la.nope_dims, r}, b.dtype(), true}}, std::nullopt, dequantized_rows);
  const TensorDesc query = b.op(OpKind::kConcat, a + "#query", {q_latent, q_rotated}, {batch, h, t, width});
  const TensorDesc value =
      b.op(OpKind::kSlice, a + ".latent_cache#value", {cache}, {batch, 1, keys, r}, {}, cache.dtype, free_view);
  TensorDesc o = b.op(OpKind::kAttention, a + "#attention", {query, cache, value}, {batch, h, t, r}, {}, std::nullopt,
                      [&](OpRecord& op) {
                        op.attributes.set("causal", t > 1);
                        if (t > 1) op.attributes.set("causal_alignment", std::string("bottom_right"));
                        op.attributes.set("value_in_key", true);
                        mark_cache_read(b, c, op);
                      });
  o = b.op(OpKind::kMatMul, a + ".kv_b_proj#absorb_value", {o}, {batch, h, t, la.value_dims},
           {{w + "#value", {h, la.value_dims, r}, b.dtype(), true}}, std::nullopt, [&](OpRecord& op) {
             op.attributes.set("transpose_b", true);
             dequantized_rows(op);
           });
  o = b.op(OpKind::kTranspose, a + "#merge_heads", {o}, {batch, t, h, la.value_dims});
  o = b.view(a + "#reshape", o, {batch, t, h * la.value_dims});
  return b.linear(a + ".o_proj", o, c.hidden, c.output_bias);
}

}  // namespace

TensorDesc latent_attention(Builder& b, const DecoderConfig& c, const std::string& a, const TensorDesc& normed,
                            const TensorDesc& cos, const TensorDesc& sin, bool decode, std::int64_t keys, bool training,
                            std::uint64_t& cache_read) {
  const DecoderConfig::LatentAttention& la = *c.latent;
  const std::int64_t batch = normed.shape[0], t = normed.shape[1], h = c.heads;
  const std::int64_t qk = la.nope_dims + la.rope_dims, r = la.kv_rank, rope = la.rope_dims;
  // queries: q_b_proj(q_a_layernorm(q_a_proj(x))) or q_proj(x), each head's nope and rope dims
  const TensorDesc q_states =
      la.q_rank > 0
          ? b.linear(a + ".q_b_proj",
                     b.rms_norm(a + ".q_a_layernorm", b.linear(a + ".q_a_proj", normed, la.q_rank, c.qkv_bias), false),
                     h * qk, false)
          : b.linear(a + ".q_proj", normed, h * qk, false);
  const TensorDesc q_heads =
      b.op(OpKind::kTranspose, a + ".q#transpose", {b.view(a + ".q#view", q_states, {batch, t, h, qk})},
           {batch, h, t, qk}, {}, std::nullopt, free_view);
  const TensorDesc q_pass =
      b.op(OpKind::kSlice, a + ".q#pass", {q_heads}, {batch, h, t, la.nope_dims}, {}, std::nullopt, free_view);
  const TensorDesc q_rot =
      b.op(OpKind::kSlice, a + ".q#rot", {q_heads}, {batch, h, t, rope}, {}, std::nullopt, free_view);
  // the latent: kv_a_proj_with_mqa to kv_rank + rope dims; the first normed, the rest one rotary key
  const TensorDesc compressed = b.linear(a + ".kv_a_proj_with_mqa", normed, r + rope, c.qkv_bias);
  const TensorDesc kv_nope = b.rms_norm(
      a + ".kv_a_layernorm",
      b.op(OpKind::kSlice, a + ".kv_a_proj_with_mqa#nope", {compressed}, {batch, t, r}, {}, std::nullopt, free_view),
      false);
  const TensorDesc k_rot_in = b.op(OpKind::kSlice, a + ".kv_a_proj_with_mqa#rot", {compressed}, {batch, 1, t, rope}, {},
                                   std::nullopt, free_view);
  const TensorDesc q_rotated = rotary_of(b, c, a + "#rotary_q", q_rot, cos, sin);
  const TensorDesc k_rotated = rotary_of(b, c, a + "#rotary_k", k_rot_in, cos, sin);
  TensorDesc latent = b.view(a + ".kv_a_layernorm#view", kv_nope, {batch, 1, t, r}), k_rot = k_rotated;
  // the cache keeps the latent and the rotated key: this step's written; decode reads them all
  if (!training) {
    cache_write(b, c, a + "#cache_latent_write", latent);
    cache_write(b, c, a + "#cache_rope_key_write", k_rot);
  }
  if (decode && la.absorbed) return absorbed_decode(b, c, a, q_pass, q_rotated, keys, cache_read);
  if (decode) {
    latent = TensorDesc{a + ".latent_cache", {batch, 1, keys, r}, cache_dtype(b, c)};
    k_rot = TensorDesc{a + ".rope_key_cache", {batch, 1, keys, rope}, cache_dtype(b, c)};
    cache_read += latent.bytes() + k_rot.bytes();
    if (cache_dtype(b, c) != b.dtype()) {  // kv_b_proj and the key's copy take the compute dtype
      const auto dequantize = [&](const std::string& what, const TensorDesc& x) {
        const bool scaled = cache_dtype(b, c) == DType::kFp8 || cache_dtype(b, c) == DType::kInt8;
        return b.op(OpKind::kUnary, a + "#" + what, {x}, x.shape, {}, b.dtype(),
                    [&](OpRecord& op) { op.attributes.set("function", std::string(scaled ? "dequantize" : "cast")); });
      };
      latent = dequantize("latent_cache_read", latent);
      k_rot = dequantize("rope_key_cache_read", k_rot);
    }
  }
  const TensorDesc query = b.op(OpKind::kConcat, a + "#query", {q_pass, q_rotated}, {batch, h, t, qk});
  // expand_kv: every cached token's latent through kv_b_proj to each head's nope key and value
  const TensorDesc kv = b.linear(a + ".kv_b_proj", latent, h * (la.nope_dims + la.value_dims), false);
  const TensorDesc kv_heads = b.op(OpKind::kTranspose, a + ".kv_b_proj#transpose",
                                   {b.view(a + ".kv_b_proj#view", kv, {batch, keys, h, la.nope_dims + la.value_dims})},
                                   {batch, h, keys, la.nope_dims + la.value_dims}, {}, std::nullopt, free_view);
  const TensorDesc k_nope = b.op(OpKind::kSlice, a + ".kv_b_proj#key", {kv_heads}, {batch, h, keys, la.nope_dims}, {},
                                 std::nullopt, free_view);
  const TensorDesc value = b.op(OpKind::kSlice, a + ".kv_b_proj#value", {kv_heads}, {batch, h, keys, la.value_dims}, {},
                                std::nullopt, free_view);
  const TensorDesc k_rot_heads = b.op(OpKind::kReshape, a + "#rope_key_expand", {k_rot}, {batch, h, keys, rope});
  // key_states: a new tensor, the nope key and the shared rotary key copied into it
  const TensorDesc key = b.op(OpKind::kConcat, a + "#key", {k_nope, k_rot_heads}, {batch, h, keys, qk});
  TensorDesc o = b.op(OpKind::kAttention, a + "#attention", {query, key, value}, {batch, h, t, la.value_dims}, {},
                      std::nullopt, [&](OpRecord& op) {
                        op.attributes.set("causal", !decode || t > 1);
                        if (decode && t > 1) op.attributes.set("causal_alignment", std::string("bottom_right"));
                      });
  o = b.op(OpKind::kTranspose, a + "#merge_heads", {o}, {batch, t, h, la.value_dims});
  o = b.view(a + "#reshape", o, {batch, t, h * la.value_dims});
  return b.linear(a + ".o_proj", o, c.hidden, c.output_bias);
}

namespace {

/// The router's ops under module `g`, in fp32.
struct RouterOps {
  Builder& b;
  const std::string& g;
  TensorDesc fp32(OpKind kind, const std::string& op, const std::string& function, std::vector<TensorDesc> in,
                  Shape out, const Tweak& more = {}) const {
    return b.op(kind, g + op, std::move(in), std::move(out), {}, DType::kFp32, [&](OpRecord& r) {
      if (!function.empty()) r.attributes.set("function", function);
      if (more) more(r);
    });
  }
  /// torch.topk's `keep` of `of` in each of `rows` rows (its work is not specified: counted as keep
  /// passes of of − 1 comparisons, named)
  TensorDesc topk(const std::string& op, const TensorDesc& x, std::int64_t of, std::int64_t keep, std::int64_t rows,
                  Shape out, DType dtype) const {
    return b.op(OpKind::kCustom, g + op, {x}, std::move(out), {}, dtype, [&](OpRecord& r) {
      r.attributes.set("function", std::string("topk"));
      r.attributes.set("flops", static_cast<std::int64_t>(rows * keep * (of - 1)));
      r.attributes.set("approximation",
                       fmt::format("top-{} of {} counted as {} passes of {} comparisons", keep, of, keep, of - 1));
    });
  }
  /// F.linear(x.float(), weight.float()) on m [B, T, E]: the experts' logits [tokens, n] in fp32
  /// (both casts no-ops in an fp32 model)
  TensorDesc logits(const DecoderConfig& c, const TensorDesc& m) const;
  /// The group mask of `group_idx` [tokens, kept] expanded to every expert, as bool, negated; and
  /// `scores` with the experts of the other groups set to 0 (masked_fill)
  TensorDesc masked(const DecoderConfig& c, const TensorDesc& scores, const TensorDesc& group_idx) const;
};

TensorDesc RouterOps::logits(const DecoderConfig& c, const TensorDesc& m) const {
  const std::int64_t tokens = m.shape[0] * m.shape[1], e = c.hidden, n = c.experts;
  TensorDesc x = b.view(g + "#rows", m, {tokens, e});
  TensorDesc logits;
  const ParameterDesc weight{g + ".weight", {n, e}, b.dtype(), true};
  if (b.dtype() == DType::kFp32) {
    logits = b.op(OpKind::kLinear, g, {x}, {tokens, n}, {weight});
  } else {
    x = fp32(OpKind::kUnary, "#hidden_to_fp32", "cast", {x}, {tokens, e});
    const TensorDesc w = b.op(OpKind::kUnary, g + "#weight_to_fp32", {}, {n, e}, {weight}, DType::kFp32,
                              [](OpRecord& r) { r.attributes.set("function", std::string("cast")); });
    logits = b.op(OpKind::kMatMul, g,
                  {x, b.op(OpKind::kTranspose, g + "#weight_t", {w}, {e, n}, {}, DType::kFp32, free_view)}, {tokens, n},
                  {}, DType::kFp32);
  }
  return logits;
}

TensorDesc RouterOps::masked(const DecoderConfig& c, const TensorDesc& scores, const TensorDesc& group_idx) const {
  const std::int64_t tokens = scores.shape[0], n = c.experts, groups = c.expert_groups;
  const TensorDesc zeros = fp32(OpKind::kFill, "#group_mask", "constant", {}, {tokens, groups});
  const TensorDesc group_mask = b.op(OpKind::kScatter, g + "#group_mask_scatter", {zeros, group_idx}, {tokens, groups},
                                     {}, DType::kFp32, [](OpRecord& r) { r.attributes.set("in_place", true); });
  // the group mask expanded to every expert (a copy: reshape of an expanded view), as bool, negated
  const TensorDesc score_mask = fp32(OpKind::kReshape, "#score_mask", "", {group_mask}, {tokens, n},
                                     [](OpRecord& r) { r.attributes.set("materializes", true); });
  TensorDesc mask = b.op(OpKind::kUnary, g + "#score_mask_bool", {score_mask}, {tokens, n}, {}, DType::kBool,
                         [](OpRecord& r) { r.attributes.set("function", std::string("cast")); });
  mask = b.op(OpKind::kUnary, g + "#score_mask_not", {mask}, {tokens, n}, {}, DType::kBool,
              [](OpRecord& r) { r.attributes.set("function", std::string("not")); });
  return fp32(OpKind::kBinary, "#masked_fill", "where", {scores, mask}, {tokens, n});
}

}  // namespace

TensorDesc grouped_sigmoid_router(Builder& b, const DecoderConfig& c, const std::string& g, const TensorDesc& m) {
  const std::int64_t tokens = m.shape[0] * m.shape[1], n = c.experts, k = c.experts_per_token;
  const std::int64_t groups = c.expert_groups, kept = c.expert_groups_per_token, per_group = n / groups;
  const RouterOps ops{b, g};
  const auto fp32 = [&](OpKind kind, const std::string& op, const std::string& function, std::vector<TensorDesc> in,
                        Shape out,
                        const Tweak& more = {}) { return ops.fp32(kind, op, function, std::move(in), out, more); };
  const auto topk = [&](const std::string& op, const TensorDesc& x, std::int64_t of, std::int64_t keep,
                        std::int64_t rows, Shape out,
                        DType dtype) { return ops.topk(op, x, of, keep, rows, out, dtype); };
  const TensorDesc logits = ops.logits(c, m);
  const TensorDesc scores = fp32(OpKind::kActivation, "#sigmoid", "sigmoid", {logits}, {tokens, n});
  // + e_score_correction_bias (a buffer) for the choice only
  const TensorDesc choice = b.op(OpKind::kBinary, g + "#correction", {scores}, {tokens, n},
                                 {{g + ".e_score_correction_bias", {n}, DType::kFp32, false}}, DType::kFp32,
                                 [](OpRecord& r) { r.attributes.set("function", std::string("add")); });
  // each group's score: the sum of its two best experts'; the topk_group best groups kept
  const TensorDesc best_two = topk("#group_top2", b.view(g + "#groups", choice, {tokens, groups, per_group}), per_group,
                                   2, tokens * groups, {tokens, groups, 2}, DType::kFp32);
  const TensorDesc group_scores = fp32(OpKind::kReduction, "#group_scores", "sum", {best_two}, {tokens, groups});
  const TensorDesc group_idx = topk("#group_topk", group_scores, groups, kept, tokens, {tokens, kept}, DType::kInt64);
  const TensorDesc masked = ops.masked(c, choice, group_idx);
  const TensorDesc chosen = topk("#topk", masked, n, k, tokens, {tokens, k}, DType::kInt64);
  TensorDesc weights = b.op(OpKind::kGather, g + "#weights", {scores, chosen}, {tokens, k}, {}, DType::kFp32);
  if (c.normalize_top_k) {
    const TensorDesc sum = fp32(OpKind::kReduction, "#weights_sum", "sum", {weights}, {tokens, 1});
    const TensorDesc denominator = fp32(OpKind::kBinary, "#weights_sum_eps", "add", {sum}, {tokens, 1},
                                        [](OpRecord& r) { r.attributes.set("scalar_operand", true); });
    weights = fp32(OpKind::kBinary, "#weights_normalised", "div", {weights, denominator}, {tokens, k});
  }
  weights = fp32(OpKind::kBinary, "#weights_scaled", "mul", {weights}, {tokens, k},
                 [](OpRecord& r) { r.attributes.set("scalar_operand", true); });
  return b.view(g + "#weights_view", weights, {m.shape[0], m.shape[1], k});
}

TensorDesc softmax_group_router(Builder& b, const DecoderConfig& c, const std::string& g, const TensorDesc& m) {
  const std::int64_t tokens = m.shape[0] * m.shape[1], n = c.experts, k = c.experts_per_token;
  const std::int64_t groups = c.expert_groups, kept = c.expert_groups_per_token;
  const RouterOps ops{b, g};
  TensorDesc scores = b.op(OpKind::kSoftmax, g + "#softmax", {ops.logits(c, m)}, {tokens, n}, {}, DType::kFp32,
                           [](OpRecord& r) { r.attributes.set("axis", std::int64_t{-1}); });
  if (groups > 1) {  // group_limited_greedy: the topk_group groups with the best maximum score
    const TensorDesc group_scores =
        ops.fp32(OpKind::kReduction, "#group_scores", "max",
                 {b.view(g + "#groups", scores, {tokens, groups, n / groups})}, {tokens, groups});
    const TensorDesc group_idx =
        ops.topk("#group_topk", group_scores, groups, kept, tokens, {tokens, kept}, DType::kInt64);
    scores = ops.masked(c, scores, group_idx);
  }
  // topk's values are the weights (sorted=False), times routed_scaling_factor
  TensorDesc weights = ops.topk("#topk", scores, n, k, tokens, {tokens, k}, DType::kFp32);
  weights = ops.fp32(OpKind::kBinary, "#weights_scaled", "mul", {weights}, {tokens, k},
                     [](OpRecord& r) { r.attributes.set("scalar_operand", true); });
  return b.view(g + "#weights_view", weights, {m.shape[0], m.shape[1], k});
}

TensorDesc complex_rotary_table(Builder& b, const std::string& module, std::int64_t t, std::int64_t rotary_dims) {
  const std::int64_t half = rotary_dims / 2;
  const auto in_module = [&](OpRecord& r) { r.attributes.set("module", module); };
  // freqs = position_ids[..., None].float() * inv_freq
  const TensorDesc positions{"position_ids", {1, t, 1}, DType::kFp32};
  const TensorDesc freqs = b.op(OpKind::kBinary, module + "#freqs", {positions}, {1, t, half},
                                {{module + ".inv_freq", {half}, DType::kFp32, false}}, DType::kFp32, [&](OpRecord& r) {
                                  r.attributes.set("function", std::string("mul"));
                                  in_module(r);
                                });
  // torch.polar(ones_like(freqs), freqs): each pair abs·cos(angle), abs·sin(angle)
  const TensorDesc ones = b.op(OpKind::kFill, module + "#ones", {}, {1, t, half}, {}, DType::kFp32, [&](OpRecord& r) {
    r.attributes.set("function", std::string("constant"));
    in_module(r);
  });
  TensorDesc table =
      b.op(OpKind::kBinary, module + "#polar",
           {b.op(OpKind::kReshape, module + "#abs", {ones}, {1, t, half, 1}, {}, DType::kFp32, in_module),
            b.op(OpKind::kReshape, module + "#angle", {freqs}, {1, t, half, 1}, {}, DType::kFp32, in_module)},
           {1, t, half, 2}, {}, DType::kFp32, [&](OpRecord& r) {
             r.attributes.set("function", std::string("polar"));
             in_module(r);
           });
  // · attention_scaling: a complex table times a real scalar
  table = b.op(OpKind::kBinary, module + "#scaled", {table}, {1, t, half, 2}, {}, DType::kFp32, [&](OpRecord& r) {
    r.attributes.set("function", std::string("mul"));
    r.attributes.set("scalar_operand", true);
    in_module(r);
  });
  return b.op(OpKind::kReshape, module + "#unsqueeze", {table}, {1, 1, t, half, 2}, {}, DType::kFp32, in_module);
}

}  // namespace neuralcost::detail
