// A measured routing (--routing, issue 25 item 2): a histogram of the tokens each expert took per
// layer replaces uniform routing in the experts' weights a step reads: a uniform histogram gives
// the uniform expectation, a concentrated one exactly the experts it names, layers differ by their
// own counts; every kind of bad file is one clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/analyze_models.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

std::string write(const json& j, const std::string& name) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / ("neuralcost_routing_" + name + ".json");
  std::ofstream(path) << j.dump();
  return path.string();
}

DecoderRequest decode(std::int64_t batch) {
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = batch;
  r.context = 1000;
  return r;
}

Analysis analyze_step(const DecoderConfig& c, const DecoderRequest& r) {
  return analyze(build_decoder(c, r, "d"), HardwareDatabase::builtin().get("h100-sxm"));
}

/// Bytes of expert weights the step reads, and per layer.
std::uint64_t expert_bytes(const Analysis& a) {
  std::uint64_t bytes = 0;
  for (const OpRoofline& op : a.ops) {
    if (a.graph.op(op.op_index).kind == OpKind::kExpertLinear) bytes += op.cost.parameter_bytes;
  }
  return bytes;
}

std::string error_of(const DecoderConfig& c, const json& histogram, const std::string& name) {
  try {
    with_routing(c, write(histogram, name));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << name << ": accepted";
  return "";
}

TEST(RoutingTest, AUniformHistogramGivesTheUniformExpectation) {
  // mixtral: 8 experts, 2 a token; 100 tokens spread evenly, 25 to each expert
  const DecoderConfig plain = decoder_preset("mixtral-8x7b");
  const DecoderConfig uniform =
      with_routing(plain, write({{"tokens", 100}, {"all", json::array({25, 25, 25, 25, 25, 25, 25, 25})}}, "uniform"));
  for (const std::int64_t batch : {1, 3, 16}) {
    EXPECT_NEAR(expected_experts_reached(uniform, static_cast<std::uint64_t>(batch), 5),
                expected_experts_reached(plain, static_cast<std::uint64_t>(batch)), 1e-12);
    const Analysis a = analyze_step(plain, decode(batch)), b = analyze_step(uniform, decode(batch));
    EXPECT_EQ(a.totals.contraction_flops, b.totals.contraction_flops);
    EXPECT_NEAR(static_cast<double>(expert_bytes(a)), static_cast<double>(expert_bytes(b)), 32 * 3.0);
  }
}

TEST(RoutingTest, AConcentratedRoutingReadsOnlyTheExpertsItReaches) {
  // every token to experts 0 and 1: a step of any batch reads those two experts' weights and no others
  const DecoderConfig plain = decoder_preset("mixtral-8x7b");
  const DecoderConfig two =
      with_routing(plain, write({{"tokens", 50}, {"all", json::array({50, 50, 0, 0, 0, 0, 0, 0})}}, "two"));
  const std::uint64_t e = 4096, i = 14336, layers = 32;
  for (const std::int64_t batch : {1, 8, 64}) {
    const Analysis a = analyze_step(two, decode(batch));
    EXPECT_EQ(expert_bytes(a), layers * 2 * 3 * e * i * 2) << batch;  // two experts' gate, up, down in bf16
    EXPECT_EQ(a.totals.contraction_flops, analyze_step(plain, decode(batch)).totals.contraction_flops);
    bool named = false;
    for (const std::string& s : a.approximations)
      named = named || s.find("expectation under the routing of") != std::string::npos;
    EXPECT_TRUE(named);
  }
  // uniform routing reads more at batch 8: 8·(1 − 0.75^8) = 7.20 experts a layer
  EXPECT_GT(expert_bytes(analyze_step(plain, decode(8))), expert_bytes(analyze_step(two, decode(8))) * 3);
}

TEST(RoutingTest, EachLayerReadsByItsOwnCounts) {
  // deepseek-v3: layers 0-2 dense, 3-60 with 256 experts, 8 a token. Layer 3's tokens all go to
  // experts 0-7; every other layer's spread evenly (8 tokens to each of 256 experts, 256 tokens)
  const DecoderConfig plain = decoder_preset("deepseek-v3");
  json layers = json::object();
  std::vector<std::int64_t> even(256, 8), eight(256, 0);
  for (int e = 0; e < 8; ++e) eight[e] = 256;
  for (int l = 3; l < 61; ++l) layers[std::to_string(l)] = l == 3 ? eight : even;
  const DecoderConfig measured =
      with_routing(plain, write({{"tokens", 256}, {"layers", layers}, {"source", "a test"}}, "layers"));
  const std::uint64_t tokens = 4;
  EXPECT_DOUBLE_EQ(expected_experts_reached(measured, tokens, 3), 8.0);
  EXPECT_NEAR(expected_experts_reached(measured, tokens, 4), expected_experts_reached(plain, tokens), 1e-9);
  EXPECT_EQ(expected_experts_reached(measured, tokens, 0), 0.0);  // a dense layer
  // the step's expert bytes: the uniform layers' expectation and layer 3's eight experts
  const Analysis a = analyze_step(measured, decode(4)), u = analyze_step(plain, decode(4));
  const double uniform_layer = static_cast<double>(expert_bytes(u)) / 58;
  const double per_expert = uniform_layer / expected_experts_reached(plain, tokens);  // 3 x 7168 x 2048 as stored
  const double expected = uniform_layer * 57 + 8 * per_expert;
  EXPECT_NEAR(static_cast<double>(expert_bytes(a)), expected, 58 * 3.0);
  // the step's totals (analyze_decoder_step, which extrapolates alike layers) are the whole graph's
  const DecoderStep step = analyze_decoder_step(measured, decode(4), HardwareDatabase::builtin().get("h100-sxm"), "d");
  EXPECT_EQ(step.totals.bytes_read, a.totals.bytes_read);
  // the graph's note says the routing and its spread over the layers
  const auto note_of = [](const Analysis& x) {
    for (const std::string& n : x.graph.notes())
      if (n.find("under the routing of") != std::string::npos) return n;
    return std::string();
  };
  // layer 3 reaches its 8 experts, the others 256·(1 − (1 − 8/256)^4) = 30.53
  EXPECT_NE(note_of(a).find("the mean over the layers, 8.00 to 30.53,"), std::string::npos) << note_of(a);
  // every layer alike: one figure, not a range of two equal ones
  for (int l = 3; l < 61; ++l) layers[std::to_string(l)] = even;
  const DecoderConfig alike =
      with_routing(plain, write({{"tokens", 256}, {"layers", layers}, {"source", "a test"}}, "alike"));
  const std::string said = note_of(analyze_step(alike, decode(4)));
  EXPECT_NE(said.find("the same in every layer, expected under the routing of"), std::string::npos) << said;
  EXPECT_EQ(said.find(" to "), std::string::npos) << said;
}

TEST(RoutingTest, ABadHistogramIsOneClearError) {
  const DecoderConfig mixtral = decoder_preset("mixtral-8x7b");
  const json eight = json::array({25, 25, 25, 25, 25, 25, 25, 25});
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}, {"all", json::array({50, 50, 50, 50})}}, "short")
                .find("must be an array of 8 counts"),
            std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}, {"all", json::array({25, 25, 25, 25, 25, 25, 25, 24})}}, "sum")
                .find("adds up to 199, not 200"),
            std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 10}, {"all", json::array({20, 0, 0, 0, 0, 0, 0, 0})}}, "over")
                .find("from 0 to the 10 tokens"),
            std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"all", eight}}, "tokens").find("field 'tokens'"), std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}}, "neither").find("needs exactly one of 'layers'"), std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}, {"all", eight}, {"bins", 3}}, "unknown").find("unknown field 'bins'"),
            std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}, {"layers", {{"32", eight}}}}, "beyond").find("layer '32' is not"),
            std::string::npos);
  EXPECT_NE(error_of(mixtral, {{"tokens", 100}, {"layers", {{"0", eight}}}}, "missing").find("layer 1 has experts"),
            std::string::npos);
  // deepseek-v3's layer 0 is dense
  json all_layers = json::object();
  for (int l = 0; l < 61; ++l) all_layers[std::to_string(l)] = std::vector<std::int64_t>(256, 1);
  EXPECT_NE(error_of(decoder_preset("deepseek-v3"), {{"tokens", 32}, {"layers", all_layers}}, "dense")
                .find("layer '0' is not a layer with experts"),
            std::string::npos);
  EXPECT_NE(error_of(decoder_preset("llama-3-8b"), {{"tokens", 100}, {"all", eight}}, "dense_model")
                .find("applies to models with experts"),
            std::string::npos);
  // a key given twice (JSON parsers keep the last silently), a layer named twice or not as a
  // plain index, a directory: each one clear error
  const auto raw_error = [&](const std::string& text, const std::string& name) {
    const std::filesystem::path path = std::filesystem::temp_directory_path() / ("neuralcost_routing_" + name);
    std::ofstream(path) << text;
    try {
      with_routing(mixtral, path.string());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << name << ": accepted";
    return std::string();
  };
  const std::string even = "[25,25,25,25,25,25,25,25]";
  EXPECT_THAT(raw_error("{\"tokens\":100,\"all\":[200,0,0,0,0,0,0,0],\"all\":" + even + "}", "dup_all"),
              ::testing::HasSubstr("'all' is given twice"));
  std::string layers;
  for (int l = 0; l < 32; ++l) layers += "\"" + std::to_string(l) + "\":" + even + ",";
  EXPECT_THAT(raw_error("{\"tokens\":100,\"layers\":{" + layers + "\"5\":" + even + "}}", "dup_layer"),
              ::testing::HasSubstr("'layers.5' is given twice"));
  for (const char* alias : {"05", "+5", " 5"}) {
    EXPECT_THAT(raw_error("{\"tokens\":100,\"layers\":{" + layers + "\"" + alias + "\":" + even + "}}", "alias"),
                ::testing::HasSubstr(std::string("layer '") + alias + "' is not a layer with experts"));
  }
  try {
    with_routing(mixtral, std::filesystem::temp_directory_path().string());
    ADD_FAILURE() << "a directory accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("is a directory, not a file"));
  }
  std::ofstream(std::filesystem::temp_directory_path() / "neuralcost_routing_text.json") << "not json";
  try {
    with_routing(mixtral, (std::filesystem::temp_directory_path() / "neuralcost_routing_text.json").string());
    ADD_FAILURE() << "text accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a JSON object"), std::string::npos);
  }
}

