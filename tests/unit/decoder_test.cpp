// Decoder LLMs (issue 25): parameters against the published counts, the KV cache per token,
// prefill and decode FLOPs against closed forms, the decode bound against the bytes every step
// must read on every device, and one clear error per bad config or option.
#include "neuralcost/models/decoder.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

std::uint64_t dim_of(std::int64_t d) { return static_cast<std::uint64_t>(d); }

Analysis analyze_phase(const DecoderConfig& c, DecoderRequest r, const std::string& hardware = "h100-sxm") {
  return analyze(build_decoder(c, r, "decoder"), HardwareDatabase::builtin().get(hardware));
}

TEST(DecoderTest, ParametersAreThePublishedCounts) {
  // Meta's model cards and the transformers configs' own counts
  EXPECT_EQ(decoder_parameter_count(decoder_preset("llama-2-7b")), 6738415616u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("llama-3-8b")), 8030261248u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("llama-2-70b")), 68976648192u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("mistral-7b")), 7241732096u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("qwen2.5-7b")), 7615616512u);
  // Gemma (tied embeddings, head_dim 256) and Phi-3 mini (fused projections): the counts Keras
  // Hub's presets publish for the same checkpoints
  EXPECT_EQ(decoder_parameter_count(decoder_preset("gemma-2b")), 2506172416u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("gemma-7b")), 8537680896u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("phi-3-mini-4k")), 3821079552u);
  // the graph reads every parameter, each once (the embedding through its lookup)
  DecoderRequest r;
  r.prompt = 16;
  for (const char* name : {"llama-2-7b", "llama-3-8b", "qwen2.5-7b", "gemma-2b", "phi-3-mini-4k"}) {
    const Analysis a = analyze_phase(decoder_preset(name), r);
    EXPECT_TRUE(a.complete()) << name << ": " << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
    EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(decoder_preset(name))) << name;
  }
}

TEST(DecoderTest, KvCachePerTokenCountsTheKvHeadsNotTheQueryHeads) {
  EXPECT_EQ(kv_cache_bytes_per_token(decoder_preset("llama-3-8b"), DType::kFp16), 131072u);  // 2·32·8·128·2
  EXPECT_EQ(kv_cache_bytes_per_token(decoder_preset("llama-2-7b"), DType::kFp16), 524288u);  // 2·32·32·128·2
}

// Prefill of P tokens and a decode step at context C against closed forms: every projection
// 2·tokens·in·out, attention 2·B·H·pairs·(D + D) per layer (prefill causal: P(P+1)/2 pairs; decode:
// C + 1 keys), the rotary frequencies 2·(D/2)·T (once for every sequence), the LM head over the last position only.
TEST(DecoderTest, PrefillAndDecodeContractionsMatchClosedForms) {
  const DecoderConfig c = decoder_preset("llama-3-8b");
  const std::uint64_t e = 4096, i = 14336, v = 128256, d = 128, h = 32, kv = 8, layers = 32;
  const std::uint64_t per_token = 2 * (e * h * d + 2 * e * kv * d + h * d * e + 3 * e * i);  // one layer's projections
  for (const std::uint64_t b : {1u, 8u}) {
    DecoderRequest r;
    r.batch = static_cast<std::int64_t>(b);
    r.prompt = 100;
    const std::uint64_t p = 100;
    Analysis a = analyze_phase(c, r);
    EXPECT_EQ(a.totals.contraction_flops,
              layers * (b * p * per_token + 2 * b * h * (p * (p + 1) / 2) * 2 * d) + 2 * (d / 2) * p + 2 * b * e * v);
    r.phase = DecoderPhase::kDecode;
    r.context = 1000;
    a = analyze_phase(c, r);
    EXPECT_EQ(a.totals.contraction_flops,
              layers * (b * per_token + 2 * b * h * 1001 * 2 * d) + 2 * (d / 2) + 2 * b * e * v);
  }
}

// A training step's forward pass: every position's logits (2·B·P·E·V, not the last position's),
// reshaped into the cross entropy's rows, and no KV cache written. Training a prefill graph instead
// dropped P − 1 positions of the LM head (Llama-3 8B at 4,096 tokens: 185 TFLOP a step instead of
// 198) and fell back to a mean squared error on [B, 1, V].
TEST(DecoderTest, ATrainingStepHasEveryPositionsLogitsAndCrossEntropy) {
  const DecoderConfig c = decoder_preset("llama-3-8b");
  const std::uint64_t e = 4096, i = 14336, v = 128256, d = 128, h = 32, kv = 8, layers = 32, b = 2, p = 100;
  const std::uint64_t per_token = 2 * (e * h * d + 2 * e * kv * d + h * d * e + 3 * e * i);
  DecoderRequest r;
  r.batch = static_cast<std::int64_t>(b);
  r.prompt = static_cast<std::int64_t>(p);
  r.training = true;
  const OpGraph g = build_decoder(c, r, "decoder");
  const Analysis a = analyze(g, HardwareDatabase::builtin().get("h100-sxm"));
  EXPECT_EQ(a.totals.contraction_flops,
            layers * (b * p * per_token + 2 * b * h * (p * (p + 1) / 2) * 2 * d) + 2 * (d / 2) * p + 2 * b * p * e * v);
  ASSERT_EQ(g.marked_outputs().size(), 1u);
  const auto producer = g.producer(g.marked_outputs()[0]);
  ASSERT_TRUE(producer.has_value());
  EXPECT_EQ(g.op(*producer).outputs[0].shape, (Shape{static_cast<std::int64_t>(b * p), static_cast<std::int64_t>(v)}));
  for (const OpRecord& op : g.ops()) EXPECT_EQ(op.name.find("cache"), std::string::npos) << op.name;
  TrainingOptions options;
  const OpGraph step = training_step(g, options);
  bool cross_entropy = false;
  for (const OpRecord& op : step.ops()) {
    if (op.kind == OpKind::kLoss) cross_entropy = op.attributes.get_string("function", "") == "cross_entropy";
  }
  EXPECT_TRUE(cross_entropy);
  r.phase = DecoderPhase::kDecode;
  EXPECT_THROW(build_decoder(c, r, "decoder"), Error);
}

