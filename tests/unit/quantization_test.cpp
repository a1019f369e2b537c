// Quantized weights (issue 25): each format's storage bytes by hand from its layout, the
// dequantization work, a quantized decoder's weights in the graph against the closed form, a
// config's quantization_config, and one clear error per bad format.
#include "neuralcost/core/quantization.hpp"

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

const Shape kSquare = {4096, 4096};  // one of Llama's attention projections
constexpr std::uint64_t kValues = 4096ull * 4096;

std::uint64_t stored(const std::string& spec, const Shape& shape = kSquare) {
  return parse_weight_quantization(spec).bytes(shape);
}

TEST(QuantizationTest, StorageIsTheFormatsLayoutByHand) {
  // AWQ: 4-bit values, per group of 128 inputs an fp16 scale and a 4-bit zero
  const std::uint64_t groups128 = 4096ull * 32;
  EXPECT_EQ(stored("int4"), kValues / 2 + groups128 * 2 + groups128 / 2);
  EXPECT_EQ(stored("int4-sym"), kValues / 2 + groups128 * 2);
  EXPECT_EQ(stored("int4-g64"), kValues / 2 + 2 * groups128 * 2 + groups128);
  EXPECT_EQ(stored("int4-channel"), kValues / 2 + 4096 * 2 + 4096 / 2);
  // GPTQ: zeros always stored, and an int32 g_idx per input
  EXPECT_EQ(stored("gptq-int4"), stored("int4") + 4096 * 4);
  EXPECT_EQ(stored("gptq-int8"), kValues + groups128 * 2 + groups128 + 4096 * 4);
  // LLM.int8-style rows: one fp16 scale per output row
  EXPECT_EQ(stored("int8"), kValues + 4096 * 2);
  EXPECT_EQ(stored("int8-g128-asym"), kValues + groups128 * 3);
  // fp8: an fp32 scale per row, or per 128 x 128 block
  EXPECT_EQ(stored("fp8"), kValues + 4096 * 4);
  EXPECT_EQ(stored("fp8-block128"), kValues + 32 * 32 * 4);
  // microscaling: NVFP4 e4m3 per 16 and one fp32 per tensor; MXFP4 e8m0 per 32
  EXPECT_EQ(stored("nvfp4"), kValues / 2 + kValues / 16 + 4);
  EXPECT_EQ(stored("mxfp4"), kValues / 2 + kValues / 32);
  // bitsandbytes: fp32 absmax per 64 and the 16-entry code table; double quantization: 8-bit
  // absmax, an fp32 per 256 of them, their 256-entry table and an offset
  EXPECT_EQ(stored("nf4"), kValues / 2 + kValues / 64 * 4 + 64);
  EXPECT_EQ(stored("nf4-dq"), kValues / 2 + kValues / 64 + kValues / 64 / 256 * 4 + 1024 + 4 + 64);
  EXPECT_EQ(stored("bnb-fp4"), stored("nf4"));
  // experts: the leading dimension multiplies everything, per-tensor parts included
  EXPECT_EQ(stored("nvfp4", {8, 4096, 4096}), 8 * stored("nvfp4"));
  EXPECT_EQ(stored("gptq-int4", {8, 4096, 4096}), 8 * stored("gptq-int4"));
  // a group that does not divide the row is padded: 100 inputs are 2 groups of 64
  EXPECT_EQ(stored("int4-g64", {3, 100}), 150 + 6 * 2 + 3);
  EXPECT_NEAR(parse_weight_quantization("int4").bits_per_value(), 4.15625, 1e-9);
  EXPECT_NEAR(parse_weight_quantization("nf4").bits_per_value(), 4.5, 1e-3);
  EXPECT_NEAR(parse_weight_quantization("mxfp4").bits_per_value(), 4.25, 1e-9);
}

TEST(QuantizationTest, DequantizationIsAMultiplyPerValueAndASubtractionWithZeros) {
  EXPECT_EQ(parse_weight_quantization("int4").dequantization_flops(kSquare), 2 * kValues);
  EXPECT_EQ(parse_weight_quantization("int4-sym").dequantization_flops(kSquare), kValues);
  EXPECT_EQ(parse_weight_quantization("fp8").dequantization_flops(kSquare), kValues);
  EXPECT_EQ(parse_weight_quantization("nvfp4").dequantization_flops(kSquare), kValues + kValues / 16);
  EXPECT_EQ(parse_weight_quantization("nf4-dq").dequantization_flops(kSquare), kValues + 2 * (kValues / 64));
  // on a linear op: the contraction unchanged, the dequantization beside it, the stored bytes read
  OpRecord op{"proj",
              OpKind::kLinear,
              "linear",
              {{"x", {1, 4096}, DType::kBf16}},
              {{"y", {1, 4096}, DType::kBf16}},
              {{"proj.weight", kSquare, DType::kBf16, true, parse_weight_quantization("int4")}},
              {},
              {}};
  const OpCost c = cost_of(op);
  EXPECT_EQ(c.contraction_flops, 2 * kValues);
  EXPECT_EQ(c.flops, 4 * kValues);
  EXPECT_EQ(c.parameter_bytes, stored("int4"));
  // a quantized parameter anywhere else is refused, not read at a guessed size
  OpRecord norm{"n",
                OpKind::kRmsNorm,
                "rms_norm",
                {{"x", {1, 4096}, DType::kBf16}},
                {{"y", {1, 4096}, DType::kBf16}},
                {{"n.weight", {1, 4096}, DType::kBf16, true, parse_weight_quantization("int8")}},
                {},
                {}};
  EXPECT_THROW(cost_of(norm), Error);
}

