// Decoder-only LLMs (issue 25) as op graphs of the existing op kinds: token embedding, RMS norm,
// q/k/v projections (grouped-query: fewer kv heads), rotary positions, attention over a KV
// cache, SwiGLU MLP, LM head. From a Hugging Face style config.json (read locally) or a built-in
// preset, for one phase: a prefill of P prompt tokens (time to first token) or one decode step
// at a context of C cached tokens (time per output token). docs/llm.md says what is counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/core/graph.hpp"
#include "neuralcost/models/decoder_variant.hpp"

namespace neuralcost {

struct DecoderConfig {
  std::string architecture;   ///< the config's model_type: llama, mistral, qwen2, qwen2_moe, qwen3, qwen3_moe, mixtral,
                              ///< deepseek_v2, deepseek_v3, gemma, gemma2, phi3, gpt2, gpt_neox
  std::string source;         ///< where the figures come from (a file, a preset's reference)
  std::int64_t hidden = 0;    ///< hidden_size
  std::int64_t layers = 0;    ///< num_hidden_layers
  std::int64_t heads = 0;     ///< num_attention_heads
  std::int64_t kv_heads = 0;  ///< num_key_value_heads (= heads without grouped-query attention)
  std::int64_t head_dim = 0;  ///< head_dim (default hidden / heads)
  std::int64_t intermediate = 0;    ///< intermediate_size of the SwiGLU MLP
  std::int64_t vocab = 0;           ///< vocab_size
  std::int64_t max_positions = 0;   ///< max_position_embeddings
  std::int64_t sliding_window = 0;  ///< 0: none
  /// gemma2's layer_types: which layers attend within `sliding_window` (the others attend to every
  /// key); empty: every layer, when sliding_window is set
  std::vector<bool> sliding_layers;
  /// The window layer `layer` attends within; 0: every key.
  std::int64_t window_of(std::int64_t layer) const {
    if (sliding_window == 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return sliding_layers[static_cast<std::size_t>(layer)] ? sliding_window : 0;
  }
  /// gemma2: norms after the attention and after the MLP too (post_attention_layernorm on the
  /// attention's output, pre_ and post_feedforward_layernorm around the MLP): four a layer
  bool sandwich_norms = false;
  /// gemma2: attention scores and final logits soft-capped, cap · tanh(x / cap); 0: not
  double attention_softcap = 0;
  double final_softcap = 0;
  bool tied_embeddings = false;  ///< tie_word_embeddings: the LM head is the embedding
  bool qkv_bias = false;         ///< biases on q, k, v (qwen2; llama's attention_bias)
  bool output_bias = false;      ///< a bias on o_proj (llama's attention_bias)
  bool mlp_bias = false;         ///< biases on the MLP's projections (llama's mlp_bias)
  /// qwen3, qwen3_moe: an RMS norm over each head's head_dim on q and on k (q_norm, k_norm), before
  /// the rotary positions
  bool qk_norm = false;
  /// mixture of experts (mixtral): num_local_experts SwiGLU experts per layer, each token routed
  /// to num_experts_per_tok of them; 0: a dense MLP
  std::int64_t experts = 0;
  std::int64_t experts_per_token = 0;
  /// Expert parallelism (model_parallel.hpp): this device holds experts / expert_parallel of the
  /// experts and runs, for them, the rows that the tokens of expert_parallel devices route there
  /// (as many rows as its own tokens make, on average). 1: every expert here.
  std::int64_t expert_parallel = 1;
  /// qwen2_moe: each expert's intermediate size (moe_intermediate_size); 0: intermediate (mixtral)
  std::int64_t expert_intermediate = 0;
  /// qwen2_moe: a shared SwiGLU expert of this intermediate size every token goes through, its
  /// output scaled by sigmoid(shared_expert_gate(x)); 0: none. deepseek_v3: its n_shared_experts
  /// shared experts as one of moe_intermediate_size · n_shared_experts, not gated
  std::int64_t shared_expert_intermediate = 0;
  bool shared_expert_gate = true;  ///< qwen2_moe's sigmoid gate on the shared expert; false: deepseek_v3's
  /// deepseek_v3's router (DeepseekV3TopkRouter): sigmoid scores of an fp32 linear, plus a
  /// correction bias for the choice, k experts chosen among the `expert_groups_per_token` of
  /// `expert_groups` groups with the best two-expert sums; the k sigmoid scores (renormalised where
  /// normalize_top_k) times `routed_scaling`. false: softmax and top-k (mixtral, qwen2_moe)
  bool grouped_sigmoid_router = false;
  /// deepseek_v2's router (DeepseekV2TopkRouter): softmax scores of an fp32 linear, the k best of
  /// them (topk_method greedy: expert_groups 1) or the k best within the expert_groups_per_token
  /// groups of expert_groups with the best maximum (group_limited_greedy), times routed_scaling,
  /// never renormalised
  bool softmax_group_router = false;
  std::int64_t expert_groups = 1;
  std::int64_t expert_groups_per_token = 1;
  double routed_scaling = 1.0;
  /// deepseek_v3's multi-head latent attention (MLA, DeepseekV3Attention): q from q_a_proj (to
  /// q_rank), q_a_layernorm and q_b_proj (or one q_proj when q_rank is 0), each head's
  /// nope_dims + rope_dims; keys and values from one latent kv_a_proj_with_mqa (kv_rank + rope_dims:
  /// the rope part one key shared by the heads), kv_a_layernorm, and kv_b_proj to every head's
  /// nope_dims of key and value_dims of value. The KV cache keeps the latent (kv_rank + rope_dims a
  /// token and layer), and every step expands the whole cache through kv_b_proj, as transformers
  /// does. head_dim is nope_dims + rope_dims and rotary_dims rope_dims.
  struct LatentAttention {
    std::int64_t q_rank = 0;
    std::int64_t kv_rank = 0;
    std::int64_t rope_dims = 0;
    std::int64_t nope_dims = 0;
    std::int64_t value_dims = 0;
    bool interleave = true;  ///< rope_interleave: pairs (x0, x1), (x2, x3), ... rotated
    /// deepseek_v2: the pairs rotated as complex numbers (apply_rotary_emb: view_as_complex, a product
    /// with the complex tables torch.polar made, view_as_real), in fp32
    bool complex_rotary = false;
    /// --mla absorbed: a decode step absorbs kv_b_proj into the query and the output and attends
    /// over the latent cache as stored (DeepSeek's inference code, vLLM, FlashMLA); false: it
    /// expands the whole cache through kv_b_proj, as transformers does. Prefill is the same either way.
    bool absorbed = false;
  };
  std::optional<LatentAttention> latent;
  /// What the graph's notes say about how the config was read (a field read as transformers reads
  /// it, not as its name says)
  std::vector<std::string> notes;
  /// deepseek_v3's num_nextn_predict_layers: multi-token prediction modules in the checkpoint that
  /// transformers does not build (nor does this graph); said in a note
  std::int64_t unbuilt_prediction_layers = 0;
  /// the k routing weights renormalised to sum 1 (mixtral always; qwen2_moe's norm_topk_prob)
  bool normalize_top_k = true;
  /// A measured routing (--routing, with_routing): for each layer with experts, the tokens each
  /// expert took over `tokens` routed tokens (k · tokens in all). A step's tokens then reach expert e
  /// with probability 1 − (1 − count_e / tokens)^N each, instead of uniformly.
  struct RoutingHistogram {
    std::string file;
    std::string description;  ///< the file's "source", what it was measured on (may be empty)
    std::int64_t tokens = 0;
    std::vector<std::vector<std::int64_t>> counts;  ///< per layer: [experts] for a layer with experts, empty otherwise
    /// per layer: the first layer with the same counts (itself when none before; with_routing sets
    /// it), so layers routed alike are analysed once
    std::vector<std::int64_t> first_alike;
  };
  std::optional<RoutingHistogram> routing;
  /// qwen2_moe: layer l has experts when (l + 1) % sparse_step == 0 and l is not in dense_layers
  /// (decoder_sparse_step, mlp_only_layers); the others a dense MLP of `intermediate`
  std::int64_t sparse_step = 1;
  std::vector<std::int64_t> dense_layers;
  /// Whether layer `layer` (0-based) has experts.
  bool moe_layer(std::int64_t layer) const;
  /// Layers with experts.
  std::int64_t moe_layer_count() const;
  /// Each expert's intermediate size.
  std::int64_t expert_size() const { return expert_intermediate > 0 ? expert_intermediate : intermediate; }
  std::string activation = "silu";  ///< the MLP's: silu (SwiGLU), gelu_tanh (gemma's GeGLU, gpt2's gelu_new), gelu
  bool embedding_scale = false;     ///< gemma: the embeddings · sqrt(hidden_size)
  bool norm_offset = false;         ///< gemma: RMS norms scale by (1 + weight)
  /// phi3: q, k, v as one qkv_proj and gate, up as one gate_up_proj, each split by views (gpt2's
  /// c_attn and gpt_neox's query_key_value are such a qkv)
  bool fused_projections = false;
  /// gpt2, gpt_neox: LayerNorm (weight and bias) where llama has RMSNorm; an MLP of fc, activation
  /// and proj where llama gates; gpt2's learned positions; gpt_neox's parallel residual
  /// (x + attention(ln1 x) + mlp(ln2 x))
  bool layer_norm = false;
  bool gated_mlp = true;
  bool learned_positions = false;
  bool parallel_residual = false;
  /// The dims of each head that rotary positions rotate: head_dim · partial_rotary_factor (gpt_neox's
  /// rotary_pct); 0: none (gpt2's learned positions)
  std::int64_t rotary_dims = 0;
  /// The weights of the blocks' linear layers stored quantized (the config's quantization_config,
  /// or --weights); embeddings, norms, the router and lm_head stay in the compute dtype.
  std::optional<WeightQuantization> quantization;
  /// The KV cache's storage (--kv-cache): fp8 (e4m3) or int8 values with one fp32 scale per layer's
  /// keys and values (vLLM's and TensorRT-LLM's per-tensor scales), or another float type; nullopt:
  /// the compute dtype. A step quantizes the values it writes; attention reads the stored values and
  /// converts them as it loads them.
  std::optional<DType> kv_cache_dtype;
  /// W8A8 (--activations): the quantized linears multiply activations quantized per token (int8 or
  /// fp8, each token's absmax its scale, found as the kernel loads it) by the 8-bit weights, in
  /// that type, and scale the sums by the two scales (vLLM's dynamic per-token W8A8, SmoothQuant's
  /// int8, DeepSeek-V3's fp8 blocks); nullopt: weight-only (dequantized to the compute dtype).
  std::optional<DType> activation_dtype;
};

/// Reads a config.json's object. `where` names it in errors. Supported model_type: llama,
/// mistral, qwen2, qwen2_moe, qwen3, qwen3_moe, mixtral, deepseek_v2, deepseek_v3, gemma, phi3, gpt2, gpt_neox; another
/// is kUnimplemented naming the supported ones; a field that changes the math and is not modeled (other experts,
/// another activation, partial rotary positions) is kUnimplemented naming the field; missing, inconsistent or absurd
/// sizes are kInvalidArgument naming the field.
DecoderConfig parse_decoder_config(const nlohmann::json& config, const std::string& where);

/// Whether `object` looks like a transformers config (a string model_type): parse_decoder_config then
/// names a missing field or an unsupported model_type.
bool looks_like_decoder_config(const nlohmann::json& object);
/// The object of a readable .json file that looks like a decoder config; nullopt for anything else
/// (another name, an unreadable file, not JSON, another kind of JSON).
std::optional<nlohmann::json> decoder_config_file(const std::string& path);

/// The built-in presets ("llama-2-7b", ...), each with the source of its figures.
const std::vector<std::string>& decoder_preset_names();
/// A preset's config; kNotFound for another name.
DecoderConfig decoder_preset(const std::string& name);

enum class DecoderPhase { kPrefill, kDecode };

struct DecoderRequest {
  DecoderPhase phase = DecoderPhase::kPrefill;
  std::int64_t batch = 1;
  std::int64_t prompt = 512;    ///< prefill: tokens per sequence
  std::int64_t context = 1024;  ///< decode: tokens already in the KV cache
  /// decode: new tokens per sequence this step, 1 for generation; γ + 1 for a speculative verify
  /// step (the last token and γ drafted ones, each attending to the cache and the new tokens
  /// before it, and logits for each)
  std::int64_t tokens = 1;
  DType dtype = DType::kBf16;  ///< weights, activations and the KV cache
  /// A training step's forward pass (prefill only): no KV cache is written, and logits come for
  /// every position as [batch · prompt, vocab], so that the step's loss is a cross entropy over
  /// every token (language-model training; transformers' ForCausalLMLoss)
  bool training = false;
  /// --weights, --kv-cache, --mla, --routing (with_variant): applied to the config; empty: the config's
  DecoderVariant variant;
};

/// Elements of every parameter (the embedding once when tied; every expert).
std::uint64_t decoder_parameter_count(const DecoderConfig& config);
/// The parameters one token computes with: all but the experts it is not routed to (= the
/// total for a dense model).
std::uint64_t decoder_active_parameter_count(const DecoderConfig& config);
/// Experts of one layer that a step's `tokens` reach when each goes to k of E uniformly at random:
/// E·(1 − (1 − k/E)^tokens), an expectation; with a routing histogram (config.routing), layer
/// `layer`'s: Σ_e 1 − (1 − count_e / histogram tokens)^tokens (layer −1: the mean over the layers with
/// experts). 0 for a dense model or layer.
double expected_experts_reached(const DecoderConfig& config, std::uint64_t tokens, std::int64_t layer = -1);

/// Expert parallelism over `ep` devices, each holding experts/ep consecutive experts (device d the
/// experts d·E/ep to (d+1)·E/ep − 1): the device whose experts a layer's measured routing loads
/// most, and its load λ = ep · (its experts' counts) / (all counts) ≥ 1, the rows it takes over an
/// average device's. Without a routing, or with ep 1, or a layer without experts: device 0, λ 1.
struct ExpertDeviceLoad {
  std::int64_t device = 0;
  double load = 1;
};
ExpertDeviceLoad busiest_expert_device(const DecoderConfig& config, std::int64_t layer, int ep);
/// Every expert-parallel device's load in layer `layer` (ep entries, averaging 1): its experts'
/// rows over an average device's. All 1 where busiest_expert_device's load is 1 by definition.
std::vector<double> expert_device_loads(const DecoderConfig& config, std::int64_t layer, int ep);
/// Bytes of every parameter as stored: the quantized linear weights in their format, the rest in
/// `dtype` (equals the graph's unique parameter bytes; tested).
std::uint64_t decoder_weight_bytes(const DecoderConfig& config, DType dtype);
/// The config with --weights applied: `weights` empty leaves it as it is.
DecoderConfig with_weights(DecoderConfig config, const std::string& weights);
/// The config with --kv-cache applied: fp8, int8, fp16, bf16 or fp32 (kInvalidArgument for another
/// spelling); empty leaves it as it is.
DecoderConfig with_kv_cache(DecoderConfig config, const std::string& kv_cache);
/// --activations int8|fp8: W8A8 (activation_dtype). The weights must be 8-bit of the same type
/// (int8 with one scale per output row and no zeros; fp8 per row or in blocks); without a weight
/// format they are stored so (int8, fp8) and a note says so. Anything else is kInvalidArgument.
DecoderConfig with_activations(DecoderConfig config, const std::string& activations);
/// The config with --mla applied: "absorbed" or "expanded" (a latent-attention model's decode; an
/// error for a model without latent attention or another spelling); empty leaves it as it is.
DecoderConfig with_mla(DecoderConfig config, const std::string& mla);
/// The config with --routing applied: `path` names a routing histogram (JSON: "tokens", the tokens
/// it counted, and "layers", each layer with experts ("3") or "all" mapped to the tokens each
/// expert took, k · tokens in all); kInvalidArgument for a file that does not fit the config (a
/// layer without experts, another number of experts, counts that do not add up) or a model
/// without experts; empty leaves it as it is.
DecoderConfig with_routing(DecoderConfig config, const std::string& path);
/// The config with every option of `variant` applied (with_weights, with_kv_cache, with_mla, with_routing).
DecoderConfig with_variant(DecoderConfig config, const DecoderVariant& variant);

/// The module name of layer `layer` ("model.layers.3", gpt2's "transformer.h.3"): every op of the
/// layer is named with it and a '.' or '#' after it.
std::string decoder_layer_name(const DecoderConfig& config, std::int64_t layer);

/// Bytes of the KV cache per token: 2 · layers · kv_heads · head_dim · bytes(dtype); with latent
/// attention layers · (kv_rank + rope_dims) · bytes(dtype); bytes of the config's kv_cache_dtype
/// where it has one (its per-tensor scales, 8 B a layer, are not counted).
std::uint64_t kv_cache_bytes_per_token(const DecoderConfig& config, DType dtype);
/// Bytes of one sequence's KV cache at `context` tokens: each layer holds min(context, its window)
/// tokens (every token where it has none).
std::uint64_t kv_cache_bytes(const DecoderConfig& config, DType dtype, std::int64_t context);

/// The op graph of one phase. Throws kInvalidArgument for a batch, prompt or context below 1,
/// or a context (with the step's token) beyond max_position_embeddings. With a sliding window of
/// W narrower than the keys, attention keeps each query's W most recent keys and a decode step
/// reads the W - 1 cached before its tokens.
OpGraph build_decoder(const DecoderConfig& config, const DecoderRequest& request, const std::string& name);

}  // namespace neuralcost
