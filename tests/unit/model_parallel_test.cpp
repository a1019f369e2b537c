// A decoder's training step over dp × tp × pp (issue 26): a stage is its layers' parts of the
// one-layer shard's step and its ends, so with one device the parts add up to the whole model's
// step exactly; the pipeline's bubble, the schedule's micro-batches in flight, the model states by
// ZeRO stage, Korthikanti et al.'s model FLOPs, the search's layouts, and one error per bad layout.
#include "neuralcost/parallel/model_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder_variant.hpp"
#include "neuralcost/parallel/link_time.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

/// A GPT of Megatron's shape (LayerNorm, GeLU 4h MLP, learned positions, tied embeddings).
DecoderConfig gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab = 51200) {
  return parse_decoder_config(json{{"model_type", "gpt2"},
                                   {"n_layer", layers},
                                   {"n_embd", hidden},
                                   {"n_head", heads},
                                   {"n_positions", 2048},
                                   {"vocab_size", vocab},
                                   {"activation_function", "gelu_new"}},
                              "gpt.json");
}

DecoderConfig small_llama() {
  return parse_decoder_config(json{{"model_type", "llama"},
                                   {"hidden_size", 1024},
                                   {"num_hidden_layers", 4},
                                   {"num_attention_heads", 8},
                                   {"num_key_value_heads", 4},
                                   {"intermediate_size", 2816},
                                   {"vocab_size", 8000},
                                   {"max_position_embeddings", 512}},
                              "llama.json");
}

DecoderConfig small_gemma2() {
  return parse_decoder_config(json{{"model_type", "gemma2"},
                                   {"hidden_size", 1024},
                                   {"num_hidden_layers", 4},
                                   {"num_attention_heads", 8},
                                   {"num_key_value_heads", 4},
                                   {"head_dim", 128},
                                   {"intermediate_size", 4096},
                                   {"vocab_size", 8000},
                                   {"sliding_window", 256},
                                   {"max_position_embeddings", 512}},
                              "gemma2.json");
}

ModelParallelRequest request(const std::string& system = "dgx-h100") {
  ModelParallelRequest r;
  r.system = find_system(system);
  r.intra = find_interconnect(r.system.intra_node);
  r.inter = find_interconnect(r.system.inter_node);
  r.training.precision = Precision::kBf16Mixed;
  r.dtype = DType::kBf16;
  r.tokens = 512;
  return r;
}

// One device, one micro-batch: the stage is the whole model, and its FLOPs, parameters and saved
// activations equal the full graph's training step, and its time the step's fused bound pass by
// pass (three architectures: tied GPT, GQA llama, gemma2's alternating windows).
TEST(ModelParallelTest, OneDeviceIsTheWholeStepExactly) {
  for (const DecoderConfig& c : {gpt(4, 1024, 16, 8000), small_llama(), small_gemma2()}) {
    const HardwareSpec& h100 = HardwareDatabase::builtin().get("h100-sxm");
    ShardCostCache cache(c, h100);
    ModelParallelRequest r = request();
    r.micro_batch = 2;
    const ModelParallelStep s = model_parallel_step(cache, r);
    DecoderRequest d;
    d.batch = 2;
    d.prompt = 512;
    d.training = true;
    TrainingOptions options;
    options.precision = Precision::kBf16Mixed;
    const TrainingReport whole = training_report(build_decoder(c, d, "whole"), h100, options);
    ASSERT_EQ(s.stages.size(), 1u);
    EXPECT_EQ(s.hardware_flops, static_cast<double>(whole.step.totals.flops)) << c.architecture;
    EXPECT_EQ(s.model_flops, static_cast<double>(whole.step.totals.flops)) << c.architecture;
    EXPECT_EQ(s.stages[0].parameters, whole.memory.parameter_count) << c.architecture;
    EXPECT_EQ(s.stages[0].activation_bytes, whole.memory.activations.saved_bytes) << c.architecture;
    EXPECT_EQ(s.stages[0].state_bytes, whole.memory.parameter_bytes + whole.memory.gradient_bytes +
                                           whole.memory.optimizer_state_bytes + whole.memory.master_weight_bytes)
        << c.architecture;
    // the times, pass by pass: the whole step's fused kernels (a layer's is what a second layer adds)
    double pass_seconds[3] = {};
    for (const FusionGroup& g : whole.step.fusion_groups) {
      const Pass pass = pass_of(whole.step.graph.op(g.ops.front()));
      pass_seconds[pass == Pass::kForward ? 0 : pass == Pass::kOptimizer ? 2 : 1] += g.lower_bound_seconds;
    }
    EXPECT_NEAR(s.stages[0].forward_seconds, pass_seconds[0], pass_seconds[0] * 1e-9) << c.architecture;
    EXPECT_NEAR(s.stages[0].backward_seconds, pass_seconds[1], pass_seconds[1] * 1e-9) << c.architecture;
    EXPECT_NEAR(s.optimizer_seconds, pass_seconds[2], pass_seconds[2] * 1e-9) << c.architecture;
    EXPECT_NEAR(s.step_seconds, whole.step.totals.fused_lower_bound_seconds,
                whole.step.totals.fused_lower_bound_seconds * 1e-9)
        << c.architecture;
    EXPECT_EQ(s.bubble_seconds, 0);
    EXPECT_EQ(s.p2p_seconds, 0);
  }
}