std::uint64_t graph_parameter_bytes(const OpGraph& g) {
  std::uint64_t bytes = 0;
  for (const ParameterDesc& p : g.unique_parameters()) bytes += p.trainable ? p.bytes() : 0;  // not inv_freq
  return bytes;
}

TEST(QuantizationTest, AQuantizedDecoderStoresItsBlocksLinearWeightsOnly) {
  // Llama-2-7B as AWQ stores it: 6,476,005,376 linear weights in int4 g128, the embeddings, the
  // LM head and the norms in fp16 (3,889,307,648 B; TheBloke/Llama-2-7B-Chat-AWQ's
  // model.safetensors is 3.89 GB)
  DecoderConfig c = with_weights(decoder_preset("llama-2-7b"), "int4");
  const std::uint64_t linear = 32ull * (4 * 4096 * 4096 + 3 * 4096 * 11008);
  ASSERT_EQ(linear, 6476005376u);
  const std::uint64_t rest = decoder_parameter_count(c) - linear;
  EXPECT_EQ(decoder_weight_bytes(c, DType::kFp16), linear / 2 + linear / 128 * 2 + linear / 128 / 2 + rest * 2);
  EXPECT_EQ(decoder_weight_bytes(c, DType::kFp16), 3889307648u);
  // Llama-2-70B the same way: 36,613,668,864 B (TheBloke/Llama-2-70B-AWQ's shards: 36.61 GB)
  EXPECT_EQ(decoder_weight_bytes(with_weights(decoder_preset("llama-2-70b"), "int4"), DType::kFp16), 36613668864u);
  // the graph holds exactly these bytes, for dense, fused (phi3) and MoE (mixtral) models
  DecoderRequest r;
  r.prompt = 8;
  r.dtype = DType::kFp16;
  for (const char* name : {"llama-2-7b", "phi-3-mini-4k", "mixtral-8x7b", "gemma-2b"}) {
    for (const char* spec : {"int4", "nf4-dq", "fp8-block128", "nvfp4"}) {
      const DecoderConfig q = with_weights(decoder_preset(name), spec);
      EXPECT_EQ(graph_parameter_bytes(build_decoder(q, r, "q")), decoder_weight_bytes(q, DType::kFp16))
          << name << " " << spec;
      // --weights on the request is the same as on the config
      DecoderRequest rw = r;
      rw.variant.weights = spec;
      EXPECT_EQ(graph_parameter_bytes(build_decoder(decoder_preset(name), rw, "q")),
                decoder_weight_bytes(q, DType::kFp16))
          << name << " " << spec;
    }
  }
  // the parameter count does not change; lm_head and the router stay in the compute dtype
  EXPECT_EQ(decoder_parameter_count(c), decoder_parameter_count(decoder_preset("llama-2-7b")));
  const OpGraph g = build_decoder(with_weights(decoder_preset("mixtral-8x7b"), "int4"), r, "m");
  for (const ParameterDesc& p : g.unique_parameters()) {
    const bool block_linear = p.id.find("_proj") != std::string::npos || p.id.find(".experts.") != std::string::npos;
    EXPECT_EQ(p.quantization.has_value(), block_linear) << p.id;
  }
}

TEST(QuantizationTest, DecodeReadsTheStoredBytesAndIsFasterButNeverBelowThem) {
  const HardwareSpec h100 = HardwareDatabase::builtin().get("h100-sxm");
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.context = 2048;
  const DecoderConfig plain = decoder_preset("llama-3-8b");
  const Analysis bf16 = analyze(build_decoder(plain, r, "bf16"), h100);
  for (const char* spec : {"int8", "int4", "nf4", "mxfp4"}) {
    const DecoderConfig q = with_weights(plain, spec);
    const Analysis a = analyze(build_decoder(q, r, spec), h100);
    EXPECT_EQ(a.totals.contraction_flops, bf16.totals.contraction_flops) << spec;
    EXPECT_GT(a.totals.flops, bf16.totals.flops) << spec;  // the dequantization
    EXPECT_LT(a.totals.fused_lower_bound_seconds, bf16.totals.fused_lower_bound_seconds) << spec;
    // every stored byte but the embedding's (one row is read) crosses the memory bus
    const std::uint64_t embedding = 128256ull * 4096 * 2;
    const double floor =
        static_cast<double>(decoder_weight_bytes(q, DType::kBf16) - embedding) / h100.memory_bandwidth_bytes_per_second;
    EXPECT_GE(a.totals.fused_lower_bound_seconds, floor * (1 - 1e-9)) << spec;
  }
}

