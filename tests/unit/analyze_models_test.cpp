// The analyze pipeline (analyze_models.hpp): the same analyses as importing and analysing each
// model by hand, a training step with its ledger and budget search, and its refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "neuralcost/analyze_models.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/decoder_overview.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/report/cost.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;
using testing::op;
using testing::t;

const HardwareSpec& h100() {
  static const HardwareSpec spec = *HardwareDatabase::builtin().find("h100-sxm");
  return spec;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

AnalyzeRequest request_of(const std::vector<std::string>& models, std::int64_t batch) {
  AnalyzeRequest r;
  r.models = model_requests(ModelRequest{}, models, {batch});
  r.hardware = h100();
  return r;
}

TEST(AnalyzeModelsTest, EachModelIsAnalysedAsImportingAndAnalysingItByHandWould) {
  const AnalyzeResults got = analyze_models(request_of({"ff", "cnn"}, 8));
  ASSERT_EQ(got.analyses.size(), 2u);
  EXPECT_TRUE(got.reports.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    ModelRequest m;
    m.model = i == 0 ? "ff" : "cnn";
    m.batch = 8;
    m.given.insert("batch");
    const Analysis by_hand = analyze(importer_for(m).import(m), h100());
    EXPECT_EQ(got.analyses[i].model, by_hand.model);
    EXPECT_EQ(got.analyses[i].batch, 8);
    EXPECT_EQ(got.analyses[i].totals.flops, by_hand.totals.flops);
    EXPECT_EQ(got.analyses[i].totals.bytes_read, by_hand.totals.bytes_read);
    EXPECT_DOUBLE_EQ(got.analyses[i].totals.lower_bound_seconds, by_hand.totals.lower_bound_seconds);
  }
}

TEST(AnalyzeModelsTest, ATrainingStepHasItsLedgerAndTheLargestBatchThatFitsTheBudget) {
  AnalyzeRequest r = request_of({"ff"}, 32);
  r.train = TrainingOptions{};
  const AnalyzeResults plain = analyze_models(r);
  ASSERT_EQ(plain.reports.size(), 1u);
  EXPECT_FALSE(plain.reports[0].fit.has_value());
  EXPECT_EQ(plain.analyses[0].totals.flops, plain.reports[0].step.totals.flops);
  // a step does the forward work and about twice more
  EXPECT_GT(plain.analyses[0].totals.flops, 2 * analyze_models(request_of({"ff"}, 32)).analyses[0].totals.flops);
  // a budget of four times the step at batch 32 holds a larger batch, and the step at it fits
  const std::uint64_t at_32 = plain.reports[0].memory.total_bytes(MemoryBound::kUpper);
  r.memory_budget = 4 * at_32;
  r.reserve = 0;
  const AnalyzeResults fitted = analyze_models(r);
  ASSERT_TRUE(fitted.reports[0].fit.has_value());
  EXPECT_GT(fitted.reports[0].fit->batch, 32);
  EXPECT_LE(fitted.reports[0].fit->needed_bytes, 4 * at_32);
}

TEST(AnalyzeModelsTest, ABudgetWithoutTrainingAndAContradictingDtypeAreRefused) {
  AnalyzeRequest r = request_of({"ff"}, 1);
  r.memory_budget = 1u << 30;
  EXPECT_EQ(error_of([&] { analyze_models(r); }), "--memory-budget applies only with --train");
  EXPECT_EQ(training_model_dtype(Precision::kFp32, DType::kFp16, true), DType::kFp16);
  EXPECT_EQ(training_model_dtype(Precision::kBf16Mixed, DType::kFp32, false), DType::kBf16);
  EXPECT_EQ(training_model_dtype(Precision::kFp16Mixed, DType::kFp16, true), DType::kFp16);
  EXPECT_EQ(error_of([] { training_model_dtype(Precision::kBf16Mixed, DType::kFp32, true); }),
            "--dtype fp32 contradicts --precision bf16-mixed (which computes in bf16)");
  // fp32 training computes in fp32 unless a dtype is asked for (a decoder's own default is bf16)
  EXPECT_EQ(training_model_dtype(Precision::kFp32, DType::kBf16, false), DType::kFp32);
  EXPECT_EQ(training_model_dtype(Precision::kFp32, DType::kBf16, true), DType::kBf16);
}

// A decoder LLM trains in bf16-mixed unless told otherwise; anything else, or a mix, in fp32.
TEST(AnalyzeModelsTest, TheDefaultTrainingPrecisionIsADecodersBf16Mixed) {
  EXPECT_EQ(default_training_precision({"llama-3-8b"}), Precision::kBf16Mixed);
  EXPECT_EQ(default_training_precision({"llama-3-8b", "mixtral-8x7b"}), Precision::kBf16Mixed);
  EXPECT_EQ(default_training_precision({"cnn"}), Precision::kFp32);
  EXPECT_EQ(default_training_precision({"llama-3-8b", "cnn"}), Precision::kFp32);
  EXPECT_EQ(default_training_precision({}), Precision::kFp32);
}

TEST(AnalyzeModelsTest, AModelMostlyUnmodeledIsNotAResult) {
  OpGraph g("mystery");
  g.add(op("fc", OpKind::kLinear, {t("x", {4, 8})}, {t("y", {4, 8})}, {testing::p("w", {8, 8})}));
  OpRecord unknown = op("odd", OpKind::kUnknown, {t("y", {4, 8})}, {t("z", {4, 8})});
  unknown.source_type = "FancyOp";
  g.add(unknown);
  g.finalize();
  const Analysis half = analyze(g, h100());
  ASSERT_TRUE(half.mostly_unmodeled());
  EXPECT_THAT(error_of([&] { refuse_mostly_unmodeled({half}); }),
              HasSubstr("mystery: 1 of 2 ops are not modeled, so its totals mean nothing"));
  EXPECT_EQ(error_of([] { refuse_mostly_unmodeled({analyze_models(request_of({"ff"}, 1)).analyses}); }), "no error");
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(SpeculativeTest, TokensPerRoundAreTheGeometricSeriesOfAcceptance) {
  EXPECT_NEAR(expected_tokens_per_round(4, 0.7), (1 - std::pow(0.7, 5)) / 0.3, 1e-12);  // 2.7731
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(4, 0), 1.0);                               // only the target's own token
  EXPECT_DOUBLE_EQ(expected_tokens_per_round(4, 1), 5.0);  // every drafted token and its own
  EXPECT_NEAR(expected_tokens_per_round(1, 0.5), 1.5, 1e-12);
  EXPECT_EQ(error_of([] { expected_tokens_per_round(0, 0.5); }), "--draft-tokens 0 must be from 1 to 64");
  EXPECT_EQ(error_of([] { expected_tokens_per_round(4, 1.5); }), "--acceptance 1.5 must be from 0 to 1");
}

TEST(SpeculativeTest, ARoundIsTheDraftsStepsAndOneVerifyStepOfTheTarget) {
  SpeculativeRequest r;
  r.target = "llama-3-70b";
  r.draft = "llama-3-8b";
  r.batch = 2;
  r.context = 100;
  r.draft_tokens = 3;
  r.acceptance = 0.6;
  r.hardware = h100();
  const SpeculativeEstimate e = analyze_speculative(r);
  ASSERT_EQ(e.draft_steps.size(), 3u);
  // the verify step computes 4 tokens per sequence where the target's step computes 1: every
  // projection and the LM head 4 times (logits for each), attention over 100 + i + 1 keys for
  // the i-th new token (causal among the new ones) instead of 101
  const std::uint64_t e_ = 8192, h = 64, kv = 8, d = 128, i = 28672, v = 128256, layers = 80, b = 2;
  const std::uint64_t projections = 2 * (e_ * h * d + 2 * e_ * kv * d + h * d * e_ + 3 * e_ * i);
  const auto attention = [&](std::uint64_t pairs) { return 2 * 2 * b * h * pairs * d; };
  const std::uint64_t rotary_1 = 2 * (d / 2), rotary_4 = 2 * (d / 2) * 4;
  EXPECT_EQ(e.target_step.totals.contraction_flops,
            layers * (b * projections + attention(101)) + rotary_1 + 2 * b * e_ * v);
  EXPECT_EQ(e.verify_step.totals.contraction_flops,
            layers * (4 * b * projections + attention(101 + 102 + 103 + 104)) + rotary_4 + 2 * 4 * b * e_ * v);
  // the draft's steps grow with the context
  EXPECT_LT(e.draft_steps[0].totals.flops, e.draft_steps[2].totals.flops);
  // the figures follow from the steps
  double round = e.verify_step.totals.fused_lower_bound_seconds;
  for (const Analysis& a : e.draft_steps) round += a.totals.fused_lower_bound_seconds;
  EXPECT_DOUBLE_EQ(e.round_seconds, round);
  EXPECT_DOUBLE_EQ(e.expected_tokens, expected_tokens_per_round(3, 0.6));
  EXPECT_DOUBLE_EQ(e.seconds_per_token, round / e.expected_tokens);
  EXPECT_DOUBLE_EQ(e.speedup, e.target_step.totals.fused_lower_bound_seconds / e.seconds_per_token);
  // at the break-even acceptance the speedup is 1
  ASSERT_TRUE(e.break_even_acceptance);
  EXPECT_NEAR(e.target_step.totals.fused_lower_bound_seconds * expected_tokens_per_round(3, *e.break_even_acceptance) /
                  e.round_seconds,
              1.0, 1e-9);
  // a draft as large as the target never pays
  r.draft = "llama-3-70b";
  EXPECT_FALSE(analyze_speculative(r).break_even_acceptance);
  r.draft = "mistral-7b";
  EXPECT_THAT(error_of([&] { analyze_speculative(r); }), HasSubstr("a draft must share the target's tokenizer"));
  r.draft = "ff";
  EXPECT_EQ(error_of([&] { analyze_speculative(r); }),
            "--draft 'ff' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

/// The decode steps of a generation analysed one by one: what analyze_generation must equal.
StepSums brute_force(const DecoderConfig& c, const GenerationRequest& g) {
  StepSums s;
  for (std::int64_t ctx = g.prompt; ctx <= g.prompt + g.generate - 2; ++ctx) {
    DecoderRequest r;
    r.phase = DecoderPhase::kDecode;
    r.batch = g.batch;
    r.context = ctx;
    const Analysis a = analyze(build_decoder(c, r, "d"), g.hardware);
    s.flops += a.totals.flops;
    s.contraction_flops += a.totals.contraction_flops;
    s.bytes_read += a.totals.bytes_read;
    s.bytes_written += a.totals.bytes_written;
    s.lower_bound_seconds += a.totals.lower_bound_seconds;
    s.fused_lower_bound_seconds += a.totals.fused_lower_bound_seconds;
  }
  return s;
}

void expect_same(const StepSums& got, const StepSums& want) {
  EXPECT_EQ(got.flops, want.flops);
  EXPECT_EQ(got.contraction_flops, want.contraction_flops);
  EXPECT_EQ(got.bytes_read, want.bytes_read);
  EXPECT_EQ(got.bytes_written, want.bytes_written);
  EXPECT_NEAR(got.lower_bound_seconds, want.lower_bound_seconds, 1e-9 * want.lower_bound_seconds);
  EXPECT_NEAR(got.fused_lower_bound_seconds, want.fused_lower_bound_seconds, 1e-9 * want.fused_lower_bound_seconds);
}

GenerationRequest generation_of(const std::string& model, std::int64_t batch, std::int64_t prompt,
                                std::int64_t generate) {
  GenerationRequest g;
  g.model = model;
  g.batch = batch;
  g.prompt = prompt;
  g.generate = generate;
  g.hardware = h100();
  return g;
}

TEST(GenerationTest, TheDecodeStepsSumAsAnalysingEachWould) {
  GenerationRequest g = generation_of("llama-3-8b", 2, 100, 60);
  const GenerationEstimate e = analyze_generation(g);
  EXPECT_EQ(e.decode_steps, 59);
  expect_same(e.decode, brute_force(decoder_preset("llama-3-8b"), g));
  EXPECT_LT(e.analysed_steps, 10u);  // DRAM-bound throughout: one interval
  EXPECT_DOUBLE_EQ(e.seconds(), e.prefill.fused_lower_bound_seconds + e.decode.fused_lower_bound_seconds);
  EXPECT_LT(e.first_step.flops, e.last_step.flops);  // the context grows
  // one token: the prefill alone
  g.generate = 1;
  const GenerationEstimate one = analyze_generation(g);
  EXPECT_EQ(one.decode_steps, 0);
  EXPECT_DOUBLE_EQ(one.seconds(), one.prefill.fused_lower_bound_seconds);
}

TEST(GenerationTest, StepsWhoseMemoryLevelChangesAreSplitAndStillExact) {
  // a tiny decoder on a device with cache levels the KV cache outgrows as the context grows
  const std::string path = (std::filesystem::temp_directory_path() / "neuralcost_generation_test.json").string();
  // four layers: each step is analysed from graphs of one and two layers (analyze_decoder_step),
  // brute_force from the whole graph
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 500, "max_position_embeddings": 4096})";
  HardwareSpec hw = h100();
  hw.caches = {{"L1", 64e3, 20e12}, {"L2", 1e6, 8e12}};
  GenerationRequest g;
  g.model = path;
  g.batch = 4;
  g.prompt = 8;
  g.generate = 1500;
  g.hardware = hw;
  const GenerationEstimate e = analyze_generation(g);
  const DecoderConfig c = parse_decoder_config(nlohmann::json::parse(std::ifstream(path)), path);
  expect_same(e.decode, brute_force(c, g));
  EXPECT_GT(e.analysed_steps, 3u);     // split where levels change
  EXPECT_LT(e.analysed_steps, 1499u);  // and not every step
}

TEST(GenerationTest, ADecoderStepFromTwoLayersEqualsTheWholeGraph) {
  HardwareSpec cached = h100();
  cached.caches = {{"L1", 64e3, 20e12}, {"L2", 50e6, 8e12}};  // a small model's weights fit the L2
  for (const char* model : {"llama-3-8b", "mixtral-8x7b", "qwen1.5-moe-a2.7b", "gemma-2b", "phi-3-mini-4k", "gpt2",
                            "pythia-160m", "mistral-7b"}) {
    const DecoderConfig c = decoder_preset(model);
    for (const HardwareSpec& hw : {h100(), cached}) {
      for (const auto& [phase, batch, length] : std::vector<std::tuple<DecoderPhase, std::int64_t, std::int64_t>>{
               {DecoderPhase::kPrefill, 1, 64}, {DecoderPhase::kDecode, 4, 900}, {DecoderPhase::kDecode, 64, 5000}}) {
        DecoderRequest r;
        r.phase = phase;
        r.batch = batch;
        r.prompt = r.context = std::min<std::int64_t>(length, c.max_positions - 2);
        const Analysis whole = analyze(build_decoder(c, r, "d"), hw);
        const DecoderStep step = analyze_decoder_step(c, r, hw, "d");
        const ModelTotals &w = whole.totals, &t = step.totals;
        const std::string at =
            fmt::format("{} {} batch {} length {}", model, hw.caches.empty() ? "h100" : "cached", batch, r.context);
        EXPECT_EQ(t.flops, w.flops) << at;
        EXPECT_EQ(t.contraction_flops, w.contraction_flops) << at;
        EXPECT_EQ(t.bytes_read, w.bytes_read) << at;
        EXPECT_EQ(t.bytes_written, w.bytes_written) << at;
        EXPECT_EQ(t.fused_bytes_read, w.fused_bytes_read) << at;
        EXPECT_EQ(t.fused_bytes_written, w.fused_bytes_written) << at;
        EXPECT_EQ(t.parameter_count, w.parameter_count) << at;
        EXPECT_EQ(t.bound, w.bound) << at;
        EXPECT_NEAR(t.lower_bound_seconds, w.lower_bound_seconds, 1e-9 * w.lower_bound_seconds) << at;
        EXPECT_NEAR(t.fused_lower_bound_seconds, w.fused_lower_bound_seconds, 1e-9 * w.fused_lower_bound_seconds) << at;
        EXPECT_NEAR(t.dram_lower_bound_seconds, w.dram_lower_bound_seconds, 1e-9 * w.dram_lower_bound_seconds) << at;
      }
    }
  }
}

TEST(GenerationTest, TokensArePricedAtTheirPhasesBounds) {
  GenerationRequest g = generation_of("llama-3-8b", 4, 256, 33);
  const GenerationEstimate e = analyze_generation(g);
  const TokenCost c = generation_token_cost(e, 3.6);  // 0.001 per second
  EXPECT_DOUBLE_EQ(c.per_million_prompt_tokens, 0.001 * e.prefill.fused_lower_bound_seconds / (4 * 256) * 1e6);
  ASSERT_TRUE(c.per_million_generated_tokens);
  EXPECT_DOUBLE_EQ(*c.per_million_generated_tokens, 0.001 * e.decode.fused_lower_bound_seconds / (4 * 32) * 1e6);
  g.generate = 1;
  EXPECT_FALSE(generation_token_cost(analyze_generation(g), 3.6).per_million_generated_tokens);
  EXPECT_THROW(generation_token_cost(e, -1), Error);
}

TEST(GenerationTest, BadGenerationsAreOneClearError) {
  GenerationRequest g;
  g.model = "llama-3-8b";
  g.hardware = h100();
  g.generate = 0;
  EXPECT_EQ(error_of([&] { analyze_generation(g); }), "--generate 0 must be a positive integer below 2^31");
  g.generate = 8000;
  g.prompt = 512;
  EXPECT_EQ(
      error_of([&] { analyze_generation(g); }),
      "a prompt of 512 and 8000 generated tokens are beyond the model's 8192 positions (max_position_embeddings)");
  g.model = "ff";
  g.generate = 4;
  EXPECT_EQ(error_of([&] { analyze_generation(g); }),
            "--phase generate: the model 'ff' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
}

DecoderOverviewRequest overview_of(const std::string& model, std::int64_t context) {
  DecoderOverviewRequest r;
  r.model = model;
  r.context = context;
  r.prompt = 256;
  r.hardware = h100();
  return r;
}

/// Whether the whole graph of a decode step (not the one-and-two-layer shortcut) is compute-bound.
bool whole_graph_compute_bound(const std::string& model, std::int64_t context, std::int64_t batch) {
  DecoderRequest d;
  d.phase = DecoderPhase::kDecode;
  d.batch = batch;
  d.context = context;
  return analyze(build_decoder(decoder_preset(model), d, model), h100()).totals.bound == Bound::kCompute;
}

TEST(DecoderOverviewTest, EachBatchIsTheStepAnalyzePrintsWithItsTokensPerSecond) {
  DecoderOverviewRequest r = overview_of("llama-3-8b", 1024);
  r.batches = {1, 8, 64};
  const DecoderOverview o = analyze_decoder_overview(r);
  ASSERT_EQ(o.decode.size(), 3u);
  ASSERT_EQ(o.prefill.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    DecoderRequest d;
    d.phase = DecoderPhase::kDecode;
    d.batch = r.batches[i];
    d.context = 1024;
    const Analysis whole = analyze(build_decoder(decoder_preset("llama-3-8b"), d, "x"), h100());
    EXPECT_EQ(o.decode[i].totals.flops, whole.totals.flops);
    EXPECT_EQ(o.decode[i].totals.fused_bytes_read, whole.totals.fused_bytes_read);
    EXPECT_NEAR(o.decode[i].seconds(), whole.totals.fused_lower_bound_seconds, 1e-12);
    EXPECT_DOUBLE_EQ(o.decode[i].tokens_per_second, static_cast<double>(r.batches[i]) / o.decode[i].seconds());
    EXPECT_DOUBLE_EQ(o.prefill[i].tokens_per_second,
                     256.0 * static_cast<double>(r.batches[i]) / o.prefill[i].seconds());
  }
  EXPECT_EQ(o.parameters, 8030261248u);
  EXPECT_EQ(o.kv_bytes_per_token, 131072u);  // bf16
  EXPECT_EQ(o.weight_bytes, 2 * 8030261248u);
  EXPECT_EQ(o.capacity_bytes, h100().memory_capacity_bytes);
  // the default batches: 1, 2, 4, ..., 256
  const DecoderOverview d = analyze_decoder_overview(overview_of("llama-3-8b", 1024));
  EXPECT_EQ(d.request.batches, (std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
}

TEST(DecoderOverviewTest, DecodeTurnsComputeBoundAtTheBatchTheWholeGraphSays) {
  // a short context: the weights' GEMMs outgrow the cache's reads as the batch grows
  const DecoderOverview o = analyze_decoder_overview(overview_of("llama-3-8b", 128));
  ASSERT_TRUE(o.compute_bound_batch.has_value());
  const std::int64_t n = *o.compute_bound_batch;
  EXPECT_GT(n, 1);
  EXPECT_TRUE(whole_graph_compute_bound("llama-3-8b", 128, n));
  EXPECT_FALSE(whole_graph_compute_bound("llama-3-8b", 128, n - 1));
  // at 4,096 tokens, each sequence's cache reads (512 MiB at 3.35 TB/s: 160 us) outweigh its share of the
  // GEMMs (16 GFLOP at 989 TFLOP/s: 16 us) at every batch: it never turns
  const DecoderOverview long_context = analyze_decoder_overview(overview_of("llama-3-8b", 4096));
  EXPECT_FALSE(long_context.compute_bound_batch.has_value());
  EXPECT_FALSE(whole_graph_compute_bound("llama-3-8b", 4096, 4096));
}

TEST(DecoderOverviewTest, MemoryIsTheWeightsAndTheCacheItKeeps) {
  DecoderOverviewRequest r = overview_of("mistral-7b", 1024);  // sliding window 4096
  r.batches = {1, 4, 16};
  const DecoderOverview o = analyze_decoder_overview(r);
  EXPECT_EQ(o.memory_batches, (std::vector<std::int64_t>{1, 4, 16}));
  ASSERT_FALSE(o.memory.empty());
  bool windowed = false;
  for (const DecoderMemoryPoint& p : o.memory) {
    EXPECT_EQ(p.weight_bytes, o.weight_bytes);
    const std::int64_t held = std::min<std::int64_t>(p.context, 4096);
    EXPECT_EQ(p.kv_bytes, o.kv_bytes_per_token * static_cast<std::uint64_t>(held * p.batch));
    windowed = windowed || p.context > 4096;
  }
  EXPECT_TRUE(windowed);
  EXPECT_EQ(o.memory.back().context, o.max_positions);
}

TEST(DecoderOverviewTest, BadRequestsAreOneClearError) {
  DecoderOverviewRequest r = overview_of("llama-3-8b", 1024);
  r.batches = {0};
  EXPECT_EQ(error_of([&] { analyze_decoder_overview(r); }), "--batch 0 must be from 1 to 65536");
  r.batches = {};
  r.context = 8192;
  EXPECT_EQ(error_of([&] { analyze_decoder_overview(r); }),
            "--context 8192 and the step's new token are beyond the model's 8192 positions (max_position_embeddings)");
  r.context = 1024;
  r.prompt = 0;
  EXPECT_EQ(error_of([&] { analyze_decoder_overview(r); }), "--prompt must be at least 1 (got 0)");
  r.prompt = 512;
  r.model = "cnn";
  EXPECT_EQ(error_of([&] { analyze_decoder_overview(r); }),
            "--format html: the model 'cnn' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
}

}  // namespace
}  // namespace neuralcost
