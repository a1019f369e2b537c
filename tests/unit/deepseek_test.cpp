// DeepSeek-V3 (issue 25): multi-head latent attention and DeepSeek's experts. The preset's
// parameters against transformers' DeepseekV3ForCausalLM built from the same config (on the meta
// device: 671,026,404,352), the latent KV cache per token, prefill and decode contractions against
// closed forms, and one clear error per config that changes the math in a way not modeled.
// (tests/workers/decoder_vs_transformers.py counts the same graphs against transformers' own run.)
#include <set>

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

// transformers 5.23's DeepseekV2ForCausalLM built from the presets' configs on the meta device
constexpr std::uint64_t kDeepseekV2Parameters = 235741434880;
constexpr std::uint64_t kDeepseekV2LiteParameters = 15706484224;

json small_deepseek() {
  // layer 0 dense (first_k_dense_replace), 1 and 2 with 8 experts in 4 groups
  return json{{"model_type", "deepseek_v3"},
              {"hidden_size", 64},
              {"num_hidden_layers", 3},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 4},
              {"intermediate_size", 96},
              {"moe_intermediate_size", 32},
              {"n_routed_experts", 8},
              {"n_shared_experts", 1},
              {"num_experts_per_tok", 2},
              {"n_group", 4},
              {"topk_group", 2},
              {"first_k_dense_replace", 1},
              {"q_lora_rank", 48},
              {"kv_lora_rank", 32},
              {"qk_rope_head_dim", 8},
              {"qk_nope_head_dim", 16},
              {"v_head_dim", 24},
              {"vocab_size", 500},
              {"max_position_embeddings", 128}};
}

Analysis analyze_phase(const DecoderConfig& c, const DecoderRequest& r) {
  return analyze(build_decoder(c, r, "decoder"), HardwareDatabase::builtin().get("h100-sxm"));
}

void expect_error(const json& config, ErrorCode code, const std::string& fragment) {
  try {
    parse_decoder_config(config, "c.json");
    ADD_FAILURE() << "no error; expected one with: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(DeepseekTest, ThePresetHasTransformersParametersAndALatentCache) {
  const DecoderConfig c = decoder_preset("deepseek-v3");
  EXPECT_EQ(decoder_parameter_count(c), 671026404352u);  // DeepseekV3ForCausalLM's parameters(): 671B
  // less 58 layers x 248 idle experts x 3·7168·2048: the 37B the model card says are active
  EXPECT_EQ(decoder_active_parameter_count(c), 37552282624u);
  EXPECT_EQ(c.moe_layer_count(), 58);
  // the cache keeps the latent: 61 layers x (512 + 64) x 2 B, where each head's key and value
  // would be 61 x 128 x (192 + 128) x 2 = 4,997,120 B
  EXPECT_EQ(kv_cache_bytes_per_token(c, DType::kBf16), 70272u);
  EXPECT_EQ(kv_cache_bytes(c, DType::kBf16, 1000), 70272000u);
  DecoderRequest r;
  r.prompt = 16;
  const Analysis a = analyze_phase(c, r);
  EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
  EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(c));
  bool said = false;
  for (const std::string& n : a.graph.notes())
    said = said ||
           n.find("multi-token prediction layer (num_nextn_predict_layers) is not in the graph") != std::string::npos;
  EXPECT_TRUE(said);
}

// Per layer: q_a_proj 2·T·E·Rq, q_b_proj 2·T·Rq·H·(Dn + Dr), kv_a_proj 2·T·E·(R + Dr), kv_b_proj over
// every key 2·B·K·R·H·(Dn + Dv), attention 2·B·H·pairs·((Dn + Dr) + Dv), o_proj 2·T·H·Dv·E; a dense
// layer's MLP 2·T·3·E·I; an expert layer's router 2·T·E·N, k experts 2·T·k·3·E·X and the shared
// expert 2·T·3·E·X; the rotary frequencies 2·(Dr/2)·T; the LM head 2·B·E·V.
TEST(DeepseekTest, PrefillAndDecodeContractionsMatchClosedForms) {
  const DecoderConfig c = parse_decoder_config(small_deepseek(), "c.json");
  ASSERT_TRUE(c.latent);
  const std::uint64_t e = 64, h = 4, qr = 48, r = 32, dr = 8, dn = 16, dv = 24, i = 96, x = 32, n = 8, k = 2, v = 500;
  EXPECT_EQ(decoder_parameter_count(c), 259248u);  // DeepseekV3ForCausalLM(this config).parameters()
  for (const bool decode : {false, true}) {
    for (const std::uint64_t b : {1u, 3u}) {
      DecoderRequest req;
      req.batch = static_cast<std::int64_t>(b);
      req.phase = decode ? DecoderPhase::kDecode : DecoderPhase::kPrefill;
      req.prompt = 24;
      req.context = 40;
      const std::uint64_t t = decode ? 1 : 24, keys = decode ? 41 : 24, tokens = b * t;
      const std::uint64_t pairs = decode ? keys : t * (t + 1) / 2;
      const std::uint64_t attention = 2 * tokens * (e * qr + qr * h * (dn + dr) + e * (r + dr) + h * dv * e) +
                                      2 * b * keys * r * h * (dn + dv) + 2 * b * h * pairs * (dn + dr + dv);
      const std::uint64_t dense = 2 * tokens * 3 * e * i;
      const std::uint64_t experts = 2 * tokens * (e * n + k * 3 * e * x + 3 * e * x);
      const Analysis a = analyze_phase(c, req);
      EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
      EXPECT_EQ(a.totals.contraction_flops, 3 * attention + dense + 2 * experts + 2 * (dr / 2) * t + 2 * b * e * v)
          << (decode ? "decode" : "prefill") << " batch " << b;
    }
  }
}