TEST(QuantizationTest, ServingCapacityHoldsTheQuantizedWeights) {
  const DecoderConfig plain = decoder_preset("llama-3-70b");
  const DecoderConfig q = with_weights(plain, "int4");
  const std::uint64_t budget = 80'000'000'000;
  const ServingCapacity a = serving_capacity(plain, DType::kBf16, 8192, 1, budget, 0.1, 1);
  const ServingCapacity b = serving_capacity(q, DType::kBf16, 8192, 1, budget, 0.1, 1);
  EXPECT_FALSE(a.weights_fit);  // 141 GB in bf16
  EXPECT_TRUE(b.weights_fit);   // about 39.9 GB in int4
  EXPECT_EQ(b.weight_bytes, decoder_weight_bytes(q, DType::kBf16));
  EXPECT_GT(b.sequences, 0u);
}

TEST(QuantizationTest, AConfigsQuantizationConfigIsRead) {
  json c = {{"model_type", "llama"},    {"hidden_size", 256},
            {"num_hidden_layers", 2},   {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"intermediate_size", 512},
            {"vocab_size", 1000},       {"max_position_embeddings", 512}};
  EXPECT_FALSE(parse_decoder_config(c, "c").quantization.has_value());
  const auto spec_of = [&](json q) {
    json with = c;
    with["quantization_config"] = std::move(q);
    return parse_decoder_config(with, "c").quantization->spec();
  };
  EXPECT_EQ(spec_of({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}}), "int4-g128");
  EXPECT_EQ(spec_of({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 64}, {"zero_point", false}}), "int4-g64-sym");
  EXPECT_EQ(spec_of({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}, {"sym", true}}), "gptq-int4-channel");
  EXPECT_EQ(spec_of({{"quant_method", "gptq"}, {"bits", 8}, {"group_size", 32}}), "gptq-int8-g32");
  EXPECT_EQ(spec_of({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}), "fp8-block128");
  EXPECT_EQ(spec_of({{"quant_method", "fbgemm_fp8"}}), "fp8");
  EXPECT_EQ(spec_of({{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"lm_head", "router"}}}), "mxfp4");
  EXPECT_EQ(spec_of({{"quant_method", "bitsandbytes"},
                     {"load_in_4bit", true},
                     {"bnb_4bit_quant_type", "nf4"},
                     {"bnb_4bit_use_double_quant", true}}),
            "nf4-dq");
  EXPECT_EQ(spec_of({{"load_in_4bit", true}}), "bnb-fp4");  // BitsAndBytesConfig's default type
  EXPECT_EQ(spec_of({{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}), "bnb-int8");
  const auto code_of = [&](json q) {
    json with = c;
    with["quantization_config"] = std::move(q);
    try {
      parse_decoder_config(with, "c");
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // accepted
  };
  EXPECT_EQ(code_of({{"quant_method", "hqq"}}), ErrorCode::kUnimplemented);
  EXPECT_EQ(code_of({{"quant_method", "gptq"}, {"bits", 3}}), ErrorCode::kUnimplemented);
  EXPECT_EQ(code_of({{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}), ErrorCode::kUnimplemented);
  EXPECT_EQ(code_of({{"quant_method", "awq"}, {"modules_to_not_convert", {"model.layers.0.mlp"}}}),
            ErrorCode::kUnimplemented);
  EXPECT_EQ(code_of({{"quant_method", "awq"}, {"group_size", "128"}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of({{"quant_method", "bitsandbytes"}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of(json::array()), ErrorCode::kInvalidArgument);
}

TEST(QuantizationTest, ABadFormatIsOneClearError) {
  for (const char* bad : {"int3", "", "int4-g0", "int4-gx", "int4-g99999999", "fp8-sym", "nvfp4-g32", "nf4-g64-",
                          "gptq-int8-sym", "int4--sym", "-int4", "mxfp4-dq", "fp8-g128"}) {
    try {
      parse_weight_quantization(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("formats: int8"), std::string::npos) << e.what();
    }
  }
  for (const char* good : {"int8", "int8-g128", "int8-sym", "int4", "int4-g32-sym", "gptq-int4-g64", "fp8",
                           "fp8-block64", "nvfp4", "mxfp4", "nf4", "nf4-dq", "bnb-fp4-dq"}) {
    EXPECT_EQ(parse_weight_quantization(good).spec(), good);
  }
}

}  // namespace
}  // namespace neuralcost
