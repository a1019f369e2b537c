// Tensor parallelism of a decoder (Megatron-LM's column/row split, Shoeybi et al. 2019): each of
// tp devices holds 1/tp of the attention heads, KV heads, MLP columns and vocabulary, and every
// layer all-reduces its activations twice (after the attention's output projection and after the
// MLP's down projection); the LM head's logits are gathered. A device's step is the decoder
// itself with those dimensions divided (norms and residuals replicated), so it is counted by the
// same graph builder (docs/distributed.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/cost/collectives.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

/// One device's share of `config` under `tp`-way tensor parallelism: heads, KV heads,
/// intermediate and vocab divided by tp (MoE: each expert's intermediate). KV heads fewer than tp
/// are replicated (tp a multiple of them: each device keeps one, as Megatron does); the vocabulary
/// is padded up to a multiple of tp. `notes` gets a sentence for each. kInvalidArgument for tp < 1
/// or heads, KV heads or intermediate that tp does not divide.
DecoderConfig shard_decoder(const DecoderConfig& config, int tp, std::vector<std::string>* notes = nullptr);

/// The collectives of one step of `request` under tp: two all-reduces per layer of
/// batch × tokens × hidden activations, and an all-gather of the logits (batch × the positions
/// that get logits × vocab). Empty for tp == 1.
std::vector<std::pair<Collective, double>> tensor_parallel_collectives(const DecoderConfig& config,
                                                                       const DecoderRequest& request, int tp);

/// How many sequences a decoder serves at a context under a memory budget per device, with its
/// weights and KV cache split over tp devices: the KV cache paged in blocks of `block_tokens`
/// (vLLM's default 16), the budget less its reserve less the shard's weights.
struct ServingCapacity {
  int tp = 1;
  std::uint64_t weight_bytes = 0;        ///< per device
  std::uint64_t kv_bytes_per_token = 0;  ///< per device
  std::uint64_t usable_bytes = 0;        ///< budget × (1 − reserve) − weights (0 when they do not fit)
  std::uint64_t cache_tokens = 0;        ///< tokens the KV cache holds (whole blocks)
  std::uint64_t sequences =
      0;  ///< sequences of `context` tokens at once (a sliding window of W: each holds min(context, W))
  /// The most tokens each of `concurrency` sequences served at once can hold (whole blocks each,
  /// at most max_position_embeddings; with a sliding window whose W tokens fit, the positions);
  /// 0 when not even one block each fits
  std::uint64_t longest_sequence = 0;
  std::int64_t concurrency = 1;
  bool weights_fit = false;
};

/// The capacity of `config` in `dtype` at `context` tokens a sequence on tp devices of `budget`
/// bytes each, `reserve` of it kept free (0 <= reserve < 1), and the longest sequence when
/// `concurrency` are served at once. shard_decoder's errors for tp.
ServingCapacity serving_capacity(const DecoderConfig& config, DType dtype, std::int64_t context, int tp,
                                 std::uint64_t budget, double reserve, std::int64_t concurrency = 1,
                                 std::int64_t block_tokens = 16);

/// The tensor-parallel degrees worth asking about: 1, 2, 4, … up to `max_tp` that shard_decoder
/// accepts for `config`.
std::vector<int> tensor_parallel_degrees(const DecoderConfig& config, int max_tp);

/// One step of a decoder over tp devices of one node.
struct TensorParallelStep {
  int tp = 1;
  DecoderConfig shard;
  Analysis one_device;   ///< the whole model on one device
  Analysis device_step;  ///< one device's shard
  struct Communication {
    Collective collective = Collective::kAllReduce;
    int calls = 0;
    double bytes_each = 0;  ///< nccl-tests' S of one call
    double seconds = 0;     ///< all calls
    double wire_bytes_per_rank = 0;
    std::string basis;
  };
  std::vector<Communication> communication;
  double compute_seconds = 0;        ///< the shard's fused bound
  double communication_seconds = 0;  ///< exposed: Megatron's all-reduces sit between the layers' GEMMs
  double step_seconds = 0;
  std::vector<std::string> notes;
  double speedup() const { return step_seconds > 0 ? one_device.totals.fused_lower_bound_seconds / step_seconds : 0; }
};

/// The step of `request` on tp devices of `hardware` inside one node of `devices_per_node`, joined
/// by `link`. kInvalidArgument for tp above the node, and shard_decoder's errors.
TensorParallelStep tensor_parallel_step(const DecoderConfig& config, const DecoderRequest& request, int tp,
                                        const HardwareSpec& hardware, const InterconnectSpec& link,
                                        int devices_per_node, const std::string& name);

}  // namespace neuralcost
