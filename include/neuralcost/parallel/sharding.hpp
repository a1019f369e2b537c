// Data-parallel sharding of a training step's model states (ZeRO, Rajbhandari et al., SC'20;
// FSDP): what each of `ranks` data-parallel devices holds under a stage, and the collectives a
// step runs for it (docs/distributed.md).
//
// Stage 0 (DDP) replicates everything and all-reduces the gradients. ZeRO-1 shards the
// optimizer state and the fp32 master weights (the paper's K·Ψ), ZeRO-2 also the gradients,
// ZeRO-3 (FSDP's FULL_SHARD) also the parameters. For mixed-precision Adam that is the paper's
// (2 + 2 + 12)·Ψ bytes replicated, 2Ψ + 2Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/cost/collectives.hpp"
#include "neuralcost/training/memory.hpp"

namespace neuralcost {

enum class ZeroStage { kNone = 0, kOptimizer = 1, kGradients = 2, kParameters = 3 };

/// "ddp", "zero1", "zero2", "zero3"; FSDP's names are accepted too: "fsdp" / "full_shard" (3),
/// "shard_grad_op" (2), "no_shard" (0). nullopt for anything else.
std::optional<ZeroStage> zero_stage_from_name(std::string_view name);
std::string_view zero_stage_name(ZeroStage stage);

/// One device's model states (bytes). Shards are ceil(elements / ranks): the last rank's padding
/// is counted, as DeepSpeed and FSDP pad the flat buffer to a multiple of the ranks.
struct ShardedStates {
  ZeroStage stage = ZeroStage::kNone;
  int ranks = 1;
  std::uint64_t parameter_bytes = 0;
  std::uint64_t gradient_bytes = 0;
  std::uint64_t optimizer_state_bytes = 0;
  std::uint64_t master_weight_bytes = 0;
  std::uint64_t buffer_bytes = 0;  ///< running statistics: replicated at every stage
  /// ZeRO-3: the largest layer's parameters, gathered whole while it runs (not sharded).
  std::uint64_t gathered_parameter_bytes = 0;
  std::uint64_t model_state_bytes() const {
    return parameter_bytes + gradient_bytes + optimizer_state_bytes + master_weight_bytes;
  }
};

/// The share of `ledger`'s model states one of `ranks` devices holds at `stage`.
/// `largest_layer_parameter_bytes`: the biggest unit ZeRO-3 gathers (0 when not known).
/// Throws kInvalidArgument for ranks < 1.
ShardedStates shard_model_states(const MemoryLedger& ledger, ZeroStage stage, int ranks,
                                 std::uint64_t largest_layer_parameter_bytes = 0);

/// A collective a data-parallel step runs, and over what.
struct StepCollective {
  Collective collective;
  double bytes = 0;  ///< nccl-tests' S (collectives.hpp)
  double element_bytes = 0;
  std::string what;  ///< "gradients", "parameters (forward)", ...
};

/// The collectives of one step at `stage` over `ranks` devices for `ledger`'s parameters:
/// stage 0 an all-reduce of the gradients; 1 and 2 a reduce-scatter of the gradients and an
/// all-gather of the updated parameters (the same bytes on the wire as the all-reduce: 2Ψ);
/// 3 an all-gather of the parameters in the forward pass, another in the backward pass and a
/// reduce-scatter of the gradients (3Ψ: 1.5 × DDP). Gradients are reduced in the parameter
/// dtype. Empty for ranks == 1.
std::vector<StepCollective> step_collectives(const MemoryLedger& ledger, ZeroStage stage, int ranks);

}  // namespace neuralcost
