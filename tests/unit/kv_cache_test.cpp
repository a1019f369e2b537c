// A quantized KV cache (--kv-cache, issue 25): the bytes per token in its storage type, a decode
// step that writes its keys and values quantized and reads the cache in that type (and nothing
// else changed), the latent cache of DeepSeek-V3 dequantized before kv_b_proj, and serving
// capacity that grows with it.
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"

namespace neuralcost {
namespace {

Analysis decode(const DecoderConfig& c, std::int64_t batch, std::int64_t context) {
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = batch;
  r.context = context;
  return analyze(build_decoder(c, r, "d"), HardwareDatabase::builtin().get("h100-sxm"));
}

TEST(KvCacheTest, AQuantizedCacheStoresAndReadsItsOwnType) {
  const DecoderConfig bf16 = decoder_preset("llama-3-8b");
  EXPECT_EQ(kv_cache_bytes_per_token(with_kv_cache(bf16, "fp8"), DType::kBf16), 65536u);  // 2·32·8·128·1
  EXPECT_EQ(kv_cache_bytes_per_token(with_kv_cache(bf16, "int8"), DType::kBf16), 65536u);
  EXPECT_EQ(kv_cache_bytes_per_token(with_kv_cache(bf16, "fp32"), DType::kBf16), 262144u);
  EXPECT_EQ(kv_cache_bytes_per_token(with_kv_cache(bf16, ""), DType::kBf16), 131072u);
  EXPECT_EQ(kv_cache_bytes(with_kv_cache(bf16, "fp8"), DType::kBf16, 100), 6553600u);
  // a decode step: the cache read (K and V of C + 1 keys, every layer) and the step's write in fp8;
  // the write a quantize (4 operations a value); every contraction the same
  const std::uint64_t b = 2, c = 100, layers = 32, kv = 8, d = 128;
  const Analysis plain = decode(bf16, 2, 100);
  const Analysis fp8 = decode(with_kv_cache(bf16, "fp8"), 2, 100);
  EXPECT_EQ(plain.totals.contraction_flops, fp8.totals.contraction_flops);
  EXPECT_EQ(plain.totals.bytes_read - fp8.totals.bytes_read, layers * 2 * b * kv * (c + 1) * d);
  EXPECT_EQ(plain.totals.bytes_written - fp8.totals.bytes_written, layers * 2 * b * kv * d);
  EXPECT_EQ(fp8.totals.flops - plain.totals.flops, 4 * layers * 2 * b * kv * d);
  EXPECT_LT(fp8.totals.lower_bound_seconds, plain.totals.lower_bound_seconds);
  bool named = false;
  for (const std::string& a : fp8.approximations)
    named = named ||
            a.find("reads the KV cache in fp8 and converts each value to bf16 as it loads it") != std::string::npos;
  EXPECT_TRUE(named);
  // the attention still computes in bf16 (the query's type), not at an fp8 rate, and so does the
  // write's quantize (its divide, round and clamp): fp8 is only what is stored, so a device without
  // an fp8 peak (an A100, as vLLM serves an fp8 cache there) analyses it
  for (const OpRoofline& r : fp8.ops) {
    const OpRecord& op = fp8.graph.op(r.op_index);
    const bool written = op.attributes.get_string("function", "") == "quantize";
    if (op.kind == OpKind::kAttention || written) EXPECT_EQ(r.compute_dtype, DType::kBf16) << op.name;
  }
  DecoderRequest step;
  step.phase = DecoderPhase::kDecode;
  step.context = 100;
  for (const char* stored : {"fp8", "int8"}) {
    EXPECT_NO_THROW(analyze(build_decoder(with_kv_cache(bf16, stored), step, "d"),
                            HardwareDatabase::builtin().get("a100-sxm-80gb")))
        << stored;
  }
  try {
    with_kv_cache(bf16, "fp4");
    ADD_FAILURE() << "fp4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(KvCacheTest, TheLatentCacheIsDequantizedBeforeItsExpansion) {
  const DecoderConfig ds = with_kv_cache(decoder_preset("deepseek-v3"), "fp8");
  EXPECT_EQ(kv_cache_bytes_per_token(ds, DType::kBf16), 35136u);  // 61 x 576 x 1
  const Analysis a = decode(ds, 1, 64);
  bool dequantized = false;
  for (const OpRecord& op : a.graph.ops()) {
    if (op.name == "model.layers.0.self_attn#latent_cache_read") {
      dequantized = op.inputs[0].dtype == DType::kFp8 && op.outputs[0].dtype == DType::kBf16;
    }
  }
  EXPECT_TRUE(dequantized);
  EXPECT_EQ(a.totals.contraction_flops, decode(decoder_preset("deepseek-v3"), 1, 64).totals.contraction_flops);
  // absorbed, the attention reads the fp8 cache as stored (no dequantize op), once
  const Analysis absorbed = decode(with_mla(ds, "absorbed"), 2, 64);
  EXPECT_TRUE(absorbed.complete());
  for (const OpRoofline& r : absorbed.ops) {
    const OpRecord& op = absorbed.graph.op(r.op_index);
    EXPECT_EQ(op.name.find("cache_read"), std::string::npos) << op.name;
    if (op.kind == OpKind::kAttention) {
      EXPECT_EQ(op.inputs[1].dtype, DType::kFp8);
      EXPECT_EQ(r.cost.bytes_read, 2u * 128 * 576 * 2 + 2u * 65 * 576);  // the bf16 query, the cache once
    }
  }
}

TEST(KvCacheTest, ServingFitsTwiceTheTokensInFp8) {
  const DecoderConfig c = decoder_preset("llama-3-8b");
  const std::uint64_t budget = 80ull << 30;
  const ServingCapacity bf16 = serving_capacity(c, DType::kBf16, 8192, 1, budget, 0.1, 1, 16);
  const ServingCapacity fp8 = serving_capacity(with_kv_cache(c, "fp8"), DType::kBf16, 8192, 1, budget, 0.1, 1, 16);
  EXPECT_EQ(fp8.kv_bytes_per_token * 2, bf16.kv_bytes_per_token);
  EXPECT_GE(fp8.sequences, 2 * bf16.sequences);
  EXPECT_LE(fp8.sequences, 2 * bf16.sequences + 1);
}

}  // namespace
}  // namespace neuralcost
