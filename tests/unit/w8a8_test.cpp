// W8A8 (--activations int8|fp8, issue 25): the blocks' linears multiply activations quantized per
// token by 8-bit weights, in that type, at its rate. Checked by hand on Llama-3-8B: the contractions
// are unchanged; each linear's input is quantized once (q, k and v share one, gate and up one: four
// a layer, six operations a value); weight-only's dequantization is replaced by the epilogue's two
// scalings a sum (once per block of 128 inputs with fp8-block128 weights); the compute-bound prefill
// runs at the fp8 rate. The weights must be 8-bit of the same type.
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/quantization.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace {

Analysis prefill(const DecoderConfig& c, std::int64_t prompt) {
  DecoderRequest r;
  r.batch = 1;
  r.prompt = prompt;
  return analyze(build_decoder(c, r, "p"), HardwareDatabase::builtin().get("h100-sxm"));
}

// Llama-3-8B's block linears [out, in] of one layer: q, k, v, o, gate, up, down.
const std::vector<std::pair<std::uint64_t, std::uint64_t>> kLinears = {
    {4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096}, {14336, 4096}, {14336, 4096}, {4096, 14336}};

TEST(W8A8Test, ItsLinearsMultiplyQuantizedActivationsAtTheEightBitRate) {
  const DecoderConfig llama = decoder_preset("llama-3-8b");
  for (const std::string format : {"fp8", "fp8-block128", "int8"}) {
    const std::string type = format.substr(0, format.find('-'));
    const Analysis weights_only = prefill(with_weights(llama, format), 512);
    const Analysis w8a8 = prefill(with_activations(with_weights(llama, format), type), 512);
    EXPECT_EQ(w8a8.totals.contraction_flops, weights_only.totals.contraction_flops) << format;
    const std::uint64_t tokens = 512, layers = 32;
    const WeightQuantization q = parse_weight_quantization(format);
    std::uint64_t dequantize = 0, epilogue = 0;
    for (const auto& [out, in] : kLinears) {
      dequantize += q.dequantization_flops({static_cast<std::int64_t>(out), static_cast<std::int64_t>(in)});
      epilogue += 2 * tokens * out * (q.group_size > 0 ? in / 128 : 1);
    }
    const std::uint64_t quantize = 6 * tokens * (4096 + 4096 + 4096 + 14336);  // normed, o's, m, down's inputs
    EXPECT_EQ(w8a8.totals.flops + layers * dequantize, weights_only.totals.flops + layers * (quantize + epilogue))
        << format;
    int quantized = 0, eight_bit = 0;
    for (const OpRoofline& r : w8a8.ops) {
      const OpRecord& op = w8a8.graph.op(r.op_index);
      if (op.attributes.get_string("function", "") == "quantize_per_token") ++quantized;
      if (op.kind == OpKind::kLinear && r.compute_dtype == (type == "int8" ? DType::kInt8 : DType::kFp8)) ++eight_bit;
      if (op.name == "lm_head") EXPECT_EQ(r.compute_dtype, DType::kBf16);
    }
    EXPECT_EQ(quantized, 4 * 32) << format;
    EXPECT_EQ(eight_bit, 7 * 32) << format;
    // 512 tokens are compute-bound: the 8-bit rate (twice bf16's on an H100) nearly halves the bound
    EXPECT_LT(w8a8.totals.fused_lower_bound_seconds, 0.6 * weights_only.totals.fused_lower_bound_seconds) << format;
    bool said = false;
    for (const std::string& n : w8a8.graph.notes()) said = said || n.find("W8A8: the blocks' linear") == 0;
    EXPECT_TRUE(said) << format;
  }
}

TEST(W8A8Test, ExpertsTakeQuantizedTokensToo) {
  const Analysis a = prefill(with_activations(decoder_preset("mixtral-8x7b"), "fp8"), 64);
  int experts = 0;
  for (const OpRoofline& r : a.ops) {
    if (a.graph.op(r.op_index).kind != OpKind::kExpertLinear) continue;
    ++experts;
    EXPECT_EQ(r.compute_dtype, DType::kFp8);
  }
  EXPECT_EQ(experts, 3 * 32);
}

TEST(W8A8Test, TheWeightsMustBeEightBitOfTheSameType) {
  const DecoderConfig llama = decoder_preset("llama-3-8b");
  // without a weight format, the weights are stored in the activations' type, one scale a row
  EXPECT_EQ(with_activations(llama, "int8").quantization->spec(), "int8");
  EXPECT_EQ(with_activations(llama, "fp8").quantization->spec(), "fp8");
  EXPECT_FALSE(with_activations(llama, "").activation_dtype.has_value());
  for (const auto& [weights, activations] : std::vector<std::pair<std::string, std::string>>{{"int4", "int8"},
                                                                                             {"int8-asym", "int8"},
                                                                                             {"int8-g128", "int8"},
                                                                                             {"int8", "fp8"},
                                                                                             {"fp8", "int8"},
                                                                                             {"", "int4"},
                                                                                             {"", "bf16"}}) {
    try {
      with_activations(with_weights(llama, weights), activations);
      ADD_FAILURE() << weights << " with " << activations << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("--activations"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace neuralcost