TEST(RoutingTest, UnderExpertParallelismTheGraphIsTheBusiestDevices) {
  // mixtral over ep 2: device 0 holds experts 0-3, device 1 experts 4-7. Experts 4 and 5 take 140
  // of the 200 routed rows, 6 and 7 none: device 1 is the busiest, λ = 2 · 140 / 200 = 1.4; its
  // GEMMs run 1.4× an even routing's rows and read the weights of its two experts that are reached,
  // half of what an even routing reads (its four)
  const DecoderConfig mixtral = decoder_preset("mixtral-8x7b");
  DecoderConfig even = with_routing(mixtral, write({{"tokens", 100}, {"all", {25, 25, 25, 25, 25, 25, 25, 25}}}, "e"));
  DecoderConfig skewed = with_routing(mixtral, write({{"tokens", 100}, {"all", {0, 0, 0, 60, 70, 70, 0, 0}}}, "skew"));
  DecoderConfig plain = mixtral;
  for (DecoderConfig* c : {&even, &skewed, &plain}) c->expert_parallel = 2;
  EXPECT_EQ(busiest_expert_device(skewed, 5, 2).device, 1);
  EXPECT_DOUBLE_EQ(busiest_expert_device(skewed, 5, 2).load, 1.4);
  const auto expert_flops = [](const Analysis& a) {
    double f = 0;
    for (const OpRoofline& op : a.ops) {
      if (a.graph.op(op.op_index).kind == OpKind::kExpertLinear) f += static_cast<double>(op.cost.flops);
    }
    return f;
  };
  DecoderRequest prefill;
  prefill.phase = DecoderPhase::kPrefill;
  prefill.prompt = 64;
  const Analysis u = analyze_step(plain, prefill), e = analyze_step(even, prefill), k = analyze_step(skewed, prefill);
  EXPECT_DOUBLE_EQ(expert_flops(e), expert_flops(u));  // an even histogram is uniform routing
  EXPECT_EQ(expert_bytes(e), expert_bytes(u));
  EXPECT_NEAR(expert_flops(k), 1.4 * expert_flops(u), expert_flops(u) * 1e-6);
  // 128 tokens of the two devices reach all four of an even device's experts (1 − 0.75^128 each)
  // and exactly experts 4 and 5 of the skewed one
  EXPECT_NEAR(static_cast<double>(expert_bytes(k)), 0.5 * static_cast<double>(expert_bytes(u)),
              static_cast<double>(expert_bytes(u)) * 1e-9);
  for (const OpRoofline& op : k.ops) {
    const OpRecord& r = k.graph.op(op.op_index);
    if (r.kind != OpKind::kExpertLinear) continue;
    EXPECT_NE(r.attributes.get_string("approximation", "").find("the busiest of 2 expert-parallel devices"),
              std::string::npos);
    EXPECT_NE(r.attributes.get_string("approximation", "").find("1.40×"), std::string::npos);
    break;
  }
  // the SiLU and gate · up between its GEMMs run on the same 1.4× rows (their FLOPs and bytes); the
  // weighted sum after the combine is back on the device's own tokens
  const auto of = [](const Analysis& a, const std::string& name) {
    for (const OpRoofline& op : a.ops) {
      if (a.graph.op(op.op_index).name == name) return std::make_pair(op.cost, a.graph.op(op.op_index));
    }
    ADD_FAILURE() << name;
    return std::make_pair(OpCost{}, OpRecord{});
  };
  for (const std::string op : {".experts.act_fn", ".experts#gate_up", "#weighted"}) {
    const std::string name = "model.layers.0.block_sparse_moe" + op;
    const auto [uc, ur] = of(u, name);
    const auto [ec, er] = of(e, name);
    const auto [kc, kr] = of(k, name);
    const double load = op == "#weighted" ? 1.0 : 1.4;
    ASSERT_GT(uc.flops, 0u) << name;
    EXPECT_EQ(ec.flops, uc.flops) << name;
    EXPECT_EQ(ec.bytes(), uc.bytes()) << name;
    EXPECT_NEAR(static_cast<double>(kc.flops), load * static_cast<double>(uc.flops), 1) << name;
    EXPECT_NEAR(static_cast<double>(kc.bytes()), load * static_cast<double>(uc.bytes()), 1) << name;
    EXPECT_EQ(kr.attributes.has("rows_load"), load != 1) << name;
    if (load != 1) EXPECT_NE(kr.attributes.get_string("approximation", "").find("1.40×"), std::string::npos);
  }
  // and so do their gradients in a training step
  const Analysis ut = analyze(training_step(build_decoder(plain, prefill, "u"), TrainingOptions{}),
                              HardwareDatabase::builtin().get("h100-sxm")),
                 kt = analyze(training_step(build_decoder(skewed, prefill, "k"), TrainingOptions{}),
                              HardwareDatabase::builtin().get("h100-sxm"));
  const std::string grad = "model.layers.0.block_sparse_moe.experts.act_fn/grad:";
  double ug = 0, kg = 0;
  for (const OpRoofline& op : ut.ops) ug += ut.graph.op(op.op_index).name.rfind(grad, 0) == 0 ? op.cost.flops : 0;
  for (const OpRoofline& op : kt.ops) kg += kt.graph.op(op.op_index).name.rfind(grad, 0) == 0 ? op.cost.flops : 0;
  ASSERT_GT(ug, 0);
  EXPECT_NEAR(kg, 1.4 * ug, 1);
}

}  // namespace
}  // namespace neuralcost