// A mixture of experts trains: each expert linear's input and weight gradients take its forward
// multiply-accumulates each, top-k's gradient scatters into the router's probabilities, and every
// op of the step is modeled. The step's contractions are three times the forward's, less the
// rotary table's (no gradient: it depends on positions only, twice 2·(d/2)·p).
TEST(DecoderTest, AMixtureOfExpertsTrainingStepIsModeledAndThreeTimesTheForward) {
  const DecoderConfig c = decoder_preset("mixtral-8x7b");
  DecoderRequest r;
  r.batch = 1;
  r.prompt = 64;
  r.training = true;
  const OpGraph g = build_decoder(c, r, "decoder");
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  const Analysis forward = analyze(g, hw);
  TrainingOptions options;
  options.precision = Precision::kBf16Mixed;
  const Analysis step = analyze(training_step(g, options), hw);
  EXPECT_TRUE(step.complete());
  const std::uint64_t rotary = 2 * (128 / 2) * 64;
  EXPECT_EQ(step.totals.contraction_flops, 3 * forward.totals.contraction_flops - 2 * rotary);
  std::size_t expert_gradients = 0;
  for (std::size_t i = 0; i < step.graph.size(); ++i) {
    const OpRecord& op = step.graph.op(i);
    if (!op.differentiates || op.differentiates->kind != OpKind::kExpertLinear) continue;
    ++expert_gradients;
    EXPECT_EQ(step.ops[i].cost.contraction_flops, cost_of(*op.differentiates).contraction_flops) << op.name;
  }
  EXPECT_EQ(expert_gradients, 32u * 3 * 2);  // w1, w3, w2 in 32 layers: dX and dW each
  const MemoryLedger ledger = memory_ledger(g, options);
  EXPECT_TRUE(ledger.unknown_saves.empty());
}

// A decode step reads every weight it multiplies and the whole KV cache: on every device, its
// lower bound is at least those bytes over the memory bandwidth (never a physically impossible time).
TEST(DecoderTest, TheDecodeBoundIsNeverBelowTheWeightsAndCacheOverBandwidth) {
  const DecoderConfig c = decoder_preset("llama-3-8b");
  std::size_t devices = 0;
  for (const HardwareSpec& hw : HardwareDatabase::builtin().specs()) {
    // the rotary tables are computed in fp32 (as transformers does): a device without an fp32
    // peak (a TPU spec) cannot time them, which analyze says in one error
    if (!hw.peak_flops_per_second.count(DType::kFp32)) continue;
    ++devices;
    const DType dtype = hw.peak_flops_per_second.count(DType::kBf16) ? DType::kBf16 : DType::kFp32;
    for (const std::int64_t batch : {1, 64}) {
      DecoderRequest r;
      r.phase = DecoderPhase::kDecode;
      r.batch = batch;
      r.context = 4095;
      r.dtype = dtype;
      const Analysis a = analyze(build_decoder(c, r, "decoder"), hw);
      std::uint64_t linear_weights = 0;
      for (const OpRoofline& op : a.ops) {
        const OpRecord& rec = a.graph.op(op.op_index);
        if (rec.kind != OpKind::kLinear) continue;
        for (const ParameterDesc& p : rec.parameters) linear_weights += p.bytes();
      }
      const double kv = static_cast<double>(kv_cache_bytes_per_token(c, dtype)) * 4096 * static_cast<double>(batch);
      const double floor = (static_cast<double>(linear_weights) + kv) / hw.memory_bandwidth_bytes_per_second;
      EXPECT_GE(a.totals.fused_lower_bound_seconds, floor * (1 - 1e-9)) << hw.id << " batch " << batch;
      EXPECT_GE(a.totals.lower_bound_seconds, floor * (1 - 1e-9)) << hw.id << " batch " << batch;
    }
  }
  EXPECT_GT(devices, 30u);
}

std::string write_config(const json& j) {
  const auto path = std::filesystem::temp_directory_path() / "neuralcost_decoder_test_config.json";
  std::ofstream(path) << j.dump();
  return path.string();
}

json small_llama() {
  return {{"model_type", "llama"},
          {"hidden_size", 64},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 128},
          {"vocab_size", 500},
          {"max_position_embeddings", 64},
          {"tie_word_embeddings", false},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"}};
}