// Korthikanti et al. (2022), appendix A: model FLOPs per iteration 72·B·L·s·h²(1 + s/(6h) + V/(12hL)),
// counting every query-key pair; causal attention computes half of them (s/(12h)). The rest of the
// exact count is what the formula leaves out: norms, activations, softmax, the loss, the optimizer.
TEST(ModelParallelTest, ModelFlopsAreKorthikantisWithCausalAttention) {
  const DecoderConfig c = gpt(96, 12288, 96);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("a100-sxm-80gb"));
  ModelParallelRequest r = request("dgx-a100");
  r.tokens = 2048;
  r.tp = 8;
  r.pp = 8;
  r.virtual_stages = 3;
  r.global_batch = 64;
  r.recompute = true;
  const ModelParallelStep s = model_parallel_step(cache, r);
  const double B = 64, L = 96, S = 2048, h = 12288, V = 51200;
  const double formula = 72 * B * L * S * h * h * (1 + S / (12 * h) + V / (12 * h * L));
  EXPECT_GT(s.model_flops, formula);
  EXPECT_LT(s.model_flops / formula - 1, 0.005);
  // recomputation reruns every layer's forward pass: HFU's extra is a third of the layers' work
  EXPECT_GT(s.hfu(), s.mfu() * 1.3);
  EXPECT_EQ(s.devices, 64);
  EXPECT_EQ(s.micro_batches, 64);
}

// Megatron's GPT presets: Narayanan et al.'s equation (2), P = 12lh²(1 + 13/(12h) + (V + s)/(12lh)),
// plus the final LayerNorm's 2h, which it leaves out (175B: 174.6 billion, as the paper says).
TEST(ModelParallelTest, MegatronPresetsHaveThePapersParameters) {
  for (const auto& [name, l, h] : {std::tuple<const char*, std::uint64_t, std::uint64_t>{"megatron-gpt-22b", 48, 6144},
                                   {"megatron-gpt-175b", 96, 12288},
                                   {"megatron-gpt-530b", 105, 20480},
                                   {"megatron-gpt-1t", 128, 25600}}) {
    const std::uint64_t V = 51200, s = 2048;
    EXPECT_EQ(decoder_parameter_count(decoder_preset(name)), 12 * l * h * h + 13 * l * h + (V + s) * h + 2 * h) << name;
  }
  EXPECT_EQ(decoder_parameter_count(decoder_preset("megatron-gpt-175b")) / 100000000, 1746u);
}

// The 1F1B schedule: m micro-batches at the busiest device's pace plus the others' fill and drain,
// a v-th of it interleaved; device d keeps min(m, p − d) micro-batches in flight.
TEST(ModelParallelTest, ThePipelinesBubbleAndMicroBatchesInFlight) {
  const DecoderConfig c = gpt(16, 1024, 16);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.pp = 4;
  r.global_batch = 8;
  const ModelParallelStep one = model_parallel_step(cache, r);
  double most = 0, sum = 0;
  for (const PipelineStage& st : one.stages) {
    most = std::max(most, st.busy_seconds());
    sum += st.busy_seconds();
  }
  EXPECT_DOUBLE_EQ(one.bubble_seconds, sum - most);
  EXPECT_DOUBLE_EQ(one.pipeline_seconds, 8 * most + one.bubble_seconds + one.p2p_seconds);
  EXPECT_EQ(one.p2p_seconds, (2.0 * 3 + 2.0 * 7) * one.p2p_each_seconds);
  for (const PipelineStage& st : one.stages) EXPECT_EQ(st.in_flight, 4 - st.index);
  r.virtual_stages = 2;
  const ModelParallelStep two = model_parallel_step(cache, r);
  EXPECT_NEAR(two.bubble_seconds, one.bubble_seconds / 2, one.bubble_seconds * 0.01);
  EXPECT_EQ(two.stages[0].layers.size(), 2u);
  EXPECT_EQ(two.stages[0].layers[1].first, 8);  // device 0 holds chunks 0 and 4 of 2 layers
  // Megatron's interleaved warm-up: (p − d − 1)·2 + (v − 1)·p chunk-forwards, then one in flight
  EXPECT_EQ(two.stages[0].in_flight, 3 * 2 + 1 * 4 + 1);
  EXPECT_EQ(two.stages[3].in_flight, 0 * 2 + 1 * 4 + 1);
  // more micro-batches than stages: the first device keeps p of them
  r.virtual_stages = 1;
  r.global_batch = 2;
  EXPECT_EQ(model_parallel_step(cache, r).stages[0].in_flight, 2);
}

