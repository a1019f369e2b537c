// Decoder configs (models/decoder.hpp): a Hugging Face style config.json read field by field,
// and the built-in presets with the source of their figures.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "models/config_fields.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace detail {

using nlohmann::json;

constexpr std::int64_t kLargest = std::int64_t{1} << 31;  // any size of a real model is far below

Error bad(const std::string& where, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, where + ": " + what);
}

std::int64_t size_field(const json& c, const std::string& where, const std::string& field,
                        std::optional<std::int64_t> fallback) {
  const auto it = c.find(field);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw bad(where, fmt::format("field '{}' is missing", field));
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() >= kLargest) {
    throw bad(where, fmt::format("field '{}' must be a positive integer below 2^31, got {}", field, it->dump()));
  }
  return it->get<std::int64_t>();
}

bool flag_field(const json& c, const std::string& where, const std::string& field, bool fallback) {
  const auto it = c.find(field);
  if (it == c.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw bad(where, fmt::format("field '{}' must be true or false, got {}", field, it->dump()));
  return it->get<bool>();
}

/// The weights' storage from a config's quantization_config (transformers' HfQuantizer configs):
/// awq, gptq, fp8 (block-wise), fbgemm_fp8, bitsandbytes (4 and 8 bit), mxfp4; another method,
/// or a field of these that changes the storage and is not modeled, is an error naming it.
std::optional<WeightQuantization> quantization_of(const json& c, const std::string& where) {
  const auto it = c.find("quantization_config");
  if (it == c.end() || it->is_null()) return std::nullopt;
  const json& q = *it;
  const std::string field = "quantization_config";
  if (!q.is_object()) throw bad(where, "field 'quantization_config' must be an object");
  const auto method_it = q.find("quant_method");
  const std::string method = method_it != q.end() && method_it->is_string()             ? method_it->get<std::string>()
                             : q.contains("load_in_4bit") || q.contains("load_in_8bit") ? "bitsandbytes"
                                                                                        : "";
  auto integer = [&](const char* name, std::int64_t fallback) {
    const auto f = q.find(name);
    if (f == q.end() || f->is_null()) return fallback;
    if (!f->is_number_integer()) {
      throw bad(where, fmt::format("field '{}.{}' must be an integer, got {}", field, name, f->dump()));
    }
    return f->get<std::int64_t>();
  };
  auto flag = [&](const char* name, bool fallback) {
    const auto f = q.find(name);
    if (f == q.end() || f->is_null()) return fallback;
    if (!f->is_boolean()) throw bad(where, fmt::format("field '{}.{}' must be true or false", field, name));
    return f->get<bool>();
  };
  // modules kept in the compute dtype: lm_head and the router always are; others are not modeled
  if (q.contains("modules_to_not_convert") && !q["modules_to_not_convert"].is_null()) {
    const json& keep = q["modules_to_not_convert"];
    if (!keep.is_array()) throw bad(where, "field 'quantization_config.modules_to_not_convert' must be a list");
    for (const json& m : keep) {
      const std::string name = m.is_string() ? m.get<std::string>() : m.dump();
      if (name != "lm_head" && name != "gate" && name != "router" && name != "block_sparse_moe.gate") {
        throw Error(ErrorCode::kUnimplemented,
                    fmt::format("{}: field 'quantization_config.modules_to_not_convert' lists '{}': only lm_head and "
                                "the router are modeled unquantized",
                                where, name));
      }
    }
  }
  auto group_spec = [&](std::int64_t group) {
    if (group == -1 || group == 0) return std::string("-channel");
    if (group < 1) throw bad(where, fmt::format("field '{}.group_size' {} must be positive or -1", field, group));
    return fmt::format("-g{}", group);
  };
  std::string spec;
  if (method == "awq") {
    const std::int64_t bits = integer("bits", integer("w_bit", 4));
    if (bits != 4)
      throw Error(ErrorCode::kUnimplemented, fmt::format("{}: AWQ with {} bits is not modeled (4 is)", where, bits));
    spec = "int4" + group_spec(integer("group_size", integer("q_group_size", 128))) +
           (flag("zero_point", true) ? "" : "-sym");
  } else if (method == "gptq") {
    const std::int64_t bits = integer("bits", 4);
    if (bits != 4 && bits != 8) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: GPTQ with {} bits is not modeled (4 and 8 are)", where, bits));
    }
    spec = fmt::format("gptq-int{}{}", bits, group_spec(integer("group_size", 128)));
  } else if (method == "fp8") {
    const auto block = q.find("weight_block_size");
    std::int64_t rows = 128, cols = 128;
    if (block != q.end() && !block->is_null()) {
      if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
          !(*block)[1].is_number_integer()) {
        throw bad(where, "field 'quantization_config.weight_block_size' must be two integers");
      }
      rows = (*block)[0].get<std::int64_t>(), cols = (*block)[1].get<std::int64_t>();
    }
    if (rows != cols || rows < 1) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: fp8 blocks of {} x {} are not modeled (square blocks are)", where, rows, cols));
    }
    spec = fmt::format("fp8-block{}", rows);
  } else if (method == "fbgemm_fp8") {
    spec = "fp8";
  } else if (method == "mxfp4") {
    spec = "mxfp4";
  } else if (method == "bitsandbytes") {
    if (flag("load_in_4bit", false)) {
      const auto type = q.find("bnb_4bit_quant_type");
      const std::string kind = type != q.end() && type->is_string() ? type->get<std::string>() : "fp4";
      if (kind != "nf4" && kind != "fp4") {
        throw bad(where, fmt::format("field 'quantization_config.bnb_4bit_quant_type' is '{}' (nf4 or fp4)", kind));
      }
      spec = (kind == "nf4" ? "nf4" : "bnb-fp4") + std::string(flag("bnb_4bit_use_double_quant", false) ? "-dq" : "");
    } else if (flag("load_in_8bit", false)) {
      WeightQuantization w = parse_weight_quantization("int8");
      w.name = w.format = "bnb-int8";  // LLM.int8: int8 rows with an fp32 scale each (SCB)
      w.scale_bits = 32;
      return w;
    } else {
      throw bad(where, "field 'quantization_config' of bitsandbytes loads neither 4 nor 8 bit");
    }
  } else {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field 'quantization_config': quant_method '{}' is not modeled (awq, gptq, fp8, "
                            "fbgemm_fp8, bitsandbytes and mxfp4 are; --weights sets a format by hand)",
                            where, method));
  }
  return parse_weight_quantization(spec);
}

}  // namespace detail