json small_mixtral() {
  json j = small_llama();
  j["model_type"] = "mixtral";
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  return j;
}

OpGraph import_config(const json& config, ModelRequest request = {}) {
  request.model = write_config(config);
  return importer_for(request).import(request);
}

TEST(DecoderTest, MixtralCountsEveryExpertAndReadsTheExpertsItsTokensReach) {
  const DecoderConfig c = decoder_preset("mixtral-8x7b");
  EXPECT_EQ(decoder_parameter_count(c), 46702792704u);         // Mistral AI's model card: 46.7B
  EXPECT_EQ(decoder_active_parameter_count(c), 12879925248u);  // 12.9B active per token (2 of 8 experts)
  EXPECT_DOUBLE_EQ(expected_experts_reached(c, 1), 2.0);       // one token: its 2 experts
  EXPECT_DOUBLE_EQ(expected_experts_reached(c, 2), 8 * (1 - 0.75 * 0.75));
  const std::uint64_t e = 4096, i = 14336, d = 128, h = 32, kv = 8, layers = 32, experts = 8, k = 2, v = 32000;
  const std::uint64_t attention = 2 * (e * h * d + 2 * e * kv * d + h * d * e);
  for (const std::int64_t batch : {1, 16}) {
    DecoderRequest r;
    r.phase = DecoderPhase::kDecode;
    r.batch = batch;
    r.context = 1000;
    const Analysis a = analyze_phase(c, r);
    EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
    EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(c));
    // per token and layer: the attention's projections, the router, k experts' three projections
    const std::uint64_t b = static_cast<std::uint64_t>(batch);
    const std::uint64_t scores = 2 * 2 * b * h * 1001 * d;  // q·k and p·v over 1001 keys
    const std::uint64_t rotary = 2 * (d / 2);
    EXPECT_EQ(a.totals.contraction_flops,
              layers * (b * (attention + 2 * e * experts + k * 2 * 3 * e * i) + scores) + rotary + 2 * b * e * v);
    // the expert weights read: E·(1 − (1 − k/E)^B) experts of each layer, in bf16
    std::uint64_t expert_bytes = 0;
    for (const OpRoofline& op : a.ops) {
      if (a.graph.op(op.op_index).kind == OpKind::kExpertLinear) expert_bytes += op.cost.parameter_bytes;
    }
    const double reached = expected_experts_reached(c, b);
    EXPECT_NEAR(static_cast<double>(expert_bytes), layers * reached * 3 * e * i * 2, layers * 3.0);
    EXPECT_FALSE(a.approximations.empty());  // the expectation is named
  }
  // a prefill of 512 tokens reaches (nearly) all 8 experts
  DecoderRequest p;
  p.prompt = 512;
  EXPECT_NEAR(expected_experts_reached(c, 512), 8.0, 1e-9);
  EXPECT_TRUE(analyze_phase(c, p).complete());
  // a mixtral config.json is read as the preset is
  ModelRequest eight;
  eight.prompt = 8;
  eight.given.insert("prompt");
  EXPECT_EQ(analyze(import_config(small_mixtral(), eight), HardwareDatabase::builtin().get("h100-sxm"))
                .totals.parameter_count,
            decoder_parameter_count(parse_decoder_config(small_mixtral(), "m.json")));
}

json small_qwen2_moe() {
  // every kind of layer: dense (0, and 3 by mlp_only_layers), experts (1; 2 is dense by the step)
  return json{{"model_type", "qwen2_moe"},
              {"hidden_size", 64},
              {"num_hidden_layers", 4},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"intermediate_size", 96},
              {"moe_intermediate_size", 32},
              {"shared_expert_intermediate_size", 48},
              {"num_experts", 8},
              {"num_experts_per_tok", 2},
              {"norm_topk_prob", true},
              {"decoder_sparse_step", 2},
              {"mlp_only_layers", {3}},
              {"vocab_size", 500},
              {"max_position_embeddings", 256},
              {"tie_word_embeddings", false}};
}