// Uneven stages (--stage-layers): an even list is the even split exactly; an uneven one gives each
// stage its own layers (every layer on one stage, the FLOPs and parameters adding up to the even
// layout's), the busiest stage sets the pace and the bubble is the others' sum below it. Llama 3
// 405B's layout, one layer fewer on the first and last stages (which hold the embedding and the
// head), is the one the ends need: its busiest stage is lighter than an even split's.
TEST(ModelParallelTest, UnevenStagesHoldTheirOwnLayers) {
  const DecoderConfig c = gpt(16, 1024, 16);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.pp = 4;
  r.global_batch = 8;
  const ModelParallelStep even = model_parallel_step(cache, r);
  r.stage_layers = {4, 4, 4, 4};
  const ModelParallelStep listed = model_parallel_step(cache, r);
  EXPECT_DOUBLE_EQ(listed.step_seconds, even.step_seconds);
  EXPECT_EQ(listed.stages[2].layers, even.stages[2].layers);
  r.stage_layers = {3, 5, 5, 3};
  const ModelParallelStep uneven = model_parallel_step(cache, r);
  ASSERT_EQ(uneven.stages.size(), 4u);
  const std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {{0, 3}, {3, 8}, {8, 13}, {13, 16}};
  double flops = 0, even_flops = 0, most = 0, sum = 0;
  std::uint64_t parameters = 0, even_parameters = 0;
  for (std::size_t d = 0; d < 4; ++d) {
    ASSERT_EQ(uneven.stages[d].layers.size(), 1u);
    EXPECT_EQ(uneven.stages[d].layers[0], ranges[d]);
    flops += uneven.stages[d].flops;
    even_flops += even.stages[d].flops;
    parameters += uneven.stages[d].parameters;
    even_parameters += even.stages[d].parameters;
    most = std::max(most, uneven.stages[d].busy_seconds());
    sum += uneven.stages[d].busy_seconds();
  }
  EXPECT_NEAR(flops, even_flops, even_flops * 1e-12);
  EXPECT_EQ(parameters, even_parameters);
  EXPECT_DOUBLE_EQ(uneven.bubble_seconds, sum - most);
  EXPECT_DOUBLE_EQ(uneven.pipeline_seconds, 8 * most + uneven.bubble_seconds + uneven.p2p_seconds);
  // a stage of 5 layers keeps more activations than the even split's 4 (4 − d micro-batches of its own layers)
  EXPECT_GT(uneven.stages[1].activation_bytes, even.stages[1].activation_bytes);
  // the last stage carries the LM head (2·512·1024·51200 FLOPs forward, about four layers' worth):
  // evenly split, it is the busiest; two layers moved off it to the first two stages shorten the step
  EXPECT_DOUBLE_EQ(even.stages[3].busy_seconds(),
                   std::max({even.stages[0].busy_seconds(), even.stages[1].busy_seconds(),
                             even.stages[2].busy_seconds(), even.stages[3].busy_seconds()}));
  r.stage_layers = {5, 5, 4, 2};
  const ModelParallelStep balanced = model_parallel_step(cache, r);
  EXPECT_LT(balanced.step_seconds, even.step_seconds);
  EXPECT_LT(balanced.stages[3].busy_seconds(), even.stages[3].busy_seconds());
  // interleaved: chunks in model order, device d holding chunks d and d + 4; an even list is the even split
  r.virtual_stages = 2;
  r.stage_layers.clear();
  const ModelParallelStep even2 = model_parallel_step(cache, r);
  r.stage_layers = {2, 2, 2, 2, 2, 2, 2, 2};
  EXPECT_DOUBLE_EQ(model_parallel_step(cache, r).step_seconds, even2.step_seconds);
  r.stage_layers = {1, 2, 2, 2, 3, 3, 2, 1};  // the first and last chunks a layer lighter
  const ModelParallelStep uneven2 = model_parallel_step(cache, r);
  EXPECT_EQ(uneven2.stages[0].layers, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}, {7, 10}}));
  EXPECT_EQ(uneven2.stages[3].layers, (std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 7}, {15, 16}}));
  // errors: a count per stage, adding up to the layers, each at least 1, plain 1F1B, pp > 1
  const auto message = [&](auto change) {
    ModelParallelRequest q = request();
    q.pp = 4;
    q.global_batch = 8;
    change(q);
    try {
      model_parallel_step(cache, q);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([](auto& q) {
              q.stage_layers = {4, 4, 8};
            }),
            "--stage-layers gives 3 stage(s), but --parallel has pp=4");
  EXPECT_EQ(message([](auto& q) {
              q.stage_layers = {4, 4, 4, 5};
            }),
            "--stage-layers adds up to 17 layers, but the model has 16");
  EXPECT_EQ(message([](auto& q) {
              q.stage_layers = {8, 8, 0, 0};
            }),
            "--stage-layers: every stage needs at least 1 layer (got 0)");
  EXPECT_EQ(message([](auto& q) {
              q.stage_layers = {4, 4, 4, 4};
              q.virtual_stages = 2;
            }),
            "--stage-layers gives 4 chunk(s), but pp=4 × --virtual-stages 2 makes 8 (in model order: device d holds "
            "chunks d, d + pp, ...)");
  EXPECT_EQ(message([](auto& q) {
              q.pp = 1;
              q.stage_layers = {16};
            }),
            "--stage-layers applies only with pipeline parallelism (pp > 1)");
  EXPECT_NE(message([](auto& q) { q.pp = 5; }).find("--stage-layers N1,N2,... gives each stage's layers"),
            std::string::npos);
}