namespace {

using detail::bad;
using detail::flag_field;
using detail::kLargest;
using detail::quantization_of;
using detail::size_field;
using nlohmann::json;

/// The first of `fields` the config has (gpt2's n_embd, or hidden_size as its attribute map reads it).
std::int64_t size_of_any(const json& c, const std::string& where, std::initializer_list<const char*> fields,
                         std::optional<std::int64_t> fallback) {
  for (const char* f : fields) {
    if (c.contains(f) && !c[f].is_null()) return size_field(c, where, f, std::nullopt);
  }
  if (fallback) return *fallback;
  throw bad(where, fmt::format("field '{}' is missing", *fields.begin()));
}

/// The MLP activation of gpt2 and gpt_neox: GELU exactly (erf), or its tanh form.
std::string gelu_of(const json& c, const std::string& where, const char* field, const std::string& fallback) {
  const auto it = c.find(field);
  if (it != c.end() && !it->is_null() && !it->is_string()) {
    throw bad(where, fmt::format("field '{}' must be a string, got {}", field, it->dump()));
  }
  const std::string act = it != c.end() && it->is_string() ? it->get<std::string>() : fallback;
  if (act == "gelu") return "gelu";
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return "gelu_tanh";
  throw Error(ErrorCode::kUnimplemented,
              fmt::format("{}: field '{}' is '{}': this MLP is modeled with gelu, gelu_new and gelu_pytorch_tanh",
                          where, field, act));
}

/// GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm, c_attn and c_proj with biases, a GELU MLP
/// of 4 x hidden unless n_inner says otherwise, the LM head tied to the token embedding.
DecoderConfig parse_gpt2(const json& c, const std::string& where) {
  for (const char* unmodeled : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"}) {
    if (flag_field(c, where, unmodeled, false)) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("{}: field '{}' is true: not modeled", where, unmodeled));
    }
  }
  DecoderConfig d;
  d.architecture = "gpt2";
  d.source = where;
  d.hidden = size_of_any(c, where, {"n_embd", "hidden_size"}, std::nullopt);
  d.layers = size_of_any(c, where, {"n_layer", "num_hidden_layers"}, std::nullopt);
  d.heads = size_of_any(c, where, {"n_head", "num_attention_heads"}, std::nullopt);
  d.max_positions = size_of_any(c, where, {"n_positions", "n_ctx", "max_position_embeddings"}, std::nullopt);
  d.vocab = size_field(c, where, "vocab_size", std::nullopt);
  if (d.hidden % d.heads != 0) {
    throw bad(where, fmt::format("n_embd {} is not a multiple of n_head {}", d.hidden, d.heads));
  }
  d.intermediate = size_of_any(c, where, {"n_inner"}, 4 * d.hidden);
  d.kv_heads = d.heads;
  d.head_dim = d.hidden / d.heads;
  d.activation = gelu_of(c, where, "activation_function", "gelu_new");
  d.fused_projections = d.qkv_bias = d.output_bias = d.mlp_bias = true;
  d.layer_norm = d.learned_positions = true;
  d.gated_mlp = false;
  d.rotary_dims = 0;
  d.tied_embeddings = flag_field(c, where, "tie_word_embeddings", true);
  d.quantization = quantization_of(c, where);
  return d;
}

}  // namespace

bool looks_like_decoder_config(const json& object) {
  // a transformers config names its model_type: one without a field it needs (num_hidden_layers,
  // gpt2's n_layer) or of another architecture is then an error naming the field or the type
  return object.is_object() && object.contains("model_type") && object["model_type"].is_string();
}

std::optional<json> decoder_config_file(const std::string& path) {
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".json") != 0) return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !looks_like_decoder_config(j)) return std::nullopt;
  return j;
}

