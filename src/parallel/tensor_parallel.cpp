// A decoder's tensor-parallel shard and the collectives of its step
// (include/neuralcost/parallel/tensor_parallel.hpp).
#include "neuralcost/parallel/tensor_parallel.hpp"

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/parallel/link_time.hpp"

namespace neuralcost {

DecoderConfig shard_decoder(const DecoderConfig& config, int tp, std::vector<std::string>* notes) {
  if (tp < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--parallel tp={}: needs at least 1 device", tp));
  if (tp == 1) return config;
  auto refuse = [&](const char* what, std::int64_t value) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--parallel tp={} does not divide the model's {} {} (tensor parallelism splits them "
                            "evenly)",
                            tp, value, what));
  };
  if (config.heads % tp != 0) refuse("attention heads", config.heads);
  if (config.intermediate % tp != 0) refuse("MLP columns (intermediate_size)", config.intermediate);
  if (config.expert_intermediate % tp != 0)
    refuse("expert columns (moe_intermediate_size)", config.expert_intermediate);
  if (config.shared_expert_intermediate % tp != 0)
    refuse("shared expert columns (shared_expert_intermediate_size)", config.shared_expert_intermediate);
  DecoderConfig d = config;
  d.heads = config.heads / tp;
  d.intermediate = config.intermediate / tp;
  // every expert split like the dense MLP (each device holds a slice of every expert); the shared
  // expert's one-output gate is replicated
  d.expert_intermediate = config.expert_intermediate / tp;
  d.shared_expert_intermediate = config.shared_expert_intermediate / tp;
  if (config.kv_heads % tp == 0) {
    d.kv_heads = config.kv_heads / tp;
  } else if (tp % config.kv_heads == 0) {
    d.kv_heads = 1;
    if (notes != nullptr) {
      notes->push_back(fmt::format("{} KV heads over {} devices: each device keeps one, replicated {} times",
                                   config.kv_heads, tp, tp / config.kv_heads));
    }
  } else {
    refuse("KV heads", config.kv_heads);
  }
  const std::int64_t padded = (config.vocab + tp - 1) / tp * tp;
  d.vocab = padded / tp;
  if (padded != config.vocab && notes != nullptr) {
    notes->push_back(
        fmt::format("the vocabulary of {} is padded to {} to split it over {} devices", config.vocab, padded, tp));
  }
  return d;
}

std::vector<std::pair<Collective, double>> tensor_parallel_collectives(const DecoderConfig& config,
                                                                       const DecoderRequest& request, int tp) {
  if (tp <= 1) return {};
  const double element = static_cast<double>(dtype_bytes(request.dtype));
  const double tokens = request.phase == DecoderPhase::kPrefill ? static_cast<double>(request.prompt)
                                                                : static_cast<double>(request.tokens);
  const double logit_positions = request.phase == DecoderPhase::kPrefill ? 1.0 : static_cast<double>(request.tokens);
  const double activations = static_cast<double>(request.batch) * tokens * static_cast<double>(config.hidden) * element;
  std::vector<std::pair<Collective, double>> out;
  // the vocabulary-parallel embedding: each device looks up the tokens of its rows of the
  // vocabulary (zeros for the others), summed over the devices (Megatron's, vLLM's)
  out.emplace_back(Collective::kAllReduce, activations);
  for (std::int64_t l = 0; l < config.layers; ++l) {
    out.emplace_back(Collective::kAllReduce, activations);  // after the attention's o_proj
    out.emplace_back(Collective::kAllReduce, activations);  // after the MLP's down_proj
  }
  const double padded_vocab = static_cast<double>((config.vocab + tp - 1) / tp * tp);
  out.emplace_back(Collective::kAllGather,
                   static_cast<double>(request.batch) * logit_positions * padded_vocab * element);
  return out;
}

