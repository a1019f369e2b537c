// Tensor parallelism of a decoder: the shard's dimensions and parameters, the collectives per
// step, and the step over a node's link.
#include "neuralcost/parallel/tensor_parallel.hpp"

#include <algorithm>

#include "neuralcost/parallel/serving_choice.hpp"

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost {
namespace {

TEST(TensorParallelTest, EightWayLlama3HoldsAnEighthOfEverythingButTheNorms) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  std::vector<std::string> notes;
  const DecoderConfig d = shard_decoder(full, 8, &notes);
  EXPECT_EQ(d.heads, 4);
  EXPECT_EQ(d.kv_heads, 1);
  EXPECT_EQ(d.intermediate, 14336 / 8);
  EXPECT_EQ(d.vocab, 128256 / 8);
  EXPECT_EQ(d.hidden, full.hidden);
  EXPECT_EQ(d.head_dim, full.head_dim);
  EXPECT_TRUE(notes.empty());
  // every weight split eight ways except the RMSNorms (2 a layer and the final one), replicated
  const std::uint64_t norms = (2 * full.layers + 1) * full.hidden;
  EXPECT_EQ(8 * decoder_parameter_count(d) - decoder_parameter_count(full), 7 * norms);
}

TEST(TensorParallelTest, LayoutsTheHeadsDoNotAllowAreRefused) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  EXPECT_THROW(shard_decoder(full, 3), Error);  // 32 heads
  EXPECT_THROW(shard_decoder(full, 0), Error);
  // 8 KV heads over 16 devices: each keeps one, replicated twice
  std::vector<std::string> notes;
  DecoderConfig wide = full;
  wide.heads = 64;
  wide.intermediate = 16384;
  const DecoderConfig d = shard_decoder(wide, 16, &notes);
  EXPECT_EQ(d.kv_heads, 1);
  ASSERT_EQ(notes.size(), 1u);  // the KV heads (the vocabulary, 128256 = 16 × 8016, needs no padding)
  EXPECT_EQ(d.vocab, 8016);
  DecoderConfig odd = full;
  odd.vocab = 32001;
  notes.clear();
  EXPECT_EQ(shard_decoder(odd, 8, &notes).vocab, 4001);  // padded to 32008
  EXPECT_EQ(notes.size(), 1u);
}

// One all-reduce after the vocabulary-parallel embedding (each device looks up its rows of the
// vocabulary), two a layer, the logits gathered.
TEST(TensorParallelTest, TwoAllReducesALayerOfTheTokensActivations) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = 4;
  r.context = 1000;
  const auto c = tensor_parallel_collectives(full, r, 8);
  ASSERT_EQ(c.size(), 1 + 2u * 32 + 1);
  EXPECT_EQ(c.front().first, Collective::kAllReduce);
  EXPECT_DOUBLE_EQ(c.front().second, 4.0 * 1 * 4096 * 2);
  EXPECT_EQ(c.back().first, Collective::kAllGather);
  EXPECT_DOUBLE_EQ(c.back().second, 4.0 * 1 * 128256 * 2);
  EXPECT_TRUE(tensor_parallel_collectives(full, r, 1).empty());
}

TEST(TensorParallelTest, ADecodeStepOnEightH100sIsFasterButNotEightTimes) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = 1;
  r.context = 2048;
  const HardwareSpec& h100 = HardwareDatabase::builtin().get("h100-sxm");
  const InterconnectSpec nvlink = find_interconnect("nvlink4-nvswitch");
  const TensorParallelStep s = tensor_parallel_step(full, r, 8, h100, nvlink, 8, "llama-3-8b");
  EXPECT_LT(s.compute_seconds, s.one_device.totals.fused_lower_bound_seconds / 6);  // weights and cache / 8
  EXPECT_GT(s.communication_seconds, 0.0);
  EXPECT_EQ(s.communication.front().calls, 1 + 64);
  EXPECT_EQ(s.communication.front().basis, "model, in-network");
  EXPECT_GT(s.speedup(), 1.0);
  EXPECT_LT(s.speedup(), 8.0);
  EXPECT_NEAR(s.step_seconds, s.compute_seconds + s.communication_seconds, 1e-15);
  EXPECT_THROW(tensor_parallel_step(full, r, 16, h100, nvlink, 8, "llama-3-8b"), Error);
  const TensorParallelStep one = tensor_parallel_step(full, r, 1, h100, nvlink, 8, "llama-3-8b");
  EXPECT_DOUBLE_EQ(one.speedup(), 1.0);
}