namespace {

/// The windowed layers: those field 'layer_types' names sliding_attention, else `by_default(l)`.
void read_layer_types(const json& c, const std::string& where, DecoderConfig& d,
                      const std::function<bool(std::size_t)>& by_default) {
  d.sliding_layers.assign(static_cast<std::size_t>(d.layers), false);
  if (c.contains("layer_types") && !c["layer_types"].is_null()) {
    const json& types = c["layer_types"];
    if (!types.is_array() || types.size() != static_cast<std::size_t>(d.layers)) {
      throw bad(where, fmt::format("field 'layer_types' must list one type for each of the {} layers", d.layers));
    }
    for (std::size_t l = 0; l < types.size(); ++l) {
      const std::string type = types[l].is_string() ? types[l].get<std::string>() : types[l].dump();
      if (type != "sliding_attention" && type != "full_attention") {
        throw bad(where, fmt::format("field 'layer_types' holds '{}' at layer {}: each must be sliding_attention or "
                                     "full_attention",
                                     type, l));
      }
      d.sliding_layers[l] = type == "sliding_attention";
    }
  } else {
    for (std::size_t l = 0; l < d.sliding_layers.size(); ++l) d.sliding_layers[l] = by_default(l);
  }
  // no layer windowed: no window at all
  if (std::find(d.sliding_layers.begin(), d.sliding_layers.end(), true) == d.sliding_layers.end()) {
    d.sliding_layers.clear();
    d.sliding_window = 0;
  }
}

/// Qwen2's and Qwen3's windows (use_sliding_window): on the layers layer_types names, by default
/// those from max_window_layers (28) on, as Qwen2Config and Qwen3Config derive layer_types; none
/// without use_sliding_window.
void qwen_windows(const json& c, const std::string& where, DecoderConfig& d) {
  if (!flag_field(c, where, "use_sliding_window", false)) return;
  d.sliding_window = size_field(c, where, "sliding_window", std::nullopt);
  const std::int64_t first = c.contains("max_window_layers") && !c["max_window_layers"].is_null()
                                 ? size_field(c, where, "max_window_layers", std::nullopt)
                                 : 28;
  read_layer_types(c, where, d, [first](std::size_t l) { return static_cast<std::int64_t>(l) >= first; });
}

/// gemma2's own fields, absent ones as Gemma2Config reads them: a sliding window of 4096 on the
/// layers that layer_types names (every other one, the first included, by default), four norms a
/// layer, attention scores soft-capped at 50 and the final logits at 30.
void gemma2_fields(const json& c, const std::string& where, DecoderConfig& d) {
  if (flag_field(c, where, "use_bidirectional_attention", false)) {
    throw Error(
        ErrorCode::kUnimplemented,
        fmt::format("{}: field 'use_bidirectional_attention' is true: only causal attention is modeled", where));
  }
  d.sliding_window = c.contains("sliding_window") && c["sliding_window"].is_null()
                         ? 0
                         : size_field(c, where, "sliding_window", std::int64_t{4096});
  if (d.sliding_window > 0) read_layer_types(c, where, d, [](std::size_t l) { return (l + 1) % 2 == 1; });
  d.sandwich_norms = true;
  const auto cap = [&](const char* field, double fallback) {
    if (!c.contains(field)) return fallback;
    if (c[field].is_null()) return 0.0;
    if (!c[field].is_number() || !(c[field].get<double>() > 0)) {
      throw bad(where, fmt::format("field '{}' must be a positive number or null, got {}", field, c[field].dump()));
    }
    return c[field].get<double>();
  };
  d.attention_softcap = cap("attn_logit_softcapping", 50.0);
  d.final_softcap = cap("final_logit_softcapping", 30.0);
}

}  // namespace

