// ZeRO / FSDP sharding of the model states, and the collectives each stage runs
// (include/neuralcost/parallel/sharding.hpp).
#include "neuralcost/parallel/sharding.hpp"

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

struct StageName {
  std::string_view name;
  ZeroStage stage;
};
constexpr StageName kNames[] = {
    {"ddp", ZeroStage::kNone},         {"zero0", ZeroStage::kNone},      {"no_shard", ZeroStage::kNone},
    {"zero1", ZeroStage::kOptimizer},  {"zero2", ZeroStage::kGradients}, {"shard_grad_op", ZeroStage::kGradients},
    {"zero3", ZeroStage::kParameters}, {"fsdp", ZeroStage::kParameters}, {"full_shard", ZeroStage::kParameters}};

/// `bytes` of `count` elements, one rank's shard of ceil(count / ranks) elements.
std::uint64_t shard(std::uint64_t bytes, std::uint64_t count, int ranks) {
  if (count == 0 || ranks == 1) return bytes;
  const std::uint64_t per_element = bytes / count;
  const std::uint64_t elements = (count + ranks - 1) / static_cast<std::uint64_t>(ranks);
  return elements * per_element;
}

}  // namespace

std::optional<ZeroStage> zero_stage_from_name(std::string_view name) {
  for (const auto& n : kNames) {
    if (n.name == name) return n.stage;
  }
  return std::nullopt;
}

std::string_view zero_stage_name(ZeroStage stage) {
  switch (stage) {
    case ZeroStage::kNone: return "ddp";
    case ZeroStage::kOptimizer: return "zero1";
    case ZeroStage::kGradients: return "zero2";
    case ZeroStage::kParameters: return "zero3";
  }
  return "?";
}

ShardedStates shard_model_states(const MemoryLedger& ledger, ZeroStage stage, int ranks,
                                 std::uint64_t largest_layer_parameter_bytes) {
  if (ranks < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a data-parallel degree must be >= 1, not {}", ranks));
  }
  const std::uint64_t n = ledger.parameter_count;
  ShardedStates s;
  s.stage = stage;
  s.ranks = ranks;
  s.buffer_bytes = ledger.buffer_bytes;
  const int at = static_cast<int>(stage);
  s.optimizer_state_bytes = at >= 1 ? shard(ledger.optimizer_state_bytes, n, ranks) : ledger.optimizer_state_bytes;
  s.master_weight_bytes = at >= 1 ? shard(ledger.master_weight_bytes, n, ranks) : ledger.master_weight_bytes;
  s.gradient_bytes = at >= 2 ? shard(ledger.gradient_bytes, n, ranks) : ledger.gradient_bytes;
  s.parameter_bytes = at >= 3 ? shard(ledger.parameter_bytes, n, ranks) : ledger.parameter_bytes;
  if (at >= 3 && ranks > 1) s.gathered_parameter_bytes = largest_layer_parameter_bytes;
  return s;
}

std::vector<StepCollective> step_collectives(const MemoryLedger& ledger, ZeroStage stage, int ranks) {
  if (ranks < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a data-parallel degree must be >= 1, not {}", ranks));
  }
  if (ranks == 1 || ledger.parameter_count == 0) return {};
  const double grads = static_cast<double>(ledger.gradient_bytes);
  const double params = static_cast<double>(ledger.parameter_bytes);
  const double grad_element = grads / static_cast<double>(ledger.parameter_count);
  const double param_element = params / static_cast<double>(ledger.parameter_count);
  switch (stage) {
    case ZeroStage::kNone: return {{Collective::kAllReduce, grads, grad_element, "gradients"}};
    case ZeroStage::kOptimizer:
    case ZeroStage::kGradients:
      return {{Collective::kReduceScatter, grads, grad_element, "gradients"},
              {Collective::kAllGather, params, param_element, "updated parameters"}};
    case ZeroStage::kParameters:
      return {{Collective::kAllGather, params, param_element, "parameters (forward)"},
              {Collective::kAllGather, params, param_element, "parameters (backward)"},
              {Collective::kReduceScatter, grads, grad_element, "gradients"}};
  }
  return {};
}

}  // namespace neuralcost