// --mla absorbed: a decode step's attention over the latent cache as stored (DeepSeek's inference
// code, attn_impl "absorb"): per layer the nope query through kv_b_proj's key rows 2·B·T·H·Dn·R,
// scores over K keys of R + Dr and values of R 2·B·H·K·((R + Dr) + R), the output through its value
// rows 2·B·T·H·R·Dv; the cache read once, [B, 1, K, R + Dr]; the parameters the same.
TEST(DeepseekTest, AnAbsorbedDecodeAttendsOverTheLatentCacheAsStored) {
  const DecoderConfig expanded = parse_decoder_config(small_deepseek(), "c.json");
  const DecoderConfig absorbed = with_mla(expanded, "absorbed");
  const std::uint64_t e = 64, h = 4, qr = 48, r = 32, dr = 8, dn = 16, dv = 24, i = 96, x = 32, n = 8, k = 2, v = 500;
  for (const std::uint64_t b : {1u, 3u}) {
    DecoderRequest req;
    req.batch = static_cast<std::int64_t>(b);
    req.phase = DecoderPhase::kDecode;
    req.context = 40;
    const std::uint64_t keys = 41;
    const std::uint64_t attention = 2 * b * (e * qr + qr * h * (dn + dr) + e * (r + dr) + h * dv * e) +
                                    2 * b * h * dn * r + 2 * b * h * keys * (r + dr + r) + 2 * b * h * r * dv;
    const std::uint64_t dense = 2 * b * 3 * e * i, experts = 2 * b * (e * n + k * 3 * e * x + 3 * e * x);
    const Analysis a = analyze_phase(absorbed, req);
    EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
    EXPECT_EQ(a.totals.contraction_flops, 3 * attention + dense + 2 * experts + 2 * (dr / 2) + 2 * b * e * v);
    EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(expanded));
    // each layer's attention reads its query and the cache once (the value is the cache's first R
    // dims, not read again), bf16
    for (const OpRoofline& op : a.ops) {
      if (a.graph.op(op.op_index).kind != OpKind::kAttention) continue;
      EXPECT_EQ(op.cost.bytes_read, b * h * (r + dr) * 2 + b * keys * (r + dr) * 2) << a.graph.op(op.op_index).name;
    }
  }
  // a prefill is the same either way; the bound of a long decode falls
  DecoderRequest prefill;
  prefill.prompt = 24;
  EXPECT_EQ(analyze_phase(absorbed, prefill).totals.flops, analyze_phase(expanded, prefill).totals.flops);
  DecoderRequest long_decode;
  long_decode.phase = DecoderPhase::kDecode;
  long_decode.context = 4095;
  const DecoderConfig v3 = decoder_preset("deepseek-v3");
  // DeepSeek-V3 at batch 1, context 4,095: the expansion's 61 GB gone, the weights' 75 GB left
  EXPECT_LT(analyze_phase(with_mla(v3, "absorbed"), long_decode).totals.lower_bound_seconds,
            0.6 * analyze_phase(v3, long_decode).totals.lower_bound_seconds);
  // quantized weights: the absorbed rows are read in the compute dtype (vLLM dequantizes them at load)
  const Analysis int4 = analyze_phase(with_weights(with_mla(v3, "absorbed"), "int4"), long_decode);
  EXPECT_TRUE(int4.complete());
  bool said = false;
  for (const std::string& note : int4.approximations)
    said = said || note.find("kv_b_proj's rows read in bf16 by the absorbed decode") != std::string::npos;
  EXPECT_TRUE(said);
  try {
    with_mla(decoder_preset("llama-3-8b"), "absorbed");
    ADD_FAILURE() << "a model without latent attention took --mla";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--mla applies to multi-head latent attention"), std::string::npos);
  }
}