DecoderConfig parse_decoder_config(const json& c, const std::string& where) {
  if (!c.is_object()) throw bad(where, "a config must be a JSON object");
  static const std::set<std::string> supported = {"llama",       "mistral",     "qwen2", "qwen2_moe", "qwen3",
                                                  "qwen3_moe",   "mixtral",     "gemma", "gemma2",    "phi3",
                                                  "deepseek_v2", "deepseek_v3", "gpt2",  "gpt_neox"};
  const auto type = c.find("model_type");
  if (type == c.end() || !type->is_string()) throw bad(where, "field 'model_type' is missing or not a string");
  DecoderConfig d;
  d.architecture = type->get<std::string>();
  if (!supported.count(d.architecture)) {
    throw Error(
        ErrorCode::kUnimplemented,
        fmt::format("{}: model_type '{}' is not supported (supported: llama, mistral, "
                    "qwen2, qwen2_moe, qwen3, qwen3_moe, mixtral, deepseek_v2, deepseek_v3, gemma, gemma2, phi3, gpt2, "
                    "gpt_neox)",
                    where, d.architecture));
  }
  if (d.architecture == "gpt2") return parse_gpt2(c, where);
  if (d.architecture == "deepseek_v3") return detail::parse_deepseek_v3(c, where);
  if (d.architecture == "deepseek_v2") return detail::parse_deepseek_v2(c, where);
  const bool neox = d.architecture == "gpt_neox";
  // fields that change the math and are not modeled: said, never ignored
  const bool qwen3 = d.architecture == "qwen3" || d.architecture == "qwen3_moe";
  const bool qwen_moe = d.architecture == "qwen2_moe" || d.architecture == "qwen3_moe";
  for (const char* moe : {"num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size"}) {
    if (d.architecture == "mixtral" && std::string(moe) == "num_local_experts") continue;
    if (qwen_moe && (std::string(moe) == "num_experts" || std::string(moe) == "moe_intermediate_size")) continue;
    // Qwen3MoeConfig (transformers 5) writes num_local_experts, an alias of num_experts
    if (d.architecture == "qwen3_moe" && std::string(moe) == "num_local_experts") continue;
    if (c.contains(moe) && !c[moe].is_null()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: field '{}': this kind of mixture-of-experts layer is not modeled yet (mixtral's, "
                              "qwen2_moe's and qwen3_moe's are)",
                              where, moe));
    }
  }
  // the gated MLP's activation: SiLU (SwiGLU), or for gemma GELU's tanh form (GeGLU; transformers
  // reads gemma's legacy "gelu" as gelu_pytorch_tanh)
  const bool gemma2 = d.architecture == "gemma2";
  const bool gemma = d.architecture == "gemma" || gemma2;
  // gemma2 reads its activation from hidden_activation (Gemma2MLP), default gelu_pytorch_tanh
  const auto act_field = c.find(gemma2 ? "hidden_activation" : "hidden_act");
  if (act_field != c.end() && !act_field->is_null() && !act_field->is_string()) {
    throw bad(where, fmt::format("field 'hidden_act' must be a string, got {}", act_field->dump()));
  }
  const std::string act = act_field != c.end() && act_field->is_string() ? act_field->get<std::string>()
                          : gemma                                        ? "gelu_pytorch_tanh"
                          : neox                                         ? "gelu"
                                                                         : "silu";
  if (neox) {
    d.activation = gelu_of(c, where, "hidden_act", "gelu");
  } else if (act == "silu") {
    d.activation = "silu";
  } else if (gemma && (act == "gelu_pytorch_tanh" || (act == "gelu" && !gemma2))) {
    d.activation = "gelu_tanh";
  } else {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: field '{}' is '{}': the gated MLP is modeled with silu (and, for gemma and gemma2, "
                            "gelu_pytorch_tanh)",
                            where, gemma2 ? "hidden_activation" : "hidden_act", act));
  }
  // rotary positions on part of each head change the count; scaled frequencies (llama3, yarn,
  // longrope, ...) do not: the same product of frequencies and positions
  // longrope, ...) do not; a partial_rotary_factor (gpt_neox's rotary_pct, 0.25 by default)
  // rotates the first int(head_dim x factor) dims of each head, as transformers does
  double partial = 1.0;
  std::string partial_field = "partial_rotary_factor";
  if (neox && c.contains("rotary_pct") && !c["rotary_pct"].is_null()) {
    partial_field = "rotary_pct";
    if (!c["rotary_pct"].is_number()) throw bad(where, "field 'rotary_pct' must be a number");
    partial = c["rotary_pct"].get<double>();
  } else if (neox) {
    partial = 0.25;
  }
  for (const char* holder : {"", "rope_parameters", "rope_scaling"}) {
    const json* o = *holder ? (c.contains(holder) && c[holder].is_object() ? &c[holder] : nullptr) : &c;
    if (o == nullptr || !o->contains("partial_rotary_factor") || (*o)["partial_rotary_factor"].is_null()) continue;
    const json& f = (*o)["partial_rotary_factor"];
    if (!f.is_number()) throw bad(where, "field 'partial_rotary_factor' must be a number");
    partial = f.get<double>();
    partial_field = "partial_rotary_factor";
  }
  if (!(partial > 0 && partial <= 1)) {
    throw bad(where, fmt::format("field '{}' is {}: it must be above 0 and at most 1", partial_field, partial));
  }
  d.source = where;
  d.hidden = size_field(c, where, "hidden_size", std::nullopt);
  d.layers = size_field(c, where, "num_hidden_layers", std::nullopt);
  d.heads = size_field(c, where, "num_attention_heads", std::nullopt);
  // an absent num_key_value_heads is its config class's default (transformers 5), not the heads:
  // LlamaConfig and Phi3Config take the heads, the others a number of their own
  const std::map<std::string, std::int64_t> kv_default = {{"mistral", 8}, {"mixtral", 8},    {"qwen2", 32},
                                                          {"qwen3", 32},  {"qwen2_moe", 16}, {"qwen3_moe", 4},
                                                          {"gemma", 16},  {"gemma2", 4}};
  const auto kv_class = kv_default.find(d.architecture);
  const bool kv_absent = !c.contains("num_key_value_heads") || c["num_key_value_heads"].is_null();
  d.kv_heads = size_field(c, where, "num_key_value_heads", kv_class != kv_default.end() ? kv_class->second : d.heads);
  d.intermediate = size_field(c, where, "intermediate_size", std::nullopt);
  d.vocab = size_field(c, where, "vocab_size", std::nullopt);
  d.max_positions = size_field(c, where, "max_position_embeddings", std::nullopt);
  if ((d.architecture == "qwen3" || gemma) && (!c.contains("head_dim") || c["head_dim"].is_null())) {
    d.head_dim =
        gemma ? 256 : 128;  // Qwen3Config's, GemmaConfig's and Gemma2Config's defaults, whatever hidden / heads is
  } else if (!c.contains("head_dim") || c["head_dim"].is_null()) {
    if (d.hidden % d.heads != 0) {
      throw bad(where,
                fmt::format("hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim is given)",
                            d.hidden, d.heads));
    }
    d.head_dim = d.hidden / d.heads;
  } else {
    d.head_dim = size_field(c, where, "head_dim", std::nullopt);
  }
  if (d.heads % d.kv_heads != 0) {
    throw bad(where,
              fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}{}", d.heads, d.kv_heads,
                          kv_absent ? fmt::format(" (absent: {}'s default)", d.architecture) : std::string()));
  }
  d.rotary_dims = static_cast<std::int64_t>(static_cast<double>(d.head_dim) * partial);  // int(), as transformers
  if (d.rotary_dims < 2 || d.rotary_dims % 2 != 0) {
    throw bad(where, fmt::format("{} rotary dims of head_dim {} ({} {}) must be even and at least 2 (rotary "
                                 "positions rotate pairs)",
                                 d.rotary_dims, d.head_dim, partial_field, partial));
  }
  d.tied_embeddings = flag_field(c, where, "tie_word_embeddings", gemma);  // GemmaConfig ties by default
  if (gemma) {
    d.embedding_scale = true;  // GemmaTextScaledWordEmbedding: · sqrt(hidden_size)
    d.norm_offset = true;      // GemmaRMSNorm: · (1 + weight)
  }
  if (gemma2) gemma2_fields(c, where, d);
  if (d.architecture == "phi3") {
    d.fused_projections = true;  // Phi3: qkv_proj and gate_up_proj, each split by views
    if (c.contains("sliding_window") && !c["sliding_window"].is_null())
      d.sliding_window = size_field(c, where, "sliding_window", std::nullopt);
  }
  if (neox) {
    // GPTNeoX: query_key_value and dense with biases (attention_bias), the MLP's too, LayerNorm, a
    // GELU MLP that is not gated, and by default the parallel residual
    d.fused_projections = d.layer_norm = d.mlp_bias = true;
    d.gated_mlp = false;
    d.qkv_bias = d.output_bias = flag_field(c, where, "attention_bias", true);
    d.parallel_residual = flag_field(c, where, "use_parallel_residual", true);
  } else if (d.architecture == "qwen2") {
    d.qkv_bias = true;  // Qwen2Attention: q, k, v with biases, o_proj without
    qwen_windows(c, where, d);
  } else if (qwen_moe || qwen3) {
    if (qwen3) {
      // Qwen3Attention: q_norm and k_norm on each head; attention_bias on q, k, v and o (none by default)
      d.qk_norm = true;
      d.qkv_bias = d.output_bias = flag_field(c, where, "attention_bias", false);
    } else {
      d.qkv_bias = flag_field(c, where, "qkv_bias", true);  // Qwen2MoeAttention: q, k, v biases by default
    }
    if (d.architecture == "qwen3") {
      qwen_windows(c, where, d);
    } else if (flag_field(c, where, "use_sliding_window", false)) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: field 'use_sliding_window' is true: {}'s windows on some layers only "
                              "(max_window_layers, layer_types) are not modeled",
                              where, d.architecture));
    }
  } else if (d.architecture == "phi3") {
    // Phi3Attention and Phi3MLP have no biases
  } else {
    d.qkv_bias = d.output_bias = flag_field(c, where, "attention_bias", false);
    if (!gemma) d.mlp_bias = flag_field(c, where, "mlp_bias", false);
    if (d.architecture == "mistral" || d.architecture == "mixtral") {
      d.sliding_window = size_field(c, where, "sliding_window", std::int64_t{0});
    }
  }
  d.quantization = quantization_of(c, where);
  if (qwen_moe) {
    // Qwen2MoeConfig's (Qwen3MoeConfig's) defaults where a field is absent, as transformers reads the file;
    // qwen3_moe has no shared expert
    const bool v3 = d.architecture == "qwen3_moe";
    d.experts = v3 && c.contains("num_local_experts") && !c.contains("num_experts")
                    ? size_field(c, where, "num_local_experts", std::nullopt)
                    : size_field(c, where, "num_experts", v3 ? 128 : 60);
    d.experts_per_token = size_field(c, where, "num_experts_per_tok", v3 ? 8 : 4);
    d.expert_intermediate = size_field(c, where, "moe_intermediate_size", v3 ? 768 : 1408);
    d.shared_expert_intermediate = v3 ? 0 : size_field(c, where, "shared_expert_intermediate_size", 5632);
    d.normalize_top_k = flag_field(c, where, "norm_topk_prob", false);
    d.sparse_step = size_field(c, where, "decoder_sparse_step", 1);
    if (c.contains("mlp_only_layers") && !c["mlp_only_layers"].is_null()) {
      const json& dense = c["mlp_only_layers"];
      if (!dense.is_array()) throw bad(where, "field 'mlp_only_layers' must be a list of layer indices");
      for (const json& l : dense) {
        if (!l.is_number_integer() || l.get<std::int64_t>() < 0 || l.get<std::int64_t>() >= d.layers) {
          throw bad(where, fmt::format("field 'mlp_only_layers' holds {}: each must be a layer index from 0 to {}",
                                       l.dump(), d.layers - 1));
        }
        d.dense_layers.push_back(l.get<std::int64_t>());
      }
    }
    if (d.experts_per_token > d.experts) {
      throw bad(where,
                fmt::format("num_experts_per_tok {} is more than num_experts {}", d.experts_per_token, d.experts));
    }
  }
  if (d.architecture == "mixtral") {
    d.experts = size_field(c, where, "num_local_experts", std::nullopt);
    d.experts_per_token = size_field(c, where, "num_experts_per_tok", std::nullopt);
    if (d.experts_per_token > d.experts) {
      throw bad(where, fmt::format("num_experts_per_tok {} is more than num_local_experts {}", d.experts_per_token,
                                   d.experts));
    }
  }
  return d;
}