TEST(ServingCapacityTest, PagedCacheOfLlama3OnA24GigabyteDevice) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  const ServingCapacity one = serving_capacity(full, DType::kBf16, 4097, 1, 24'000'000'000, 0.1);
  const std::uint64_t weights = decoder_parameter_count(full) * 2;
  EXPECT_EQ(one.weight_bytes, weights);
  EXPECT_EQ(one.kv_bytes_per_token, 2u * 32 * 8 * 128 * 2);  // K and V, 32 layers, 8 KV heads of 128, bf16
  const std::uint64_t blocks = (21'600'000'000 - weights) / (131072 * 16);
  EXPECT_EQ(one.cache_tokens, blocks * 16);
  EXPECT_EQ(one.sequences, blocks / 257);  // 4097 tokens: 257 blocks of 16
  // eight ways: an eighth of the weights but the norms, one KV head a device
  const ServingCapacity eight = serving_capacity(full, DType::kBf16, 4097, 8, 24'000'000'000, 0.1);
  EXPECT_EQ(eight.kv_bytes_per_token, one.kv_bytes_per_token / 8);
  EXPECT_GT(eight.sequences, 8 * one.sequences);
  const ServingCapacity none =
      serving_capacity(decoder_preset("llama-3-70b"), DType::kBf16, 8192, 1, 80'000'000'000, 0.1);
  EXPECT_FALSE(none.weights_fit);
  EXPECT_EQ(none.sequences, 0u);
  EXPECT_EQ(tensor_parallel_degrees(full, 8), (std::vector<int>{1, 2, 4, 8}));
}

// The longest sequence at a concurrency: the cache's blocks shared by that many sequences, whole
// blocks each, never beyond the model's positions.
TEST(ServingCapacityTest, TheLongestSequenceAtAConcurrencyIsItsShareOfTheBlocks) {
  const DecoderConfig full = decoder_preset("llama-3-8b");
  const std::uint64_t weights = decoder_parameter_count(full) * 2;
  const std::uint64_t blocks = (21'600'000'000 - weights) / (131072 * 16);
  for (const std::int64_t batch : {1, 3, 64}) {
    const ServingCapacity c = serving_capacity(full, DType::kBf16, 4097, 1, 24'000'000'000, 0.1, batch);
    EXPECT_EQ(c.concurrency, batch);
    EXPECT_EQ(c.longest_sequence, std::min<std::uint64_t>(blocks / static_cast<std::uint64_t>(batch) * 16, 8192))
        << batch;
    // consistent with the count of sequences: `batch` sequences of the longest length fit
    const ServingCapacity at = serving_capacity(full, DType::kBf16, static_cast<std::int64_t>(c.longest_sequence), 1,
                                                24'000'000'000, 0.1, batch);
    EXPECT_GE(at.sequences, static_cast<std::uint64_t>(batch)) << batch;
  }
  // one sequence is capped by the positions (8192), and more sequences than blocks get none
  EXPECT_EQ(serving_capacity(full, DType::kBf16, 1, 8, 80'000'000'000, 0.1).longest_sequence, 8192u);
  EXPECT_EQ(serving_capacity(full, DType::kBf16, 1, 1, 24'000'000'000, 0.1, 1'000'000).longest_sequence, 0u);
  EXPECT_THROW(serving_capacity(full, DType::kBf16, 16, 1, 24'000'000'000, 0.1, 0), Error);
}

// The cheapest way to decode within a target: every built-in system at every tp; the cheapest is
// the least cost per million tokens among those that fit and meet the target, its cost the price
// of tp devices over the tokens a step makes; an option that misses the target is slower or does
// not fit; without prices nothing is ranked, and an impossible target has no answer.
TEST(ServingChoiceTest, TheCheapestOptionMeetsTheTargetAndCostsLeast) {
  const DecoderConfig c = decoder_preset("llama-3-8b");
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = 8;
  r.context = 2048;
  const auto price = [](const std::string& id) -> std::optional<double> {
    if (id == "h100-sxm") return 4.0;
    if (id == "a100-sxm-80gb") return 2.0;
    return std::nullopt;
  };
  const ServingChoice choice = choose_serving(c, r, 0.05, 0.1, price, "llama-3-8b");
  ASSERT_TRUE(choice.cheapest.has_value());
  const ServingOption& best = choice.options[*choice.cheapest];
  EXPECT_TRUE(best.meets_target && best.fits);
  EXPECT_LE(best.seconds_per_token, 0.05);
  EXPECT_NEAR(*best.cost_per_million_tokens,
              *best.price_per_device_hour * best.tp * best.seconds_per_token / 3600 / 8 * 1e6, 1e-9);
  std::size_t systems = 0;
  for (const ServingOption& o : choice.options) {
    if (o.meets_target && o.cost_per_million_tokens)
      EXPECT_GE(*o.cost_per_million_tokens, *best.cost_per_million_tokens);
    if (!o.meets_target) EXPECT_TRUE(!o.fits || o.seconds_per_token > 0.05) << o.system << " tp=" << o.tp;
    EXPECT_EQ(o.price_per_device_hour.has_value(), o.device == "h100-sxm" || o.device == "a100-sxm-80gb");
    systems += o.tp == 1;
  }
  EXPECT_EQ(systems, builtin_systems().size());  // every system, tp=1 among its degrees
  // devices that meet it without a price are named, not ranked
  EXPECT_FALSE(choice.unpriced_devices.empty());
  // no prices: nothing cheapest; an impossible target: nothing meets it
  EXPECT_FALSE(choose_serving(
                   c, r, 0.05, 0.1, [](const std::string&) { return std::optional<double>(); }, "x")
                   .cheapest.has_value());
  const ServingChoice none = choose_serving(c, r, 1e-9, 0.1, price, "x");
  EXPECT_FALSE(none.cheapest.has_value());
  EXPECT_TRUE(
      std::none_of(none.options.begin(), none.options.end(), [](const ServingOption& o) { return o.meets_target; }));
  EXPECT_THROW(choose_serving(c, r, 0, 0.1, price, "x"), Error);
  r.phase = DecoderPhase::kPrefill;
  EXPECT_THROW(choose_serving(c, r, 0.05, 0.1, price, "x"), Error);
}

}  // namespace
}  // namespace neuralcost