// Qwen2-MoE (Qwen1.5-MoE): experts of their own size, a shared expert every token goes through
// with a sigmoid gate, dense layers by decoder_sparse_step and mlp_only_layers. The parameter
// counts are transformers' own: Qwen2MoeForCausalLM(Qwen2MoeConfig(...)) in transformers 5.23 has
// 228,480 parameters for small_qwen2_moe(), and Qwen1.5-MoE-A2.7B's card says 14.3B, 2.7B active.
TEST(DecoderTest, Qwen2MoeCountsSharedExpertsAndDenseLayersLikeTransformers) {
  const DecoderConfig q = decoder_preset("qwen1.5-moe-a2.7b");
  EXPECT_EQ(decoder_parameter_count(q), 14315784192u);
  EXPECT_EQ(decoder_active_parameter_count(q), 2689173504u);  // less 24 layers x 56 idle experts x 3·2048·1408
  const DecoderConfig c = parse_decoder_config(small_qwen2_moe(), "q.json");
  EXPECT_EQ(decoder_parameter_count(c), 228480u);
  EXPECT_EQ(c.moe_layer_count(), 1);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_FALSE(c.moe_layer(3));
  const std::uint64_t e = 64, d = 16, h = 4, kv = 2, i = 96, x = 32, s = 48, experts = 8, k = 2, v = 500;
  const std::uint64_t attention = 2 * (e * h * d + 2 * e * kv * d + h * d * e);
  for (const std::int64_t batch : {1, 3}) {
    DecoderRequest r;
    r.phase = DecoderPhase::kDecode;
    r.batch = batch;
    r.context = 100;
    const Analysis a = analyze_phase(c, r);
    EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
    EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(c));
    const std::uint64_t b = static_cast<std::uint64_t>(batch);
    const std::uint64_t scores = 2 * 2 * b * h * 101 * d;
    const std::uint64_t dense = 2 * 3 * e * i;
    // the router, k experts' three projections, the shared expert's three and its one-output gate
    const std::uint64_t sparse = 2 * e * experts + k * 2 * 3 * e * x + 2 * 3 * e * s + 2 * e;
    const std::uint64_t rotary = 2 * (d / 2);
    EXPECT_EQ(a.totals.contraction_flops,
              4 * (b * attention + scores) + b * (3 * dense + sparse) + rotary + 2 * b * e * v);
  }
  // norm_topk_prob false (Qwen1.5-MoE's): the top-k weights are not renormalised
  DecoderRequest one;
  one.phase = DecoderPhase::kDecode;
  one.context = 8;
  const OpGraph g = build_decoder(q, one, "q");
  bool renormalised = false;
  for (const OpRecord& op : g.ops())
    renormalised = renormalised || op.name.find("#weights_normalised") != std::string::npos;
  EXPECT_FALSE(renormalised);
  // tensor parallelism splits every expert and the shared expert like the dense MLP
  const DecoderConfig shard = shard_decoder(q, 4, nullptr);
  EXPECT_EQ(shard.expert_intermediate, 352);
  EXPECT_EQ(shard.shared_expert_intermediate, 1408);
}

// Qwen3 and Qwen3-MoE: q_norm and k_norm (an RMS norm over head_dim on each head, before the
// rotary positions), Qwen3Config's head_dim default of 128, no shared expert. The presets' counts by
// hand: Qwen3-8B 36 x (41,943,040 attention + 256 q/k norms + 8,192 norms + 150,994,944 MLP) + 2 x
// 151,936 x 4,096 + 4,096 = 8,190,735,360 (the card's 8.2B); Qwen3-30B-A3B 48 x (18,874,368 + 256 +
// 4,096 + 128 x 4,718,592 experts + 262,144 router) + 622,329,856 + 2,048 = 30,532,122,624 (30.5B),
// 3,353,032,704 active with 8 experts (3.3B).
TEST(DecoderTest, Qwen3NormsEachHeadsQueriesAndKeys) {
  EXPECT_EQ(decoder_parameter_count(decoder_preset("qwen3-8b")), 8190735360u);
  const DecoderConfig moe = decoder_preset("qwen3-30b-a3b");
  EXPECT_EQ(decoder_parameter_count(moe), 30532122624u);
  EXPECT_EQ(decoder_active_parameter_count(moe), 3353032704u);
  EXPECT_EQ(moe.shared_expert_intermediate, 0);
  nlohmann::json small = {{"model_type", "qwen3"},    {"hidden_size", 64},
                          {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                          {"num_key_value_heads", 2}, {"intermediate_size", 96},
                          {"vocab_size", 500},        {"max_position_embeddings", 256}};
  const DecoderConfig c = parse_decoder_config(small, "q3.json");
  EXPECT_EQ(c.head_dim, 128);  // Qwen3Config's default, not 64 / 4
  EXPECT_TRUE(c.qk_norm);
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = 2;
  r.context = 10;
  const Analysis a = analyze_phase(c, r);
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(c));
  int norms = 0;
  for (const OpRecord& op : a.graph.ops()) {
    if (op.name.find("self_attn.q_norm") != std::string::npos ||
        op.name.find("self_attn.k_norm") != std::string::npos) {
      ++norms;
      EXPECT_EQ(op.kind, OpKind::kRmsNorm);
      EXPECT_EQ(op.parameters.at(0).shape, (Shape{128}));
    }
  }
  EXPECT_EQ(norms, 4);  // q and k in each of the 2 layers
  // Qwen3Config's windows: on the layers from max_window_layers (default 28) on, as its layer_types
  small["use_sliding_window"] = true;
  small["sliding_window"] = 16;
  EXPECT_TRUE(parse_decoder_config(small, "q3.json").sliding_layers.empty());  // 2 layers, none from 28 on
  EXPECT_EQ(parse_decoder_config(small, "q3.json").sliding_window, 0);
  small["max_window_layers"] = 1;
  const DecoderConfig windowed = parse_decoder_config(small, "q3.json");
  EXPECT_EQ(windowed.sliding_window, 16);
  EXPECT_EQ(windowed.sliding_layers, (std::vector<bool>{false, true}));
  small["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_EQ(parse_decoder_config(small, "q3.json").sliding_layers, (std::vector<bool>{true, false}));
}

// An absent num_key_value_heads (or head_dim) is the config class's default in transformers 5, not
// the query heads (or hidden / heads): the KV cache and every decode byte follow from it.
TEST(DecoderTest, AbsentFieldsTakeTheirConfigClassDefaults) {
  const auto without = [](nlohmann::json j, const char* field) {
    j.erase(field);
    return j;
  };
  nlohmann::json mistral = {{"model_type", "mistral"},  {"hidden_size", 4096},
                            {"num_hidden_layers", 2},   {"num_attention_heads", 32},
                            {"num_key_value_heads", 8}, {"intermediate_size", 14336},
                            {"vocab_size", 32000},      {"max_position_embeddings", 32768}};
  EXPECT_EQ(parse_decoder_config(without(mistral, "num_key_value_heads"), "m.json").kv_heads, 8);
  nlohmann::json mixtral = mistral;
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  EXPECT_EQ(parse_decoder_config(without(mixtral, "num_key_value_heads"), "x.json").kv_heads, 8);
  mistral["model_type"] = "llama";  // LlamaConfig: the heads
  EXPECT_EQ(parse_decoder_config(without(mistral, "num_key_value_heads"), "l.json").kv_heads, 32);
  nlohmann::json qwen3_moe = mistral;
  qwen3_moe["model_type"] = "qwen3_moe";
  qwen3_moe["num_experts"] = 8;
  qwen3_moe["num_experts_per_tok"] = 2;
  qwen3_moe["moe_intermediate_size"] = 768;
  EXPECT_EQ(parse_decoder_config(without(qwen3_moe, "num_key_value_heads"), "q.json").kv_heads, 4);
  // Qwen2Config's 32 does not divide 28 heads: an error that says the value was the default
  nlohmann::json qwen2 = mistral;
  qwen2["model_type"] = "qwen2";
  qwen2["num_attention_heads"] = 28;
  qwen2["hidden_size"] = 3584;
  try {
    parse_decoder_config(without(qwen2, "num_key_value_heads"), "q2.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads 28 is not a multiple of num_key_value_heads 32 "
                                         "(absent: qwen2's default)"),
              std::string::npos)
        << e.what();
  }
  // GemmaConfig: head_dim 256 whatever hidden / heads is (Gemma-7B: 3072 / 16 = 192)
  nlohmann::json gemma = {{"model_type", "gemma"},     {"hidden_size", 3072},
                          {"num_hidden_layers", 2},    {"num_attention_heads", 16},
                          {"num_key_value_heads", 16}, {"intermediate_size", 24576},
                          {"vocab_size", 256000},      {"max_position_embeddings", 8192}};
  EXPECT_EQ(parse_decoder_config(gemma, "g.json").head_dim, 256);
  EXPECT_EQ(parse_decoder_config(without(gemma, "num_key_value_heads"), "g.json").kv_heads, 16);
}