TEST(DeepseekTest, TheRouterChoosesWithinGroupsAndTheSharedExpertIsNotGated) {
  json j = small_deepseek();
  DecoderRequest req;
  req.phase = DecoderPhase::kDecode;
  req.context = 8;
  const OpGraph g = build_decoder(parse_decoder_config(j, "c.json"), req, "d");
  std::set<std::string> names;
  for (const OpRecord& op : g.ops()) names.insert(op.name);
  for (const char* op : {"model.layers.1.mlp.gate#sigmoid", "model.layers.1.mlp.gate#correction",
                         "model.layers.1.mlp.gate#group_topk", "model.layers.1.mlp.gate#weights_normalised",
                         "model.layers.1.mlp.gate#weights_scaled", "model.layers.1.mlp.shared_experts.down_proj",
                         "model.layers.1.self_attn.kv_b_proj", "model.layers.0.mlp.down_proj"}) {
    EXPECT_TRUE(names.count(op)) << op;
  }
  EXPECT_FALSE(names.count("model.layers.1.mlp.shared_expert_gate"));
  EXPECT_FALSE(names.count("model.layers.0.mlp.gate#sigmoid"));  // the first layer is dense
  // the correction bias is a buffer, not a parameter; the decode step reads the latent cache
  const Analysis a = analyze_phase(parse_decoder_config(j, "c.json"), req);
  EXPECT_EQ(a.totals.buffer_count, 2u * 8 + 4);  // two routers' biases and the rotary inv_freq
  // one q_proj without q_lora_rank, two shared experts as one of twice the size
  j["q_lora_rank"] = nullptr;
  j["n_shared_experts"] = 2;
  const DecoderConfig q = parse_decoder_config(j, "c.json");
  EXPECT_EQ(q.latent->q_rank, 0);
  EXPECT_EQ(q.shared_expert_intermediate, 64);
  const OpGraph gq = build_decoder(q, req, "d");
  bool q_proj = false;
  for (const OpRecord& op : gq.ops()) q_proj = q_proj || op.name == "model.layers.0.self_attn.q_proj";
  EXPECT_TRUE(q_proj);
  // tensor parallelism splits the heads; the latent stays whole on every device
  const DecoderConfig shard = shard_decoder(parse_decoder_config(small_deepseek(), "c.json"), 2, nullptr);
  EXPECT_EQ(shard.heads, 2);
  EXPECT_EQ(kv_cache_bytes_per_token(shard, DType::kBf16), 3u * (32 + 8) * 2);
}

TEST(DeepseekTest, WhatIsNotModeledIsOneClearError) {
  json j = small_deepseek();
  j["scoring_func"] = "softmax";
  expect_error(j, ErrorCode::kUnimplemented, "field 'scoring_func' is \"softmax\": another router score");
  j = small_deepseek();
  j["topk_method"] = "greedy";
  expect_error(j, ErrorCode::kUnimplemented, "field 'topk_method' is \"greedy\"");
  j = small_deepseek();
  j["moe_layer_freq"] = 2;
  expect_error(j, ErrorCode::kUnimplemented, "field 'moe_layer_freq' is 2");
  j = small_deepseek();
  j["num_key_value_heads"] = 2;
  expect_error(j, ErrorCode::kUnimplemented, "num_key_value_heads 2 differs from num_attention_heads 4");
  j = small_deepseek();
  j["n_group"] = 3;
  expect_error(j, ErrorCode::kInvalidArgument, "n_routed_experts 8 must split into n_group 3 groups");
  j = small_deepseek();
  j["topk_group"] = 5;
  expect_error(j, ErrorCode::kInvalidArgument, "topk_group 5 is more than n_group 4");
  j = small_deepseek();
  j["num_experts_per_tok"] = 5;
  expect_error(j, ErrorCode::kInvalidArgument, "num_experts_per_tok 5 is more than the 4 experts of topk_group 2");
  j = small_deepseek();
  j["qk_rope_head_dim"] = 7;
  expect_error(j, ErrorCode::kInvalidArgument, "qk_rope_head_dim 7 must be even");
  j = small_deepseek();
  j["first_k_dense_replace"] = 4;
  expect_error(j, ErrorCode::kInvalidArgument, "first_k_dense_replace 4 is more than num_hidden_layers 3");
  j = small_deepseek();
  j["routed_scaling_factor"] = -1;
  expect_error(j, ErrorCode::kInvalidArgument, "field 'routed_scaling_factor' must be a positive number");
  j = small_deepseek();
  j["hidden_act"] = "gelu";
  expect_error(j, ErrorCode::kUnimplemented, "field 'hidden_act' is \"gelu\"");
}

json small_deepseek_v2() {
  json j = small_deepseek();
  j["model_type"] = "deepseek_v2";
  j["topk_method"] = "group_limited_greedy";
  j["scoring_func"] = "softmax";
  j["routed_scaling_factor"] = 16.0;
  return j;
}

