// deepseek_v3 and deepseek_v2 configs (models/decoder.hpp): multi-head latent attention and
// DeepSeek's experts (shared experts, first dense layers; V3's grouped sigmoid router, V2's softmax
// one), read as transformers' DeepseekV3Config and DeepseekV2Config read them, their defaults where
// a field is absent.
#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/config_fields.hpp"

namespace neuralcost::detail {
namespace {

using nlohmann::json;

/// A count that may be 0 (first_k_dense_replace, n_shared_experts, num_nextn_predict_layers).
std::int64_t count_field(const json& c, const std::string& where, const std::string& field, std::int64_t fallback) {
  const auto it = c.find(field);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() >= (std::int64_t{1} << 31)) {
    throw bad(where, fmt::format("field '{}' must be an integer from 0 below 2^31, got {}", field, it->dump()));
  }
  return it->get<std::int64_t>();
}

/// A string field that, when present, must be `modeled`: another value changes the math.
void only(const json& c, const std::string& where, const char* field, const std::vector<std::string>& modeled,
          const std::string& what, const std::string& architecture) {
  const auto it = c.find(field);
  if (it == c.end() || it->is_null()) return;
  if (!it->is_string() || std::find(modeled.begin(), modeled.end(), it->get<std::string>()) == modeled.end()) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field '{}' is {}: {} ({} is modeled with '{}')", where, field, it->dump(), what,
                            architecture, fmt::join(modeled, "' or '")));
  }
}

