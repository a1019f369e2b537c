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
  double speedup() const {
    return step_seconds > 0 ? one_device.totals.fused_lower_bound_seconds / step_seconds : 0;
  }
};

/// The step of `request` on tp devices of `hardware` inside one node of `devices_per_node`, joined
/// by `link`. kInvalidArgument for tp above the node, and shard_decoder's errors.
TensorParallelStep tensor_parallel_step(const DecoderConfig& config, const DecoderRequest& request, int tp,
                                        const HardwareSpec& hardware, const InterconnectSpec& link,
                                        int devices_per_node, const std::string& name);

}  // namespace neuralcost