// Gemma and Phi-3 against closed forms: the same contractions as a Llama of their sizes (Phi-3's
// fused qkv_proj and gate_up_proj multiply as much as the separate ones), and the ops that differ
// counted: Gemma's embedding scale (B·T·E), (1 + weight) in each of its 2L + 1 norms (E each) and
// GELU's tanh form in the MLP; Phi-3's splits are views that move no bytes.
TEST(DecoderTest, GemmaAndPhi3CountLikeTheirModules) {
  DecoderRequest r;
  r.batch = 2;
  r.prompt = 64;
  const std::uint64_t b = 2, p = 64;
  for (const char* name : {"gemma-2b", "phi-3-mini-4k"}) {
    const DecoderConfig c = decoder_preset(name);
    const std::uint64_t e = dim_of(c.hidden), i = dim_of(c.intermediate), v = dim_of(c.vocab), d = dim_of(c.head_dim),
                        h = dim_of(c.heads), kv = dim_of(c.kv_heads), layers = dim_of(c.layers);
    const std::uint64_t per_token = 2 * (e * h * d + 2 * e * kv * d + h * d * e + 3 * e * i);
    const Analysis a = analyze_phase(c, r);
    EXPECT_EQ(a.totals.contraction_flops,
              layers * (b * p * per_token + 2 * b * h * (p * (p + 1) / 2) * 2 * d) + 2 * (d / 2) * p + 2 * b * e * v)
        << name;
  }
  // Gemma against the same network without its three differences
  DecoderConfig gemma = decoder_preset("gemma-2b");
  DecoderConfig plain = gemma;
  plain.embedding_scale = plain.norm_offset = false;
  plain.activation = "silu";
  const Analysis with = analyze_phase(gemma, r), without = analyze_phase(plain, r);
  const std::uint64_t e = 2048, norms = 2 * 18 + 1, gelu_over_silu = 9 - 5;  // FLOPs per element (elementwise_costs)
  const std::uint64_t mlp_elements = 18 * b * p * 16384;
  EXPECT_EQ(with.totals.flops - without.totals.flops, b * p * e + norms * e + mlp_elements * gelu_over_silu);
  // Phi-3's fused projections: no more bytes than separate ones (the slices are views)
  DecoderConfig phi = decoder_preset("phi-3-mini-4k");
  DecoderConfig separate = phi;
  separate.fused_projections = false;
  const Analysis fused = analyze_phase(phi, r), apart = analyze_phase(separate, r);
  EXPECT_EQ(fused.totals.contraction_flops, apart.totals.contraction_flops);
  EXPECT_EQ(fused.totals.parameter_count, apart.totals.parameter_count);
  EXPECT_LE(fused.totals.bytes_read + fused.totals.bytes_written, apart.totals.bytes_read + apart.totals.bytes_written);
  // Phi-3 mini's window of 2047 keys: a longer prompt's attention is banded, each query keeping
  // its 2047 most recent keys (2048 queries: 2047·2048/2 + 2047 pairs per head, not 2048·2049/2)
  r.prompt = 2048;
  const Analysis banded = analyze_phase(phi, r);
  r.prompt = 2047;
  const Analysis full = analyze_phase(phi, r);
  const std::uint64_t per_pair = 2 * 32 * (96 + 96) * 32;  // Q·Kᵀ and P·V, 32 heads of 96, 32 layers
  const std::uint64_t projections = 32ull * 2 * (3072 * 9216 + 3072 * 3072 + 3072 * 16384 + 8192 * 3072);
  EXPECT_EQ(banded.totals.contraction_flops - full.totals.contraction_flops,
            static_cast<std::uint64_t>(r.batch) * (projections + per_pair * 2047) + 2 * 48 * 1);  // per sequence; the
                                                                                                  // rotary once
}

