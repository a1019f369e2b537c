// DeepSeek's multi-head latent attention and routers (latent_attention.cpp), op by op as
// transformers' DeepseekV3Attention and DeepseekV3TopkRouter, and DeepseekV2Attention and
// DeepseekV2TopkRouter, compute them. Private to src/models.
#pragma once

#include <cstdint>
#include <string>

#include "models/decoder_builder.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost::detail {

/// One layer's latent attention on `normed` [B, T, E] under module `attn` (model.layers.L.self_attn),
/// with the rotary tables [1, 1, T, rope_dims]: returns o_proj's output [B, T, E]. `keys`: the
/// keys attended (T in a prefill; the cache and this step's in a decode step, which reads the
/// latent cache from memory and adds its bytes to `cache_read`); `training`: no cache is written.
TensorDesc latent_attention(Builder& b, const DecoderConfig& c, const std::string& attn, const TensorDesc& normed,
                            const TensorDesc& cos, const TensorDesc& sin, bool decode, std::int64_t keys, bool training,
                            std::uint64_t& cache_read);

/// deepseek_v3's router on m [B, T, E] under module `gate` (model.layers.L.mlp.gate): the k routing
/// weights [B, T, k] in fp32 (scaled by routed_scaling_factor).
TensorDesc grouped_sigmoid_router(Builder& b, const DecoderConfig& c, const std::string& gate, const TensorDesc& m);
/// deepseek_v2's router (DeepseekV2TopkRouter), the same: softmax scores, greedy or group-limited top-k.
TensorDesc softmax_group_router(Builder& b, const DecoderConfig& c, const std::string& gate, const TensorDesc& m);

/// deepseek_v2's rotary table under module `rotary` (model.rotary_emb) for t positions: the complex
/// freqs_cis [1, 1, t, rotary_dims / 2, 2] (real and imaginary parts) in fp32.
TensorDesc complex_rotary_table(Builder& b, const std::string& rotary, std::int64_t t, std::int64_t rotary_dims);

}  // namespace neuralcost::detail