// Every parameter on exactly one stage (plus the LM head's copy of a tied embedding on the last),
// each split tp ways but the norms; ZeRO's (2 + 2 + 12)Ψ per device, the optimizer's 12Ψ over dp
// with a distributed optimizer.
TEST(ModelParallelTest, StagesHoldTheirShareAndTheOptimizerShardsOverDataParallel) {
  const DecoderConfig c = gpt(8, 512, 8, 1024);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.dp = 4;
  r.tp = 2;
  r.pp = 2;
  r.global_batch = 8;
  const ModelParallelStep s = model_parallel_step(cache, r);
  const std::uint64_t tied_copy = static_cast<std::uint64_t>(c.vocab / 2 * c.hidden);
  const std::uint64_t total = s.stages[0].parameters + s.stages[1].parameters - tied_copy;
  EXPECT_EQ(total, decoder_parameter_count(shard_decoder(c, 2)));
  for (const PipelineStage& st : s.stages) EXPECT_EQ(st.state_bytes, st.parameters * 16);
  r.stage = ZeroStage::kOptimizer;
  const ModelParallelStep z = model_parallel_step(cache, r);
  for (const PipelineStage& st : z.stages) EXPECT_EQ(st.state_bytes, st.parameters * 4 + st.parameters * 12 / 4);
  EXPECT_GT(z.stages[0].gradient_seconds, 0);
}

