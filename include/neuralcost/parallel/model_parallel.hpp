// A decoder's training step over dp × tp × pp devices (Megatron-LM's 3D parallelism: Shoeybi et
// al. 2019 for the tensor split, Narayanan et al., SC'21, for the pipeline and its schedules):
// each device holds 1/tp of the heads, KV heads, MLP columns and vocabulary of its pipeline
// stage's layers; a step runs m micro-batches of b sequences through the pipeline in the 1F1B
// schedule (interleaved with v model chunks a device), then all-reduces the gradients over dp.
//
// Every FLOP and byte comes from the cost model through the existing step graph: the training
// step of a one-layer shard (tensor_parallel.hpp's shard_decoder) at the micro-batch is built and
// analysed once per layer kind, and its ops are split into the embedding's, the layer's and the
// head's (by the forward op each belongs to). A stage is its layers' parts and its ends
// (docs/distributed.md §6).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/parallel/sharding.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

struct ModelParallelRequest {
  int dp = 1, tp = 1, pp = 1;
  /// Expert parallelism: each MoE layer's experts split over ep devices of the dp dimension (ep
  /// divides dp and the experts); tokens reach their experts' devices by all-to-all.
  int ep = 1;
  int virtual_stages = 1;  ///< v: model chunks per device (interleaved 1F1B); 1: plain 1F1B
  /// Layers of each model chunk in model order (--stage-layers; pp × v of them, chunk k·pp + d on
  /// device d; with v = 1 each stage's): uneven stages, as Llama 3 405B's 126 layers with one
  /// layer fewer on the first and the last chunk, which hold the embedding and the head. Empty:
  /// the layers split evenly (pp × v must divide them).
  std::vector<std::int64_t> stage_layers;
  std::int64_t micro_batch = 1;   ///< b: sequences per micro-batch (--batch)
  std::int64_t global_batch = 0;  ///< sequences per step over all replicas; 0: dp × b (one micro-batch)
  std::int64_t tokens = 2048;     ///< sequence length (--prompt)
  bool recompute = false;         ///< full recomputation: each layer keeps its input, reruns its forward
  /// Sequence parallelism (Korthikanti et al. 2022): the norms and residual adds, which tensor
  /// parallelism leaves whole on every device, split over the tp devices by tokens; each of the
  /// tensor split's all-reduces becomes a reduce-scatter and an all-gather.
  bool sequence_parallel = false;
  ZeroStage stage = ZeroStage::kNone;  ///< kNone (DDP) or kOptimizer (a distributed optimizer over dp)
  TrainingOptions training;            ///< optimizer and precision (its checkpoint is `recompute`)
  DType dtype = DType::kBf16;          ///< the model's dtype (training_model_dtype of the precision)
  SystemSpec system;
  InterconnectSpec intra, inter;
};

/// What one part of the model (the embedding side, one layer, the head side) costs per
/// micro-batch on one device, from the one-layer shard's step.
struct PartCost {
  double forward_seconds = 0, backward_seconds = 0;  ///< fused-scaled roofline bounds
  double optimizer_seconds = 0;                      ///< once per step
  double forward_flops = 0, backward_flops = 0, optimizer_flops = 0;
  /// of which the routed experts' GEMMs and the ops between them (forward, backward): under a
  /// measured routing and expert parallelism they are the busiest device's, λ times an average
  /// device's
  double expert_forward_flops = 0, expert_backward_flops = 0;
  std::uint64_t parameters = 0;         ///< trainable elements it owns
  std::uint64_t expert_parameters = 0;  ///< of which the experts' (reduced over dp / ep with expert parallelism)
  std::uint64_t saved_bytes = 0;        ///< activations it keeps for its backward pass
  /// of which kept by the experts on their routed rows (an average expert-parallel device's): under
  /// a measured routing device d keeps its load λ_d times this
  std::uint64_t routed_saved_bytes = 0;
  PartCost& operator+=(const PartCost& o);
};

/// The parts of one shard at one micro-batch (layer kinds: sliding window or not, experts or not).
struct ShardCosts {
  PartCost before, after;                  ///< embedding side, head side (final norm, LM head, loss)
  std::map<std::string, PartCost> layers;  ///< by layer kind (decoder_layer_kind)
  std::uint64_t hidden_bytes = 0;          ///< one micro-batch's hidden states: b × s × hidden × element
  std::uint64_t working_bytes = 0;         ///< the one-layer step's activation upper bound (a micro-batch in flight)
  double parameter_bytes_per_element = 0, gradient_bytes_per_element = 0, optimizer_bytes_per_element = 0,
         master_bytes_per_element = 0;
  double fused_scale = 1;  ///< the one-layer step's fused / unfused bound
  DecoderConfig shard;
  std::vector<std::string> notes;  ///< shard_decoder's
};

/// The kind of layer `layer` ("dense", "window", "experts", "window+experts"); under a measured
/// routing each layer with experts is a kind of its own ("experts@3"): its routing is its own.
std::string decoder_layer_kind(const DecoderConfig& config, std::int64_t layer);

/// Builds ShardCosts once per (tp, micro-batch, tokens, precision, optimizer, ep) and keeps them:
/// a search asks for the same few many times.
class ShardCostCache {
 public:
  ShardCostCache(DecoderConfig config, HardwareSpec hardware)
      : config_(std::move(config)), hardware_(std::move(hardware)) {}
  /// `sequence_parallel`: the residual stream's ops split over the tp devices by tokens.
  const ShardCosts& get(int tp, std::int64_t micro_batch, std::int64_t tokens, const TrainingOptions& training,
                        DType dtype, int ep = 1, bool sequence_parallel = false);
  const DecoderConfig& config() const { return config_; }
  const HardwareSpec& hardware() const { return hardware_; }