ServingCapacity serving_capacity(const DecoderConfig& config, DType dtype, std::int64_t context, int tp,
                                 std::uint64_t budget, double reserve, std::int64_t concurrency,
                                 std::int64_t block_tokens) {
  if (context < 1 || block_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a context of {} tokens cannot be served", context));
  }
  if (concurrency < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} sequences at once cannot be served", concurrency));
  }
  const DecoderConfig shard = shard_decoder(config, tp);
  ServingCapacity out;
  out.tp = tp;
  out.concurrency = concurrency;
  out.weight_bytes = decoder_weight_bytes(shard, dtype);
  out.kv_bytes_per_token = kv_cache_bytes_per_token(shard, dtype);
  const auto usable = static_cast<std::uint64_t>(static_cast<double>(budget) * (1 - reserve));
  out.weights_fit = usable > out.weight_bytes;
  if (!out.weights_fit) return out;
  out.usable_bytes = usable - out.weight_bytes;
  const std::uint64_t block = out.kv_bytes_per_token * static_cast<std::uint64_t>(block_tokens);
  const std::uint64_t blocks = block > 0 ? out.usable_bytes / block : 0;
  out.cache_tokens = blocks * static_cast<std::uint64_t>(block_tokens);
  // each layer holds min(C, its window) tokens of a sequence (every token without one), in whole
  // blocks of its own: mistral's window on every layer, gemma2's on every other one
  const std::uint64_t layer_block = block / static_cast<std::uint64_t>(config.layers);
  const auto bytes_at = [&](std::int64_t c) {
    std::uint64_t n = 0;
    for (std::int64_t l = 0; l < config.layers; ++l) {
      const std::int64_t w = config.window_of(l), held = w > 0 ? std::min(c, w) : c;
      n += static_cast<std::uint64_t>((held + block_tokens - 1) / block_tokens) * layer_block;
    }
    return n;
  };
  out.sequences = out.usable_bytes / bytes_at(context);
  // the longest sequence: the most whole blocks whose bytes fit each sequence's share (the model's
  // positions once every layer's window fits)
  const std::uint64_t share = out.usable_bytes / static_cast<std::uint64_t>(concurrency);
  std::int64_t lo = 0, hi = config.max_positions;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (bytes_at(mid) <= share)
      lo = mid;
    else
      hi = mid - 1;
  }
  out.longest_sequence = static_cast<std::uint64_t>(lo);
  return out;
}

std::vector<int> tensor_parallel_degrees(const DecoderConfig& config, int max_tp) {
  std::vector<int> out;
  for (int tp = 1; tp <= max_tp; tp *= 2) {
    try {
      shard_decoder(config, tp);
      out.push_back(tp);
    } catch (const Error&) {
    }
  }
  return out;
}

TensorParallelStep tensor_parallel_step(const DecoderConfig& config, const DecoderRequest& request, int tp,
                                        const HardwareSpec& hardware, const InterconnectSpec& link,
                                        int devices_per_node, const std::string& name) {
  if (tp > devices_per_node) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--parallel tp={}: tensor parallelism stays inside a node, which has {} devices", tp,
                            devices_per_node));
  }
  TensorParallelStep out;
  out.tp = tp;
  out.shard = shard_decoder(config, tp, &out.notes);
  out.one_device = analyze(build_decoder(config, request, name), hardware);
  out.device_step = tp == 1
                        ? out.one_device
                        : analyze(build_decoder(out.shard, request, fmt::format("{} (1 of {})", name, tp)), hardware);
  out.compute_seconds = out.device_step.totals.fused_lower_bound_seconds;
  const double element = static_cast<double>(dtype_bytes(request.dtype));
  for (const auto& [c, bytes] : tensor_parallel_collectives(config, request, tp)) {
    std::string basis;
    const CollectiveCost cost = in_node_cost(link, c, tp, bytes, element, basis);
    if (out.communication.empty() || out.communication.back().collective != c ||
        out.communication.back().bytes_each != bytes) {
      out.communication.push_back({c, 0, bytes, 0, 0, basis});
    }
    auto& comm = out.communication.back();
    ++comm.calls;
    comm.seconds += cost.seconds();
    comm.wire_bytes_per_rank += cost.wire_bytes_per_rank;
    out.communication_seconds += cost.seconds();
  }
  out.step_seconds = out.compute_seconds + out.communication_seconds;
  if (tp > 1) {
    out.notes.push_back("the all-reduces are not overlapped with compute (each sits between two GEMMs that need it)");
  }
  return out;
}

}  // namespace neuralcost