bool DecoderConfig::moe_layer(std::int64_t layer) const {
  if (experts == 0) return false;
  if (std::find(dense_layers.begin(), dense_layers.end(), layer) != dense_layers.end()) return false;
  return (layer + 1) % sparse_step == 0;
}

std::int64_t DecoderConfig::moe_layer_count() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < layers; ++l) n += moe_layer(l) ? 1 : 0;
  return n;
}

const std::vector<std::string>& decoder_preset_names() {
  static const std::vector<std::string> names = {
      "llama-2-7b",  "llama-2-13b", "llama-2-70b",       "llama-3-8b",        "llama-3-70b",       "llama-3.1-405b",
      "mistral-7b",  "qwen2.5-7b",  "mixtral-8x7b",      "gemma-2b",          "gemma-7b",          "phi-3-mini-4k",
      "gpt2",        "pythia-160m", "qwen1.5-moe-a2.7b", "qwen3-8b",          "qwen3-30b-a3b",     "gemma-2-2b",
      "gemma-2-9b",  "gemma-2-27b", "megatron-gpt-22b",  "megatron-gpt-175b", "megatron-gpt-530b", "megatron-gpt-1t",
      "deepseek-v3", "deepseek-v2", "deepseek-v2-lite"};
  return names;
}

DecoderConfig decoder_preset(const std::string& name) {
  // the published config.json of each model (Hugging Face repositories named in `source`)
  struct Preset {
    const char* source;
    json config;
  };
  static const std::map<std::string, Preset> presets = {
      {"llama-2-7b",
       {"meta-llama/Llama-2-7b-hf config.json",
        {{"model_type", "llama"},
         {"hidden_size", 4096},
         {"num_hidden_layers", 32},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 32},
         {"intermediate_size", 11008},
         {"vocab_size", 32000},
         {"max_position_embeddings", 4096}}}},
      {"llama-2-13b",
       {"meta-llama/Llama-2-13b-hf config.json",
        {{"model_type", "llama"},
         {"hidden_size", 5120},
         {"num_hidden_layers", 40},
         {"num_attention_heads", 40},
         {"num_key_value_heads", 40},
         {"intermediate_size", 13824},
         {"vocab_size", 32000},
         {"max_position_embeddings", 4096}}}},
      {"llama-2-70b",
       {"meta-llama/Llama-2-70b-hf config.json",
        {{"model_type", "llama"},
         {"hidden_size", 8192},
         {"num_hidden_layers", 80},
         {"num_attention_heads", 64},
         {"num_key_value_heads", 8},
         {"intermediate_size", 28672},
         {"vocab_size", 32000},
         {"max_position_embeddings", 4096}}}},
      {"llama-3-8b",
       {"meta-llama/Meta-Llama-3-8B config.json",
        {{"model_type", "llama"},
         {"hidden_size", 4096},
         {"num_hidden_layers", 32},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 8},
         {"intermediate_size", 14336},
         {"vocab_size", 128256},
         {"max_position_embeddings", 8192}}}},
      {"llama-3-70b",
       {"meta-llama/Meta-Llama-3-70B config.json",
        {{"model_type", "llama"},
         {"hidden_size", 8192},
         {"num_hidden_layers", 80},
         {"num_attention_heads", 64},
         {"num_key_value_heads", 8},
         {"intermediate_size", 28672},
         {"vocab_size", 128256},
         {"max_position_embeddings", 8192}}}},
      {"llama-3.1-405b",
       {"meta-llama/Llama-3.1-405B config.json",
        {{"model_type", "llama"},
         {"hidden_size", 16384},
         {"num_hidden_layers", 126},
         {"num_attention_heads", 128},
         {"num_key_value_heads", 8},
         {"intermediate_size", 53248},
         {"vocab_size", 128256},
         {"max_position_embeddings", 131072}}}},
      {"mistral-7b",
       {"mistralai/Mistral-7B-v0.1 config.json",
        {{"model_type", "mistral"},
         {"hidden_size", 4096},
         {"num_hidden_layers", 32},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 8},
         {"intermediate_size", 14336},
         {"vocab_size", 32000},
         {"max_position_embeddings", 32768},
         {"sliding_window", 4096}}}},
      {"qwen2.5-7b",
       {"Qwen/Qwen2.5-7B config.json",
        {{"model_type", "qwen2"},
         {"hidden_size", 3584},
         {"num_hidden_layers", 28},
         {"num_attention_heads", 28},
         {"num_key_value_heads", 4},
         {"intermediate_size", 18944},
         {"vocab_size", 152064},
         {"max_position_embeddings", 131072},
         {"tie_word_embeddings", false},
         {"use_sliding_window", false}}}},
      {"mixtral-8x7b",
       {"mistralai/Mixtral-8x7B-v0.1 config.json",
        {{"model_type", "mixtral"},
         {"hidden_size", 4096},
         {"num_hidden_layers", 32},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 8},
         {"intermediate_size", 14336},
         {"vocab_size", 32000},
         {"max_position_embeddings", 32768},
         {"num_local_experts", 8},
         {"num_experts_per_tok", 2},
         {"sliding_window", nullptr},
         {"tie_word_embeddings", false}}}},
      {"qwen1.5-moe-a2.7b",
       {"Qwen/Qwen1.5-MoE-A2.7B config.json (14.3B parameters, 2.7B active per token)",
        {{"model_type", "qwen2_moe"},
         {"hidden_size", 2048},
         {"num_hidden_layers", 24},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 16},
         {"intermediate_size", 5632},
         {"moe_intermediate_size", 1408},
         {"shared_expert_intermediate_size", 5632},
         {"num_experts", 60},
         {"num_experts_per_tok", 4},
         {"norm_topk_prob", false},
         {"decoder_sparse_step", 1},
         {"vocab_size", 151936},
         {"max_position_embeddings", 8192},
         {"tie_word_embeddings", false}}}},
      {"qwen3-8b",
       {"Qwen/Qwen3-8B config.json (8.2B parameters)",
        {{"model_type", "qwen3"},
         {"hidden_size", 4096},
         {"num_hidden_layers", 36},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 8},
         {"head_dim", 128},
         {"intermediate_size", 12288},
         {"vocab_size", 151936},
         {"max_position_embeddings", 40960},
         {"attention_bias", false},
         {"use_sliding_window", false},
         {"tie_word_embeddings", false}}}},
      {"deepseek-v3",
       {"deepseek-ai/DeepSeek-V3 config.json (671B parameters, 37B active per token; its checkpoint stores the "
        "linear weights in fp8, blocks of 128 x 128: --weights fp8-block128)",
        {{"model_type", "deepseek_v3"},
         {"hidden_size", 7168},
         {"num_hidden_layers", 61},
         {"num_attention_heads", 128},
         {"num_key_value_heads", 128},
         {"intermediate_size", 18432},
         {"moe_intermediate_size", 2048},
         {"n_routed_experts", 256},
         {"n_shared_experts", 1},
         {"num_experts_per_tok", 8},
         {"n_group", 8},
         {"topk_group", 4},
         {"first_k_dense_replace", 3},
         {"moe_layer_freq", 1},
         {"norm_topk_prob", true},
         {"routed_scaling_factor", 2.5},
         {"scoring_func", "sigmoid"},
         {"topk_method", "noaux_tc"},
         {"q_lora_rank", 1536},
         {"kv_lora_rank", 512},
         {"qk_rope_head_dim", 64},
         {"qk_nope_head_dim", 128},
         {"v_head_dim", 128},
         {"num_nextn_predict_layers", 1},
         {"vocab_size", 129280},
         {"max_position_embeddings", 163840},
         {"rope_scaling",
          {{"type", "yarn"},
           {"factor", 40},
           {"original_max_position_embeddings", 4096},
           {"beta_fast", 32},
           {"beta_slow", 1},
           {"mscale", 1.0},
           {"mscale_all_dim", 1.0}}},
         {"tie_word_embeddings", false}}}},
      {"deepseek-v2",
       {"deepseek-ai/DeepSeek-V2 config.json (236B parameters, 21B active per token)",
        {{"model_type", "deepseek_v2"},
         {"hidden_size", 5120},
         {"num_hidden_layers", 60},
         {"num_attention_heads", 128},
         {"num_key_value_heads", 128},
         {"intermediate_size", 12288},
         {"moe_intermediate_size", 1536},
         {"n_routed_experts", 160},
         {"n_shared_experts", 2},
         {"num_experts_per_tok", 6},
         {"n_group", 8},
         {"topk_group", 3},
         {"topk_method", "group_limited_greedy"},
         {"first_k_dense_replace", 1},
         {"moe_layer_freq", 1},
         {"norm_topk_prob", false},
         {"routed_scaling_factor", 16.0},
         {"scoring_func", "softmax"},
         {"q_lora_rank", 1536},
         {"kv_lora_rank", 512},
         {"qk_rope_head_dim", 64},
         {"qk_nope_head_dim", 128},
         {"v_head_dim", 128},
         {"vocab_size", 102400},
         {"max_position_embeddings", 163840},
         {"tie_word_embeddings", false}}}},
      {"deepseek-v2-lite",
       {"deepseek-ai/DeepSeek-V2-Lite config.json (15.7B parameters, 2.4B active per token)",
        {{"model_type", "deepseek_v2"},
         {"hidden_size", 2048},
         {"num_hidden_layers", 27},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 16},
         {"intermediate_size", 10944},
         {"moe_intermediate_size", 1408},
         {"n_routed_experts", 64},
         {"n_shared_experts", 2},
         {"num_experts_per_tok", 6},
         {"n_group", 1},
         {"topk_group", 1},
         {"topk_method", "greedy"},
         {"first_k_dense_replace", 1},
         {"moe_layer_freq", 1},
         {"norm_topk_prob", false},
         {"routed_scaling_factor", 1.0},
         {"scoring_func", "softmax"},
         {"q_lora_rank", nullptr},
         {"kv_lora_rank", 512},
         {"qk_rope_head_dim", 64},
         {"qk_nope_head_dim", 128},
         {"v_head_dim", 128},
         {"vocab_size", 102400},
         {"max_position_embeddings", 163840},
         {"tie_word_embeddings", false}}}},
      {"qwen3-30b-a3b",
       {"Qwen/Qwen3-30B-A3B config.json (30.5B parameters, 3.3B active per token)",
        {{"model_type", "qwen3_moe"},
         {"hidden_size", 2048},
         {"num_hidden_layers", 48},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 4},
         {"head_dim", 128},
         {"intermediate_size", 6144},
         {"moe_intermediate_size", 768},
         {"num_experts", 128},
         {"num_experts_per_tok", 8},
         {"norm_topk_prob", true},
         {"decoder_sparse_step", 1},
         {"mlp_only_layers", json::array()},
         {"vocab_size", 151936},
         {"max_position_embeddings", 40960},
         {"attention_bias", false},
         {"use_sliding_window", false},
         {"tie_word_embeddings", false}}}},
      {"gemma-2b",
       {"google/gemma-2b config.json",
        {{"model_type", "gemma"},
         {"hidden_size", 2048},
         {"num_hidden_layers", 18},
         {"num_attention_heads", 8},
         {"num_key_value_heads", 1},
         {"head_dim", 256},
         {"intermediate_size", 16384},
         {"vocab_size", 256000},
         {"max_position_embeddings", 8192},
         {"hidden_act", "gelu"}}}},
      {"gemma-2-2b",
       {"google/gemma-2-2b config.json",
        {{"model_type", "gemma2"},
         {"hidden_size", 2304},
         {"num_hidden_layers", 26},
         {"num_attention_heads", 8},
         {"num_key_value_heads", 4},
         {"head_dim", 256},
         {"intermediate_size", 9216},
         {"vocab_size", 256000},
         {"max_position_embeddings", 8192},
         {"sliding_window", 4096},
         {"attn_logit_softcapping", 50.0},
         {"final_logit_softcapping", 30.0},
         {"query_pre_attn_scalar", 256},
         {"hidden_activation", "gelu_pytorch_tanh"}}}},
      {"gemma-2-9b",
       {"google/gemma-2-9b config.json",
        {{"model_type", "gemma2"},
         {"hidden_size", 3584},
         {"num_hidden_layers", 42},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 8},
         {"head_dim", 256},
         {"intermediate_size", 14336},
         {"vocab_size", 256000},
         {"max_position_embeddings", 8192},
         {"sliding_window", 4096},
         {"attn_logit_softcapping", 50.0},
         {"final_logit_softcapping", 30.0},
         {"query_pre_attn_scalar", 256},
         {"hidden_activation", "gelu_pytorch_tanh"}}}},
      {"gemma-2-27b",
       {"google/gemma-2-27b config.json",
        {{"model_type", "gemma2"},
         {"hidden_size", 4608},
         {"num_hidden_layers", 46},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 16},
         {"head_dim", 128},
         {"intermediate_size", 36864},
         {"vocab_size", 256000},
         {"max_position_embeddings", 8192},
         {"sliding_window", 4096},
         {"attn_logit_softcapping", 50.0},
         {"final_logit_softcapping", 30.0},
         {"query_pre_attn_scalar", 144},
         {"hidden_activation", "gelu_pytorch_tanh"}}}},
      {"gemma-7b",
       {"google/gemma-7b config.json",
        {{"model_type", "gemma"},
         {"hidden_size", 3072},
         {"num_hidden_layers", 28},
         {"num_attention_heads", 16},
         {"num_key_value_heads", 16},
         {"head_dim", 256},
         {"intermediate_size", 24576},
         {"vocab_size", 256000},
         {"max_position_embeddings", 8192},
         {"hidden_act", "gelu"}}}},
      {"phi-3-mini-4k",
       {"microsoft/Phi-3-mini-4k-instruct config.json",
        {{"model_type", "phi3"},
         {"hidden_size", 3072},
         {"num_hidden_layers", 32},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 32},
         {"intermediate_size", 8192},
         {"vocab_size", 32064},
         {"max_position_embeddings", 4096},
         {"sliding_window", 2047},
         {"tie_word_embeddings", false}}}},
      {"gpt2",
       {"openai-community/gpt2 config.json",
        {{"model_type", "gpt2"},
         {"n_embd", 768},
         {"n_layer", 12},
         {"n_head", 12},
         {"n_positions", 1024},
         {"vocab_size", 50257},
         {"activation_function", "gelu_new"}}}},
      {"pythia-160m",
       {"EleutherAI/pythia-160m config.json",
        {{"model_type", "gpt_neox"},
         {"hidden_size", 768},
         {"num_hidden_layers", 12},
         {"num_attention_heads", 12},
         {"intermediate_size", 3072},
         {"vocab_size", 50304},
         {"max_position_embeddings", 2048},
         {"rotary_pct", 0.25},
         {"use_parallel_residual", true},
         {"tie_word_embeddings", false},
         {"hidden_act", "gelu"}}}},
  };
  // Megatron-LM's GPT models (learned positions, LayerNorm, a GELU MLP of 4 × hidden, tied
  // embeddings; sequence length 2,048, vocabulary 51,200) as Korthikanti et al. (2022, Table 3)
  // trained them
  const auto megatron = [](std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
    return Preset{"Korthikanti et al. 2022, Table 3: Megatron-LM's GPT",
                  {{"model_type", "gpt2"},
                   {"n_embd", hidden},
                   {"n_layer", layers},
                   {"n_head", heads},
                   {"n_positions", 2048},
                   {"vocab_size", 51200},
                   {"activation_function", "gelu"}}};
  };
  static const std::map<std::string, Preset> megatron_presets = {{"megatron-gpt-22b", megatron(48, 6144, 64)},
                                                                 {"megatron-gpt-175b", megatron(96, 12288, 96)},
                                                                 {"megatron-gpt-530b", megatron(105, 20480, 128)},
                                                                 {"megatron-gpt-1t", megatron(128, 25600, 160)}};
  const Preset* preset = nullptr;
  if (const auto it = presets.find(name); it != presets.end()) preset = &it->second;
  if (const auto it = megatron_presets.find(name); it != megatron_presets.end()) preset = &it->second;
  if (preset == nullptr) throw Error(ErrorCode::kNotFound, fmt::format("unknown decoder preset '{}'", name));
  DecoderConfig d = parse_decoder_config(preset->config, name);
  d.source = fmt::format("preset {} ({})", name, preset->source);
  return d;
}

}  // namespace neuralcost