/// Both versions: V3's fields and defaults, or V2's (`v2`): a softmax router choosing greedily or
/// within groups (topk_method), its weights not renormalised, rotary positions as complex products.
DecoderConfig parse_deepseek(const json& c, const std::string& where, bool v2) {
  DecoderConfig d;
  d.architecture = v2 ? "deepseek_v2" : "deepseek_v3";
  d.source = where;
  only(c, where, "hidden_act", {"silu"}, "another activation of the MLPs and experts", d.architecture);
  only(c, where, "scoring_func", {v2 ? "softmax" : "sigmoid"}, "another router score", d.architecture);
  const std::string method = v2 && c.contains("topk_method") && c["topk_method"].is_string()
                                 ? c["topk_method"].get<std::string>()
                                 : std::string(v2 ? "greedy" : "noaux_tc");
  only(c, where, "topk_method",
       v2 ? std::vector<std::string>{"greedy", "group_limited_greedy"} : std::vector<std::string>{"noaux_tc"},
       "another way of choosing experts", d.architecture);
  if (v2 && flag_field(c, where, "mlp_bias", false)) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field 'mlp_bias' is true: biases on deepseek_v2's MLPs are not modeled", where));
  }
  if (c.contains("moe_layer_freq") && !c["moe_layer_freq"].is_null() && c["moe_layer_freq"] != 1) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field 'moe_layer_freq' is {}: experts on every k-th layer only are not modeled "
                            "(transformers' DeepseekV3 puts them on every layer from first_k_dense_replace)",
                            where, c["moe_layer_freq"].dump()));
  }
  d.hidden = size_field(c, where, "hidden_size", std::nullopt);
  d.layers = size_field(c, where, "num_hidden_layers", std::nullopt);
  d.heads = size_field(c, where, "num_attention_heads", std::nullopt);
  d.kv_heads = size_field(c, where, "num_key_value_heads", d.heads);
  if (d.kv_heads != d.heads) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: num_key_value_heads {} differs from num_attention_heads {}: latent attention "
                            "expands keys and values to every head",
                            where, d.kv_heads, d.heads));
  }
  d.intermediate = size_field(c, where, "intermediate_size", std::nullopt);
  d.vocab = size_field(c, where, "vocab_size", std::nullopt);
  d.max_positions = size_field(c, where, "max_position_embeddings", std::nullopt);
  DecoderConfig::LatentAttention la;
  la.q_rank = count_field(c, where, "q_lora_rank", 1536);  // null: one q_proj
  la.kv_rank = size_field(c, where, "kv_lora_rank", 512);
  la.rope_dims = size_field(c, where, "qk_rope_head_dim", 64);
  la.nope_dims = size_field(c, where, "qk_nope_head_dim", 128);
  la.value_dims = size_field(c, where, "v_head_dim", 128);
  la.interleave = v2 || flag_field(c, where, "rope_interleave", true);
  la.complex_rotary = v2;  // apply_rotary_emb: view_as_complex, a complex product, view_as_real
  if (c.contains("q_lora_rank") && c["q_lora_rank"].is_null()) la.q_rank = 0;
  if (la.rope_dims % 2 != 0) {
    throw bad(where, fmt::format("qk_rope_head_dim {} must be even (rotary positions rotate pairs)", la.rope_dims));
  }
  d.latent = la;
  d.head_dim = la.nope_dims + la.rope_dims;
  d.rotary_dims = la.rope_dims;
  d.qkv_bias = d.output_bias = flag_field(c, where, "attention_bias", false);
  d.tied_embeddings = flag_field(c, where, "tie_word_embeddings", false);
  // the experts: n_routed_experts of moe_intermediate_size, n_shared_experts as one shared MLP
  d.experts = size_field(c, where, "n_routed_experts", v2 ? 64 : 256);
  d.experts_per_token =
      v2 ? size_field(c, where, "num_experts_per_tok", std::nullopt) : size_field(c, where, "num_experts_per_tok", 8);
  d.expert_intermediate = size_field(c, where, "moe_intermediate_size", v2 ? 1407 : 2048);
  d.shared_expert_intermediate = d.expert_intermediate * count_field(c, where, "n_shared_experts", v2 ? 2 : 1);
  d.shared_expert_gate = false;
  const bool grouped = !v2 || method == "group_limited_greedy";
  d.grouped_sigmoid_router = !v2;
  d.softmax_group_router = v2;
  d.expert_groups = grouped ? size_field(c, where, "n_group", v2 ? std::nullopt : std::optional<std::int64_t>(8)) : 1;
  d.expert_groups_per_token =
      grouped ? size_field(c, where, "topk_group", v2 ? std::nullopt : std::optional<std::int64_t>(4)) : 1;
  // transformers' DeepseekV2TopkRouter never renormalises the k weights, whatever norm_topk_prob says
  d.normalize_top_k = !v2 && flag_field(c, where, "norm_topk_prob", true);
  if (v2 && flag_field(c, where, "norm_topk_prob", false)) {
    d.notes.push_back(
        "norm_topk_prob is true, which transformers' DeepseekV2 router does not apply (its k weights "
        "are not renormalised): counted as transformers computes it");
  }
  d.routed_scaling = v2 ? 1.0 : 2.5;
  if (c.contains("routed_scaling_factor") && !c["routed_scaling_factor"].is_null()) {
    if (!c["routed_scaling_factor"].is_number() || !(c["routed_scaling_factor"].get<double>() > 0)) {
      throw bad(where, fmt::format("field 'routed_scaling_factor' must be a positive number, got {}",
                                   c["routed_scaling_factor"].dump()));
    }
    d.routed_scaling = c["routed_scaling_factor"].get<double>();
  }
  if (grouped && (d.experts % d.expert_groups != 0 || d.experts / d.expert_groups < (v2 ? 1 : 2))) {
    throw bad(where, fmt::format("n_routed_experts {} must split into n_group {} groups of at least {}", d.experts,
                                 d.expert_groups, v2 ? "1 expert" : "2 (a group's score is its two best experts')"));
  }
  if (d.expert_groups_per_token > d.expert_groups) {
    throw bad(where, fmt::format("topk_group {} is more than n_group {}", d.expert_groups_per_token, d.expert_groups));
  }
  if (d.experts_per_token > d.expert_groups_per_token * (d.experts / d.expert_groups)) {
    throw bad(where, fmt::format("num_experts_per_tok {} is more than the {} experts of topk_group {} groups",
                                 d.experts_per_token, d.expert_groups_per_token * (d.experts / d.expert_groups),
                                 d.expert_groups_per_token));
  }
  const std::int64_t first_dense = count_field(c, where, "first_k_dense_replace", v2 ? 0 : 3);
  if (first_dense > d.layers) {
    throw bad(where, fmt::format("first_k_dense_replace {} is more than num_hidden_layers {}", first_dense, d.layers));
  }
  for (std::int64_t l = 0; l < first_dense; ++l) d.dense_layers.push_back(l);
  d.unbuilt_prediction_layers = count_field(c, where, "num_nextn_predict_layers", 0);
  d.quantization = quantization_of(c, where);
  return d;
}

}  // namespace

DecoderConfig parse_deepseek_v3(const json& c, const std::string& where) { return parse_deepseek(c, where, false); }
DecoderConfig parse_deepseek_v2(const json& c, const std::string& where) { return parse_deepseek(c, where, true); }

}  // namespace neuralcost::detail