TEST(ModelParallelTest, BadLayoutsAreOneClearError) {
  const DecoderConfig c = gpt(12, 768, 12);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("h100-sxm"));
  const auto message = [&](auto change) {
    ModelParallelRequest r = request();
    change(r);
    try {
      model_parallel_step(cache, r);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([](auto& r) { r.tp = 16; }).find("stays inside a node"), std::string::npos);
  EXPECT_NE(message([](auto& r) { r.tp = 8; }).find("does not divide the model's 12 attention heads"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.pp = 5; }).find("does not divide the model's 12 layers"), std::string::npos);
  EXPECT_NE(message([](auto& r) {
              r.dp = 3;
              r.tp = 4;
            }).find("do not fill whole nodes"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) {
              r.dp = 2;
              r.global_batch = 3;
            }).find("not a multiple of dp"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) {
              r.stage = ZeroStage::kParameters;
              r.pp = 2;
            }).find("zero3"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.virtual_stages = 2; }).find("only with pipeline"), std::string::npos);
  EXPECT_NE(message([](auto& r) {
              r.pp = 4;
              r.virtual_stages = 3;
              r.global_batch = 2;
            }).find("multiples of pp"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.pp = 0; }).find("at least 1"), std::string::npos);
  // a global batch or micro-batch that is not a positive integer below 2^31 (0: dp × micro-batch)
  for (const std::int64_t g : {std::int64_t{-1}, std::int64_t{-4}, std::int64_t{1} << 31, std::int64_t{99999999999}}) {
    EXPECT_NE(message([g](auto& r) {
                r.global_batch = g;
              }).find("--global-batch " + std::to_string(g) + " must be a positive integer below 2^31"),
              std::string::npos)
        << g;
  }
  EXPECT_EQ(message([](auto& r) { r.global_batch = 0; }), "no error");
  EXPECT_NE(
      message([](auto& r) { r.micro_batch = std::int64_t{1} << 32; }).find("must be a positive integer below 2^31"),
      std::string::npos);
  // the search's micro-batches to try: each positive, once
  const auto search_error = [&](std::int64_t global, const std::vector<std::int64_t>& micro) {
    ModelParallelRequest r = request();
    r.global_batch = global;
    try {
      search_model_parallel(cache, r, 8, micro);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(search_error(8, {1, 0}).find("--batch 0 (a micro-batch to try) must be a positive integer"),
            std::string::npos);
  EXPECT_NE(search_error(8, {-1}).find("--batch -1"), std::string::npos);
  EXPECT_EQ(search_error(8, {1, 1, 2}), "--batch 1 is given twice");
  EXPECT_NE(search_error(-8, {1}).find("--global-batch -8 must be a positive integer"), std::string::npos);
  EXPECT_NE(search_error(0, {1}).find("--search needs --global-batch"), std::string::npos);
}

// Expert parallelism splits each MoE layer's experts over ep of the dp replicas: a device holds
// dense/tp + experts/(tp·ep) parameters (Mixtral: 3·8·4096·14336 expert elements a layer), runs
// the same FLOPs (its experts take as many rows as its own tokens make), pays four all-to-alls a
// MoE layer, inside a node when tp·ep fits one and across nodes otherwise, and needs no expert
// gradient reduction when each expert is on one replica.
TEST(ModelParallelTest, ExpertParallelismSplitsTheExpertsAndAddsAllToAlls) {
  ShardCostCache cache(decoder_preset("mixtral-8x7b"), HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.dp = 8;
  r.tp = 8;
  r.global_batch = 16;
  const ModelParallelStep plain = model_parallel_step(cache, r);
  r.ep = 8;
  const ModelParallelStep split = model_parallel_step(cache, r);
  const std::uint64_t experts = 32ULL * 3 * 8 * 4096 * 14336 / 8;  // every layer's, over tp
  ASSERT_EQ(plain.stages.size(), 1u);
  EXPECT_EQ(split.stages[0].parameters, plain.stages[0].parameters - experts + experts / 8);
  EXPECT_DOUBLE_EQ(split.stages[0].flops, plain.stages[0].flops);
  EXPECT_DOUBLE_EQ(split.model_flops, plain.model_flops);
  EXPECT_EQ(plain.stages[0].expert_seconds, 0);
  EXPECT_GT(split.stages[0].expert_seconds, 0);
  EXPECT_LT(split.memory_upper_bytes(), plain.memory_upper_bytes());
  EXPECT_EQ(split.layout(), "dp=8,tp=8,pp=1,ep=8,b=1,m=2,ddp");
  const auto says = [](const ModelParallelStep& s, const std::string& what) {
    for (const std::string& a : s.approximations) {
      if (a.find("expert parallelism") != std::string::npos && a.find(what) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(says(split, "across nodes"));
  EXPECT_TRUE(says(split, "need no reduction"));
  // the same eight experts over eight devices of one node (tp 1): NVLink instead of InfiniBand
  r.tp = 1;
  const ModelParallelStep inside = model_parallel_step(cache, r);
  // 8× the bytes a device (1/tp of the tokens with tp = 8), at NVLink's pace per byte
  EXPECT_LT(inside.stages[0].expert_seconds / 8, split.stages[0].expert_seconds);
  EXPECT_TRUE(says(inside, "inside a node"));
  // a dense model has no experts to split
  ShardCostCache dense(small_llama(), HardwareDatabase::builtin().get("h100-sxm"));
  r = request();
  r.dp = 2;
  r.ep = 2;
  EXPECT_THROW(model_parallel_step(dense, r), Error);
}

// A measured routing under expert parallelism (issue 26): each device holds experts/ep consecutive
// experts, the step waits for the busiest, so its expert GEMMs take N·Σ n_e/T rows and its
// all-to-alls λ = ep·(its counts)/(all counts) times an average device's bytes. An even histogram
// is uniform routing exactly; one that sends half the routed rows to experts 0 and 1 (device 0 of
// ep 4) gives λ 2 in that layer.
TEST(ModelParallelTest, AMeasuredRoutingLoadsTheBusiestExpertDevice) {
  const DecoderConfig mixtral = decoder_preset("mixtral-8x7b");  // 32 layers, 8 experts, 2 a token
  const auto histogram = [&](const std::vector<std::int64_t>& skewed_layer0, const std::string& name) {
    json layers = json::object();
    for (std::int64_t l = 0; l < mixtral.layers; ++l) {
      layers[std::to_string(l)] = l == 0 ? skewed_layer0 : std::vector<std::int64_t>(8, 25);
    }
    const std::filesystem::path path = std::filesystem::temp_directory_path() / ("neuralcost_mp_routing_" + name);
    std::ofstream(path) << json{{"tokens", 100}, {"layers", layers}}.dump();
    return with_routing(mixtral, path.string());
  };
  const HardwareSpec hw = HardwareDatabase::builtin().get("h100-sxm");
  ShardCostCache uniform(mixtral, hw), even(histogram(std::vector<std::int64_t>(8, 25), "even"), hw),
      skewed(histogram({50, 50, 25, 25, 12, 13, 12, 13}, "skewed"), hw);
  ModelParallelRequest r = request();
  r.dp = 4;
  r.ep = 4;
  r.global_batch = 8;
  const ModelParallelStep u = model_parallel_step(uniform, r), e = model_parallel_step(even, r),
                          k = model_parallel_step(skewed, r);
  ASSERT_EQ(u.stages.size(), 1u);
  EXPECT_NEAR(e.step_seconds, u.step_seconds, u.step_seconds * 1e-9);
  EXPECT_NEAR(e.stages[0].expert_seconds, u.stages[0].expert_seconds, u.stages[0].expert_seconds * 1e-12);
  EXPECT_NEAR(e.stages[0].flops, u.stages[0].flops, u.stages[0].flops * 1e-12);
  // device 0 of layer 0 holds experts 0 and 1: 100 of the 200 routed rows, λ = 4 · 100 / 200 = 2;
  // the other 31 layers stay even: the all-to-alls carry 33 layers' worth instead of 32
  EXPECT_EQ(busiest_expert_device(skewed.config(), 0, 4).device, 0);
  EXPECT_DOUBLE_EQ(busiest_expert_device(skewed.config(), 0, 4).load, 2.0);
  EXPECT_DOUBLE_EQ(busiest_expert_device(skewed.config(), 1, 4).load, 1.0);
  EXPECT_NEAR(k.stages[0].expert_seconds, u.stages[0].expert_seconds * 33 / 32, u.stages[0].expert_seconds * 1e-12);
  // its expert GEMMs run twice the rows in layer 0 (forward and backward): the device does more
  // work than an average device, the model the same
  EXPECT_GT(k.stages[0].flops, u.stages[0].flops);
  EXPECT_DOUBLE_EQ(k.model_flops, u.model_flops);
  // all devices together run what they run under uniform routing: HFU counts the average device
  EXPECT_NEAR(k.hardware_flops, u.hardware_flops, u.hardware_flops * 1e-6);
  EXPECT_GT(k.step_seconds, u.step_seconds);
  bool said = false;
  for (const std::string& a : k.approximations) {
    said = said || (a.find("routing measured") != std::string::npos && a.find("1.00× to 2.00×") != std::string::npos);
  }
  EXPECT_TRUE(said);
  // without expert parallelism the routing still changes the experts' weights read: named too
  ModelParallelRequest no_ep = r;
  no_ep.ep = 1;
  said = false;
  for (const std::string& a : model_parallel_step(skewed, no_ep).approximations) {
    said = said || (a.find("routing measured (") != std::string::npos &&
                    a.find("does not unbalance the devices") != std::string::npos);
  }
  EXPECT_TRUE(said);
  // Memory: device 0 keeps what its experts keep on their rows twice over in layer 0. An average
  // device's rows are its 512 tokens × 2 (one micro-batch of 1 in flight); on them the experts keep
  // the gathered bf16 copy (4,096 wide) and its int64 index, w1's and w3's outputs, the SiLU's and
  // the gate-up product (14,336 wide, bf16): 1,024 × (8,192 + 8 + 4 × 28,672) B. Even routing
  // keeps what uniform routing keeps.
  const std::uint64_t routed = 1024ull * (4096 * 2 + 8 + 4 * 14336 * 2);
  EXPECT_EQ(e.stages[0].activation_bytes, u.stages[0].activation_bytes);
  ASSERT_EQ(u.stages[0].in_flight, 1);
  EXPECT_EQ(k.stages[0].activation_bytes - u.stages[0].activation_bytes, routed);
  EXPECT_EQ(k.stages[0].working_bytes, u.stages[0].working_bytes);
  // with every layer recomputed only the layers' inputs stay in flight; the layer recomputed at
  // the backward pass's peak is the busiest device's
  r.recompute = true;
  const ModelParallelStep ur = model_parallel_step(uniform, r), kr = model_parallel_step(skewed, r);
  EXPECT_EQ(kr.stages[0].activation_bytes, ur.stages[0].activation_bytes);
  EXPECT_EQ(kr.stages[0].working_bytes - ur.stages[0].working_bytes, routed);
}

// Without a measured routing the experts' rows are an average device's: the layer's part names
// what they keep, and a device keeps exactly that.
TEST(ModelParallelTest, TheExpertsRowsAreAPartOfWhatALayerKeeps) {
  const DecoderConfig mixtral = decoder_preset("mixtral-8x7b");
  ShardCostCache cache(mixtral, HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  const ShardCosts& costs = cache.get(1, 1, 512, r.training, DType::kBf16, 1, false);
  const PartCost& layer = costs.layers.at("experts");
  EXPECT_EQ(layer.routed_saved_bytes, 1024ull * (4096 * 2 + 8 + 4 * 14336 * 2));
  EXPECT_LT(layer.routed_saved_bytes, layer.saved_bytes);
  EXPECT_EQ(costs.before.routed_saved_bytes, 0u);
  EXPECT_EQ(costs.after.routed_saved_bytes, 0u);
}

// Sequence parallelism (Korthikanti et al. 2022, equation 5): with the norms and residual adds
// split by tokens, every activation a layer keeps is split over the t devices, so a layer keeps
// exactly 1/t of what it keeps on one device (the tensor split alone leaves the residual stream's
// tensors whole on every device). The model's FLOPs are unchanged; the devices' FLOPs lose the
// norms' copies; each all-reduce becomes a reduce-scatter and an all-gather, which move the same
// bytes on a ring (nccl-tests' bus factors: 2(n−1)/n = (n−1)/n + (n−1)/n).
TEST(ModelParallelTest, SequenceParallelismSplitsEveryKeptActivationOverTheDevices) {
  for (const DecoderConfig& c : {gpt(4, 1024, 16, 8000), small_llama()}) {
    ShardCostCache cache(c, HardwareDatabase::builtin().get("a100-sxm-80gb"));
    ModelParallelRequest r = request("dgx-a100");
    r.micro_batch = 2;
    const ModelParallelStep one = model_parallel_step(cache, r);
    r.tp = 4;
    const ModelParallelStep tensor = model_parallel_step(cache, r);
    r.sequence_parallel = true;
    const ModelParallelStep sequence = model_parallel_step(cache, r);
    const std::uint64_t whole = cache.get(1, 2, 512, r.training, r.dtype).layers.at("dense").saved_bytes;
    const std::uint64_t split = cache.get(4, 2, 512, r.training, r.dtype, 1, true).layers.at("dense").saved_bytes;
    const std::uint64_t tensor_only = cache.get(4, 2, 512, r.training, r.dtype).layers.at("dense").saved_bytes;
    EXPECT_EQ(split * 4, whole) << c.architecture;
    EXPECT_GT(tensor_only * 4, whole) << c.architecture;
    EXPECT_LT(sequence.memory_upper_bytes(), tensor.memory_upper_bytes()) << c.architecture;
    EXPECT_DOUBLE_EQ(sequence.model_flops, one.model_flops) << c.architecture;
    EXPECT_LT(sequence.hardware_flops, tensor.hardware_flops) << c.architecture;
    EXPECT_GT(sequence.hardware_flops, one.hardware_flops * 0.999) << c.architecture;
    EXPECT_LT(sequence.stages[0].forward_seconds, tensor.stages[0].forward_seconds) << c.architecture;
    EXPECT_EQ(sequence.layout(), "dp=1,tp=4,pp=1,sp,b=2,m=1,ddp");
  }
}

TEST(ModelParallelTest, SequenceParallelismIsRefusedWhereItDoesNotApply) {
  const auto refused = [](const DecoderConfig& c, auto change, const std::string& what) {
    ShardCostCache cache(c, HardwareDatabase::builtin().get("h100-sxm"));
    ModelParallelRequest r = request();
    r.sequence_parallel = true;
    change(r);
    try {
      model_parallel_step(cache, r);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(
      small_llama(), [](ModelParallelRequest&) {}, "needs tp > 1");
  refused(
      small_llama(),
      [](ModelParallelRequest& r) {
        r.tp = 4;
        r.tokens = 510;
      },
      "does not divide the 510 tokens");
}

// Sequence parallelism with experts (Megatron-Core requires it for a mixture of experts under
// tp): the router and the weighted sum of the experts' outputs run on 1/tp of the tokens, so the
// MoE layer keeps less and its devices run fewer FLOPs, the model's FLOPs unchanged. With expert
// parallelism the all-to-all dispatcher gathers over tp the k rows of each token a device
// received and reduce-scatters them after the experts: per MoE layer and pass that pair moves
// k · λ times the hidden states in place of the dense MLP's one.
TEST(ModelParallelTest, SequenceParallelismWithExpertsGathersTheRoutedRows) {
  const DecoderConfig mixtral = decoder_preset("mixtral-8x7b");  // 32 layers, 8 experts, 2 a token
  ShardCostCache cache(mixtral, HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.tp = 4;
  const ModelParallelStep tensor = model_parallel_step(cache, r);
  r.sequence_parallel = true;
  const ModelParallelStep sequence = model_parallel_step(cache, r);
  const std::uint64_t split = cache.get(4, 1, 512, r.training, r.dtype, 1, true).layers.at("experts").saved_bytes;
  const std::uint64_t tensor_only = cache.get(4, 1, 512, r.training, r.dtype).layers.at("experts").saved_bytes;
  EXPECT_LT(split, tensor_only);
  // the router's linear (512 tokens × 4,096 × 8 experts) among what runs on 1/4 of the tokens
  const double router = 2.0 * 512 * 4096 * 8;
  const auto forward = [&](bool sp) {
    return cache.get(4, 1, 512, r.training, r.dtype, 1, sp).layers.at("experts").forward_flops;
  };
  EXPECT_GE(forward(false) - forward(true), 0.75 * router);
  EXPECT_LT(sequence.memory_upper_bytes(), tensor.memory_upper_bytes());
  EXPECT_DOUBLE_EQ(sequence.model_flops, tensor.model_flops);
  EXPECT_LT(sequence.hardware_flops, tensor.hardware_flops);
  EXPECT_EQ(sequence.layout(), "dp=1,tp=4,pp=1,sp,b=1,m=1,ddp");
  // ep 2 over dp 2: each MoE layer's gather and scatter carry k = 2 times the hidden states
  r.dp = 2;
  const ModelParallelStep one = model_parallel_step(cache, r);
  r.ep = 2;
  const ModelParallelStep experts = model_parallel_step(cache, r);
  const double act = static_cast<double>(cache.get(4, 1, 512, r.training, r.dtype, 2, true).hidden_bytes);
  std::string basis;
  const auto pair = [&](double bytes) {
    return in_node_cost(r.intra, Collective::kReduceScatter, 4, bytes, 2, basis).seconds() +
           in_node_cost(r.intra, Collective::kAllGather, 4, bytes, 2, basis).seconds();
  };
  ASSERT_EQ(experts.stages.size(), 1u);
  EXPECT_NEAR(experts.stages[0].tensor_seconds - one.stages[0].tensor_seconds, 32 * 2 * (pair(2 * act) - pair(act)),
              one.stages[0].tensor_seconds * 1e-9);
  bool said = false;
  for (const std::string& a : experts.approximations)
    said = said || a.find("all-to-all dispatcher") != std::string::npos;
  EXPECT_TRUE(said);
}

// Megatron's tensor-parallel collectives of one micro-batch, counted by hand for a 4-layer llama
// on one stage: two all-reduces of the hidden states a layer forward (after o_proj and down_proj)
// and two backward (the gradients of the column-parallel q/k/v's and gate/up's inputs), one after
// the vocabulary-parallel embedding (forward), one of the LM head's input gradient (backward: the
// head is column-parallel too), three of b × s fp32 values in the vocabulary-parallel loss; two
// more a layer recomputing. Sequence parallelism: each all-reduce of the hidden states a
// reduce-scatter and an all-gather.
TEST(ModelParallelTest, TensorParallelCollectivesAreMegatronsCountedByHand) {
  ShardCostCache cache(small_llama(), HardwareDatabase::builtin().get("h100-sxm"));
  ModelParallelRequest r = request();
  r.tp = 2;
  const double act = 1.0 * 512 * 1024 * 2, loss = 1.0 * 512 * 4;
  std::string basis;
  const auto reduce = [&](double bytes) {
    return in_node_cost(r.intra, Collective::kAllReduce, 2, bytes, 2, basis).seconds();
  };
  const auto pair = [&](double bytes) {
    return in_node_cost(r.intra, Collective::kReduceScatter, 2, bytes, 2, basis).seconds() +
           in_node_cost(r.intra, Collective::kAllGather, 2, bytes, 2, basis).seconds();
  };
  const ModelParallelStep plain = model_parallel_step(cache, r);
  ASSERT_EQ(plain.stages.size(), 1u);
  EXPECT_EQ(plain.stages[0].tensor_calls, 4 * 4 + 1 + 1 + 3);
  EXPECT_NEAR(plain.stages[0].tensor_seconds, 18 * reduce(act) + 3 * reduce(loss), 1e-15);
  EXPECT_DOUBLE_EQ(plain.tensor_seconds, plain.stages[0].tensor_seconds);  // one micro-batch
  r.recompute = true;
  const ModelParallelStep recomputed = model_parallel_step(cache, r);
  EXPECT_EQ(recomputed.stages[0].tensor_calls, 4 * 6 + 1 + 1 + 3);
  EXPECT_NEAR(recomputed.stages[0].tensor_seconds, 26 * reduce(act) + 3 * reduce(loss), 1e-15);
  r.recompute = false;
  r.sequence_parallel = true;
  const ModelParallelStep sequence = model_parallel_step(cache, r);
  EXPECT_EQ(sequence.stages[0].tensor_calls, 2 * (4 * 4 + 1 + 1) + 3);
  EXPECT_NEAR(sequence.stages[0].tensor_seconds, 18 * pair(act) + 3 * reduce(loss), 1e-15);
  // two stages: the embedding's on the first, the head's and the loss's on the last
  r.sequence_parallel = false;
  r.pp = 2;
  const ModelParallelStep staged = model_parallel_step(cache, r);
  ASSERT_EQ(staged.stages.size(), 2u);
  EXPECT_EQ(staged.stages[0].tensor_calls, 2 * 4 + 1);
  EXPECT_EQ(staged.stages[1].tensor_calls, 2 * 4 + 1 + 3);
  r.pp = 1;
  r.tp = 1;
  EXPECT_EQ(model_parallel_step(cache, r).stages[0].tensor_calls, 0);
}

// The search: every layout it lists divides the devices, the layers and the batch; those that fit
// come first, fastest first; the 175B model on 1,024 A100s has layouts that fit and none with
// tp·pp = 1 (its model states alone are 2.8 TB).
TEST(ModelParallelTest, TheSearchListsLayoutsThatDivideAndRanksThoseThatFit) {
  const DecoderConfig c = gpt(96, 12288, 96);
  ShardCostCache cache(c, HardwareDatabase::builtin().get("a100-sxm-80gb"));
  ModelParallelRequest base = request("dgx-a100");
  base.tokens = 2048;
  base.global_batch = 1536;
  const std::vector<ModelParallelStep> ranked = search_model_parallel(cache, base, 1024, {1, 2, 4, 8});
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked.front().fit(), "fits");
  bool fits_part = true, sequence = false;
  double last = 0;
  for (const ModelParallelStep& s : ranked) {
    const ModelParallelRequest& r = s.request;
    EXPECT_EQ(r.dp * r.tp * r.pp, 1024);
    EXPECT_EQ(c.layers % r.pp, 0);
    EXPECT_EQ(1536 % (r.dp * r.micro_batch), 0);
    if (s.fit() != "fits") fits_part = false;
    if (fits_part) {
      EXPECT_GE(s.step_seconds, last);
      last = s.step_seconds;
    }
    if (r.tp * r.pp == 1) EXPECT_EQ(s.fit(), "does not fit");
    if (r.sequence_parallel) EXPECT_GT(r.tp, 1);
    sequence = sequence || r.sequence_parallel;
  }
  EXPECT_TRUE(sequence);                                                                 // tried where tp > 1
  EXPECT_THROW(search_model_parallel(cache, ModelParallelRequest{}, 1024, {1}), Error);  // no global batch
}

}  // namespace
}  // namespace neuralcost
