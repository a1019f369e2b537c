// How a decoder LLM is stored and served beside what its config says (models/decoder.hpp): the
// options --weights, --kv-cache, --mla and --routing, as the user gave them. One struct carries
// them from the CLI to the builder (with_variant applies them to a config).
#pragma once

#include <string>

namespace neuralcost {

struct DecoderVariant {
  /// --weights: the blocks' linear weights stored quantized (parse_weight_quantization); empty: the config's
  std::string weights;
  /// --activations: W8A8, the blocks' linears multiply activations quantized per token, int8 or fp8, by
  /// 8-bit weights of the same type (with_activations); empty: weights dequantized to the dtype
  std::string activations;
  /// --kv-cache: the KV cache's storage, fp8, int8, fp16, bf16 or fp32 (with_kv_cache); empty: the dtype
  std::string kv_cache;
  /// --mla: latent attention's decode, absorbed or expanded (with_mla); empty: expanded, as transformers
  std::string mla;
  /// --routing: a routing histogram file, tokens per expert per layer (with_routing); empty: uniform routing
  std::string routing;
};

}  // namespace neuralcost