 private:
  DecoderConfig config_;
  HardwareSpec hardware_;
  std::map<std::string, std::unique_ptr<ShardCosts>> cache_;
};

/// One device of the pipeline (its v chunks), per micro-batch unless said.
struct PipelineStage {
  int index = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> layers;  ///< [first, last) of each chunk
  double forward_seconds = 0, backward_seconds = 0;           ///< compute (backward with the recomputed forward)
  double tensor_seconds = 0;                                  ///< tensor-parallel collectives (forward and backward)
  int tensor_calls = 0;                                       ///< how many (forward and backward)
  double expert_seconds = 0;                                  ///< expert-parallel all-to-alls (forward and backward)
  double optimizer_seconds = 0;                               ///< per step (sharded by a distributed optimizer)
  double gradient_seconds = 0, gradient_exposed_seconds = 0;  ///< dp gradient collectives, per step
  std::uint64_t parameters = 0;                               ///< elements on the device
  int in_flight = 0;  ///< micro-batch chunks whose activations the schedule keeps at its peak
  std::uint64_t state_bytes = 0, activation_bytes = 0, working_bytes = 0;
  double flops = 0;  ///< per micro-batch, with recomputation
  double busy_seconds() const { return forward_seconds + backward_seconds + tensor_seconds + expert_seconds; }
  std::uint64_t memory_lower_bytes() const { return state_bytes + activation_bytes; }
  std::uint64_t memory_upper_bytes() const { return state_bytes + activation_bytes + working_bytes; }
};

struct ModelParallelStep {
  ModelParallelRequest request;
  int devices = 1, micro_batches = 1;
  std::vector<PipelineStage> stages;
  double pipeline_seconds = 0;  ///< m micro-batches through the schedule (with the bubble and transfers)
  double bubble_seconds = 0;    ///< the schedule's idle time on the busiest device
  double p2p_seconds = 0;       ///< stage-to-stage transfers on the critical path
  double p2p_each_seconds = 0;
  /// sends between stages a step, all devices of one pipeline: each micro-batch's hidden states
  /// forward and their gradients back across each of the v·pp − 1 chunk boundaries
  std::int64_t transfers = 0;
  double transfer_bytes = 0;  ///< one send: b × s × hidden (1/tp of it across nodes or with sequence parallelism)
  double tensor_seconds = 0;  ///< the busiest device's tensor-parallel collectives, all micro-batches
  double expert_seconds = 0;  ///< the busiest device's expert-parallel all-to-alls, all micro-batches
  double gradient_exposed_seconds = 0, optimizer_seconds = 0;
  double tied_seconds = 0;  ///< pp > 1 with tied embeddings: the two copies' gradients all-reduced
  double step_seconds = 0;
  double model_flops = 0;     ///< the whole model's step (no recomputation, no replication), all devices
  double hardware_flops = 0;  ///< what every device runs, recomputation and replicated norms included
  double peak_flops_per_second = 0;
  std::optional<double> device_memory_bytes;
  std::vector<std::string> approximations, notes;
  std::string link_of_stages;  ///< "intra-node" or "inter-node"

  double mfu() const { return ratio(model_flops); }
  double hfu() const { return ratio(hardware_flops); }
  double tokens_per_second() const {
    return step_seconds > 0
               ? static_cast<double>(request.global_batch) * static_cast<double>(request.tokens) / step_seconds
               : 0;
  }
  /// the fullest device's memory, "fits" / "may fit" / "does not fit" / "unknown" (as DataParallelStep)
  std::uint64_t memory_lower_bytes() const;
  std::uint64_t memory_upper_bytes() const;
  std::string fit() const;
  std::string layout() const;  ///< "dp=8,tp=8,pp=16,b=1,m=192,v=1,ddp,recompute"

 private:
  double ratio(double flops) const {
    return step_seconds > 0 && peak_flops_per_second > 0 ? flops / (step_seconds * devices * peak_flops_per_second) : 0;
  }
};

/// m micro-batches through the 1F1B schedule (Megatron's interleaved one with v chunks a device)
/// over pp = busy.size() devices, device d busy busy[d] a micro-batch (forward, backward and its
/// tensor and expert collectives): m × the busiest device's, the others' fill and drain
/// (Σ − max) / v (the bubble), and 2(v·pp − 1) + 2v(m − 1) transfers of `p2p_each_seconds` between
/// stages on the critical path (none with one device).
struct PipelineSchedule {
  double pipeline_seconds = 0, bubble_seconds = 0, p2p_seconds = 0;
};
PipelineSchedule one_f_one_b(const std::vector<double>& busy, std::int64_t micro_batches, int virtual_stages,
                             double p2p_each_seconds);

/// The step of `request` for the cache's decoder on its hardware. kInvalidArgument (one sentence
/// naming the value) for degrees below 1, a tp above the node or one the heads do not divide,
/// layers that pp × v does not divide, a global batch that is not a multiple of dp × b, devices
/// that do not fill whole nodes, and ZeRO-2/3 with tp or pp above 1.
ModelParallelStep model_parallel_step(ShardCostCache& cache, const ModelParallelRequest& request);

/// Every layout of `devices` devices for `base`'s global batch: tp a power of two up to the node
/// that the heads allow, pp dividing the layers (and devices / tp), b from `micro_batches` dividing
/// the batch per replica, with and without recomputation, DDP and a distributed optimizer; ranked
/// as rank_data_parallel ranks (fits by tokens/s, then may fit, then the rest).
std::vector<ModelParallelStep> search_model_parallel(ShardCostCache& cache, const ModelParallelRequest& base,
                                                     int devices, const std::vector<std::int64_t>& micro_batches);

}  // namespace neuralcost
