// deepseek_v3's multi-head latent attention and its grouped sigmoid router (latent_attention.cpp),
// op by op as transformers' DeepseekV3Attention and DeepseekV3TopkRouter compute them. Private to
// src/models.
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

}  // namespace neuralcost::detail