TEST(DecoderTest, AConfigJsonIsRecognisedByItsContent) {
  ModelRequest r;
  r.batch = 2;
  r.prompt = 16;
  const Analysis a = analyze(import_config(small_llama(), r), HardwareDatabase::builtin().get("h100-sxm"));
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.totals.parameter_count, 2u * 500 * 64 + 2 * (64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64);
  EXPECT_EQ(a.graph.batch(), 2);
}

void expect_error(const json& config, const std::string& fragment, ModelRequest request = {}) {
  try {
    import_config(config, request);
    ADD_FAILURE() << "no error; expected one with: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(DecoderTest, BadConfigsAndOptionsAreOneClearError) {
  json j = small_llama();
  j["num_attention_heads"] = 5;
  expect_error(j, "hidden_size 64 is not a multiple of num_attention_heads 5");
  j = small_llama();
  j["num_key_value_heads"] = 3;
  expect_error(j, "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  j = small_llama();
  j["hidden_size"] = -64;
  expect_error(j, "field 'hidden_size' must be a positive integer below 2^31, got -64");
  j["hidden_size"] = 1LL << 40;
  expect_error(j, "field 'hidden_size' must be a positive integer below 2^31");
  j = small_llama();
  j.erase("vocab_size");
  expect_error(j, "field 'vocab_size' is missing");
  j = small_llama();
  j["model_type"] = "gpt_bigcode";
  expect_error(j,
               "model_type 'gpt_bigcode' is not supported (supported: llama, mistral, qwen2, qwen2_moe, qwen3, "
               "qwen3_moe, mixtral, deepseek_v2, deepseek_v3, gemma, gemma2, phi3, gpt2, gpt_neox)");
  j = small_llama();
  j["num_local_experts"] = 8;  // a llama with experts: not mixtral's layer
  expect_error(j,
               "field 'num_local_experts': this kind of mixture-of-experts layer is not modeled yet (mixtral's, "
               "qwen2_moe's and qwen3_moe's are)");
  j = small_mixtral();
  j["num_experts_per_tok"] = 9;
  expect_error(j, "num_experts_per_tok 9 is more than num_local_experts 4");
  j = small_mixtral();
  j.erase("num_experts_per_tok");
  expect_error(j, "field 'num_experts_per_tok' is missing");
  j = small_llama();
  j["hidden_act"] = "gelu";  // llama's MLP with GELU: only gemma's is modeled
  expect_error(j, "field 'hidden_act' is 'gelu'");
  j["hidden_act"] = 3;
  expect_error(j, "field 'hidden_act' must be a string, got 3");
  j = small_llama();
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 1.5}};
  expect_error(j, "field 'partial_rotary_factor' is 1.5: it must be above 0 and at most 1");
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.2}};  // 16 x 0.2: 3 dims
  expect_error(j, "3 rotary dims of head_dim 16 (partial_rotary_factor 0.2) must be even and at least 2");
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};  // 8 of 16 dims rotate
  EXPECT_EQ(parse_decoder_config(j, "config.json").rotary_dims, 8);
  j = small_llama();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};  // scaled frequencies: the same count
  EXPECT_NO_THROW(parse_decoder_config(j, "config.json"));
  ModelRequest beyond;
  beyond.phase = "decode";
  beyond.context = 64;
  expect_error(small_llama(), "at context 64 reaches 65 positions, beyond the model's 64 (max_position_embeddings)",
               beyond);
  ModelRequest wrong;
  wrong.phase = "decode";
  wrong.given.insert("prompt");
  expect_error(small_llama(), "--prompt does not apply to the decoder", wrong);
  ModelRequest unknown;
  unknown.phase = "generate";
  expect_error(small_llama(), "--phase generate sums a prefill and its decode steps", unknown);
  unknown.phase = "foo";
  expect_error(small_llama(), "--phase 'foo' is not one of prefill, decode, generate", unknown);
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(DecoderTest, ASlidingWindowBandsTheAttention) {
  const DecoderConfig c = decoder_preset("mistral-7b");  // sliding_window 4096
  ASSERT_EQ(c.sliding_window, 4096);
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  // past the window a decode step reads the W - 1 cached keys and its own: the same step at any context
  r.context = 4095;
  const Analysis at_window = analyze_phase(c, r);
  for (const std::int64_t context : {8191, 20000}) {
    r.context = context;
    const Analysis beyond = analyze_phase(c, r);
    EXPECT_EQ(beyond.totals.flops, at_window.totals.flops) << context;
    EXPECT_EQ(beyond.totals.bytes_read, at_window.totals.bytes_read) << context;
  }
  // a prefill of P > W tokens: W(W+1)/2 + (P - W)·W pairs per head
  DecoderRequest p;
  p.prompt = 6000;
  const OpGraph g = build_decoder(c, p, "mistral");
  const std::uint64_t w = 4096, pairs = w * (w + 1) / 2 + (6000 - w) * w;
  bool found = false;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g.op(i).name != "model.layers.0.self_attn#attention") continue;
    found = true;
    EXPECT_EQ(cost_of(g.op(i)).contraction_flops, 2 * 32 * pairs * (128 + 128));
  }
  EXPECT_TRUE(found);
  // the window's rule on one op: 10 queries over 10 keys, window 4: 1 + 2 + 3 + 4·7 = 34 pairs
  OpRecord a{
      "a",
      OpKind::kAttention,
      "attention",
      {{"q", {1, 2, 10, 8}, DType::kFp32}, {"k", {1, 2, 10, 8}, DType::kFp32}, {"v", {1, 2, 10, 8}, DType::kFp32}},
      {{"y", {1, 2, 10, 8}, DType::kFp32}},
      {},
      {},
      {}};
  a.attributes.set("causal", true);
  a.attributes.set("window", std::int64_t{4});
  EXPECT_EQ(cost_of(a).contraction_flops, 2u * 2 * 34 * (8 + 8));
  a.attributes.set("causal", false);
  EXPECT_THROW(cost_of(a), Error);  // a window needs causal attention
  // serving holds min(context, W) tokens a sequence
  const ServingCapacity at = serving_capacity(c, DType::kBf16, 4096, 1, 80'000'000'000, 0.1, 1);
  const ServingCapacity far = serving_capacity(c, DType::kBf16, 32000, 1, 80'000'000'000, 0.1, 1);
  EXPECT_EQ(far.sequences, at.sequences);
  EXPECT_GT(at.sequences, 0u);
  EXPECT_EQ(far.longest_sequence, static_cast<std::uint64_t>(c.max_positions));
}

TEST(DecoderTest, Gemma2AlternatesItsWindowAndSoftCapsScoresAndLogits) {
  // google/gemma-2-*: 2.6B, 9.2B and 27.2B as the model cards say, with four norms a layer
  EXPECT_EQ(decoder_parameter_count(decoder_preset("gemma-2-2b")), 2614341888u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("gemma-2-9b")), 9241705984u);
  EXPECT_EQ(decoder_parameter_count(decoder_preset("gemma-2-27b")), 27227128320u);
  const DecoderConfig c = decoder_preset("gemma-2-2b");
  ASSERT_EQ(c.sliding_layers.size(), 26u);
  EXPECT_EQ(c.window_of(0), 4096);  // sliding first, as Gemma2Config's default layer_types
  EXPECT_EQ(c.window_of(1), 0);
  // decode at 8,000 tokens: the 13 sliding layers attend to 4,095 cached keys, the 13 others to all
  // 8,000 (and each to the step's own)
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.context = 8000;
  const OpGraph g = build_decoder(c, r, "gemma2");
  std::uint64_t cache = 0;
  int capped = 0, norms = 0, windows = 0, logit_caps = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const OpRecord& op = g.op(i);
    logit_caps += op.name.rfind("lm_head#softcap_", 0) == 0;
    if (op.kind == OpKind::kAttention) {
      for (std::size_t k = 1; k < 3; ++k) cache += op.inputs[k].bytes();
      capped += op.attributes.get_double("softcap", 0) == 50.0;
      windows += op.attributes.has("window");
    }
    if (op.kind == OpKind::kRmsNorm) ++norms;
  }
  const std::uint64_t per_layer_token = 2 * 4 * 256 * 2;        // K and V, 4 KV heads of 256, bf16
  EXPECT_EQ(cache, per_layer_token * (13 * 4096 + 13 * 8001));  // the step's own key and value included
  EXPECT_EQ(kv_cache_bytes(c, DType::kBf16, 8000), per_layer_token * (13 * 4096 + 13 * 8000));
  EXPECT_EQ(kv_cache_bytes(c, DType::kBf16, 100), kv_cache_bytes_per_token(c, DType::kBf16) * 100);
  EXPECT_EQ(capped, 26);
  EXPECT_EQ(windows, 13);
  EXPECT_EQ(norms, 4 * 26 + 1);
  EXPECT_EQ(logit_caps, 3);  // divide, tanh, multiply
  // soft-capping adds a divide, a tanh and a multiply per score: 3 FLOPs and a transcendental
  DecoderConfig uncapped = c;
  uncapped.attention_softcap = uncapped.final_softcap = 0;
  const Analysis with = analyze_phase(c, r), without = analyze_phase(uncapped, r);
  const std::uint64_t scores = 8 * (13 * 4096 + 13 * 8001);  // heads x keys attended, per layer kind
  EXPECT_EQ(with.totals.flops - without.totals.flops, 3 * scores + 3 * 256000);  // and the logits'
  EXPECT_EQ(with.totals.transcendentals - without.totals.transcendentals, scores + 256000);
  // serving: each layer's own blocks, the window's layers at most 4,096 tokens
  const ServingCapacity s = serving_capacity(c, DType::kBf16, 8000, 1, 24'000'000'000, 0.1, 2);
  const std::uint64_t weights = decoder_weight_bytes(c, DType::kBf16);
  const std::uint64_t usable = static_cast<std::uint64_t>(24e9 * (1 - 0.1)) - weights;
  const std::uint64_t layer_block = 16 * per_layer_token;
  EXPECT_EQ(s.sequences, usable / (13 * 256 * layer_block + 13 * 500 * layer_block));
  EXPECT_LE(
      2 * (13 * std::min<std::uint64_t>(s.longest_sequence / 16, 256) + 13 * (s.longest_sequence / 16)) * layer_block,
      usable);
  EXPECT_EQ(s.longest_sequence % 16, 0u);
  // a bad layer_types is one clear error
  json j = {{"model_type", "gemma2"},        {"hidden_size", 64},
            {"num_hidden_layers", 2},        {"num_attention_heads", 4},
            {"intermediate_size", 128},      {"vocab_size", 100},
            {"max_position_embeddings", 64}, {"layer_types", {"sliding_attention"}}};
  try {
    parse_decoder_config(j, "g.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "g.json: field 'layer_types' must list one type for each of the 2 layers");
  }
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["hidden_activation"] = "gelu";
  try {
    parse_decoder_config(j, "g.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "g.json: field 'hidden_activation' is 'gelu': the gated MLP is modeled with silu (and, for gemma and "
                 "gemma2, gelu_pytorch_tanh)");
  }
}

TEST(DecoderTest, Gpt2AndGptNeoxCountLikeTheirModules) {
  // transformers' num_parameters() of GPT2LMHeadModel (tied head, 1,024 learned positions) and of
  // Pythia-160M (GPTNeoXForCausalLM: untied embed_out, biases everywhere, no positions table)
  const DecoderConfig gpt2 = decoder_preset("gpt2");
  const DecoderConfig pythia = decoder_preset("pythia-160m");
  EXPECT_EQ(decoder_parameter_count(gpt2), 124439808u);
  EXPECT_EQ(decoder_parameter_count(pythia), 162322944u);
  EXPECT_EQ(pythia.rotary_dims, 16);  // 64 x 0.25
  EXPECT_EQ(gpt2.rotary_dims, 0);
  DecoderRequest r;
  r.prompt = 16;
  for (const DecoderConfig& c : {gpt2, pythia}) {
    const Analysis a = analyze_phase(c, r);
    EXPECT_TRUE(a.complete()) << c.architecture << ": " << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
    EXPECT_EQ(a.totals.parameter_count, decoder_parameter_count(c)) << c.architecture;
  }
  // prefill contractions: per layer 2·P·(3E·E + E·E + 2·E·I) for the projections, attention
  // 2·H·P(P+1)/2·(D + D), and the head over the last position 2·V·E; Pythia's rotary frequencies
  // 2·(R/2)·P once
  const std::uint64_t p = 16, e = 768, i = 3072, v = 50257, d = 64, h = 12, layers = 12;
  const std::uint64_t per_layer = 2 * p * (4 * e * e + 2 * e * i) + 2 * h * (p * (p + 1) / 2) * (2 * d);
  EXPECT_EQ(analyze_phase(gpt2, r).totals.contraction_flops, layers * per_layer + 2 * v * e);
  EXPECT_EQ(analyze_phase(pythia, r).totals.contraction_flops, layers * per_layer + 2 * 50304 * e + 2 * 8 * p);
  // a config that changes the math and is not modeled is refused
  json j = {{"model_type", "gpt2"},
            {"n_embd", 64},
            {"n_layer", 2},
            {"n_head", 4},
            {"vocab_size", 100},
            {"n_positions", 64},
            {"scale_attn_by_inverse_layer_idx", true}};
  EXPECT_THROW(parse_decoder_config(j, "c"), Error);
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["activation_function"] = "relu";
  EXPECT_THROW(parse_decoder_config(j, "c"), Error);
  j["activation_function"] = "gelu";
  EXPECT_EQ(parse_decoder_config(j, "c").intermediate, 256);  // n_inner: 4 x n_embd
}

TEST(DecoderTest, BadQwen2MoeConfigsAreOneClearError) {
  json j = small_qwen2_moe();
  j["mlp_only_layers"] = {7};
  expect_error(j, "field 'mlp_only_layers' holds 7: each must be a layer index from 0 to 3");
  j = small_qwen2_moe();
  j["use_sliding_window"] = true;
  expect_error(j, "field 'use_sliding_window' is true: qwen2_moe's windows on some layers only");
  j = small_qwen2_moe();
  j["num_experts_per_tok"] = 9;
  expect_error(j, "num_experts_per_tok 9 is more than num_experts 8");
}

}  // namespace
}  // namespace neuralcost