TEST(DeepseekTest, DeepseekV2RoutesBySoftmaxAndRotatesComplexPairs) {
  // the presets' parameters: transformers' DeepseekV2ForCausalLM from the same configs (meta device)
  EXPECT_EQ(decoder_parameter_count(decoder_preset("deepseek-v2")), kDeepseekV2Parameters);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("deepseek-v2-lite")), kDeepseekV2LiteParameters);
  // active per token, the same meta-device models: every parameter but the experts a token skips
  EXPECT_EQ(decoder_active_parameter_count(decoder_preset("deepseek-v2")), 21375800320u);
  EXPECT_EQ(decoder_active_parameter_count(decoder_preset("deepseek-v2-lite")), 2661150208u);
  const DecoderConfig c = parse_decoder_config(small_deepseek_v2(), "c.json");
  EXPECT_TRUE(c.softmax_group_router);
  EXPECT_FALSE(c.grouped_sigmoid_router);
  EXPECT_FALSE(c.normalize_top_k);  // transformers' DeepseekV2 router never renormalises
  EXPECT_TRUE(c.latent->complex_rotary);
  DecoderRequest req;
  req.phase = DecoderPhase::kDecode;
  req.context = 8;
  req.batch = 3;
  const OpGraph g = build_decoder(c, req, "d");
  std::set<std::string> names;
  for (const OpRecord& op : g.ops()) names.insert(op.name);
  for (const char* op : {"model.layers.1.mlp.gate#softmax", "model.layers.1.mlp.gate#group_scores",
                         "model.layers.1.mlp.gate#masked_fill", "model.layers.1.mlp.gate#weights_scaled",
                         "model.layers.1.self_attn#rotary_q#complex_mul", "model.rotary_emb#polar"}) {
    EXPECT_TRUE(names.count(op)) << op;
  }
  EXPECT_FALSE(names.count("model.layers.1.mlp.gate#weights_normalised"));
  EXPECT_FALSE(names.count("model.layers.1.mlp.gate#correction"));
  // the rotary pairs: a complex product of 6 FLOPs a pair, on q (3 x 4 heads) and k (3 x 1), 4 pairs each
  const Analysis a = analyze_phase(c, req);
  EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
  std::uint64_t rotary = 0;
  for (const OpRoofline& r : a.ops) {
    if (a.graph.op(r.op_index).name.find("#complex_mul") != std::string::npos) rotary += r.cost.flops;
  }
  EXPECT_EQ(rotary, 3u * 3 * (4 + 1) * 4 * 6);  // layers x batch x (q heads + the shared key) x pairs x 6
  // greedy: one top-k over every expert, no groups
  json greedy = small_deepseek_v2();
  greedy["topk_method"] = "greedy";
  greedy.erase("n_group");
  greedy.erase("topk_group");
  const DecoderConfig gc = parse_decoder_config(greedy, "c.json");
  EXPECT_EQ(gc.expert_groups, 1);
  std::set<std::string> greedy_names;
  const OpGraph gg = build_decoder(gc, req, "d");
  for (const OpRecord& op : gg.ops()) greedy_names.insert(op.name);
  EXPECT_FALSE(greedy_names.count("model.layers.1.mlp.gate#group_scores"));
  EXPECT_TRUE(greedy_names.count("model.layers.1.mlp.gate#topk"));
  // norm_topk_prob true is read as transformers reads it, and said
  json normed = small_deepseek_v2();
  normed["norm_topk_prob"] = true;
  const OpGraph gn = build_decoder(parse_decoder_config(normed, "c.json"), req, "d");
  bool said = false;
  for (const std::string& n : gn.notes()) said = said || n.find("norm_topk_prob is true") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(DeepseekTest, DeepseekV2FieldsNotModeledAreOneClearError) {
  json j = small_deepseek_v2();
  j["scoring_func"] = "sigmoid";
  expect_error(j, ErrorCode::kUnimplemented, "field 'scoring_func' is \"sigmoid\": another router score");
  j = small_deepseek_v2();
  j["topk_method"] = "noaux_tc";
  expect_error(j, ErrorCode::kUnimplemented, "deepseek_v2 is modeled with 'greedy' or 'group_limited_greedy'");
  j = small_deepseek_v2();
  j.erase("num_experts_per_tok");
  expect_error(j, ErrorCode::kInvalidArgument, "num_experts_per_tok");
  j = small_deepseek_v2();
  j["mlp_bias"] = true;
  expect_error(j, ErrorCode::kUnimplemented, "field 'mlp_bias' is true");
  j = small_deepseek_v2();
  j.erase("n_group");
  expect_error(j, ErrorCode::kInvalidArgument, "n_group");
}

}  // namespace
}  // namespace neuralcost
