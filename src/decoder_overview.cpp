// A decoder's LLM page figures (decoder_overview.hpp).
#include "neuralcost/decoder_overview.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "importers/decoder/decoder_importer.hpp"
#include "neuralcost/analyze_models.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {

DecoderOverview analyze_decoder_overview(const DecoderOverviewRequest& request) {
  DecoderOverview out;
  out.request = request;
  if (out.request.batches.empty()) {
    for (std::int64_t b = 1; b <= 256; b *= 2) out.request.batches.push_back(b);
  }
  for (const std::int64_t b : out.request.batches) {
    if (b < 1 || b > DecoderOverview::kMaxSearchedBatch) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--batch {} must be from 1 to {}", b, DecoderOverview::kMaxSearchedBatch));
    }
  }
  const DecoderConfig config = decoder_config_of(request.model, "--format html: the model", request.variant);
  if (request.prompt < 1 || request.context < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--{} must be at least 1 (got {})", request.prompt < 1 ? "prompt" : "context",
                            request.prompt < 1 ? request.prompt : request.context));
  }
  if (request.prompt > config.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--prompt {} is beyond the model's {} positions (max_position_embeddings)", request.prompt,
                            config.max_positions));
  }
  if (request.context + 1 > config.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--context {} and the step's new token are beyond the model's {} positions "
                            "(max_position_embeddings)",
                            request.context, config.max_positions));
  }
  out.parameters = decoder_parameter_count(config);
  out.active_parameters = decoder_active_parameter_count(config);
  out.weight_bytes = decoder_weight_bytes(config, request.dtype);
  out.kv_bytes_per_token = kv_cache_bytes_per_token(config, request.dtype);
  out.max_positions = config.max_positions;
  out.sliding_window = config.sliding_window;
  out.capacity_bytes = request.hardware.memory_capacity_bytes;

  const std::string base = request.model.substr(request.model.find_last_of('/') + 1);
  const auto step = [&](DecoderPhase phase, std::int64_t batch) {
    DecoderRequest r;
    r.phase = phase;
    r.batch = batch;
    r.prompt = request.prompt;
    r.context = request.context;
    r.dtype = request.dtype;
    const bool prefill = phase == DecoderPhase::kPrefill;
    const std::string name = prefill ? fmt::format("{} (prefill of {} tokens)", base, request.prompt)
                                     : fmt::format("{} (decode at context {})", base, request.context);
    DecoderOverviewStep s;
    s.phase = phase;
    s.batch = batch;
    try {
      s.totals = analyze_decoder_step(config, r, request.hardware, name).totals;
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", request.model, e.what()));
    }
    const double tokens = static_cast<double>(batch) * (prefill ? static_cast<double>(request.prompt) : 1.0);
    s.tokens_per_second = s.seconds() > 0 ? tokens / s.seconds() : 0;
    return s;
  };
  for (const std::int64_t b : out.request.batches) {
    out.prefill.push_back(step(DecoderPhase::kPrefill, b));
    out.decode.push_back(step(DecoderPhase::kDecode, b));
  }

  // the batch at which decode turns compute-bound: doubling to the first compute-bound batch, then
  // bisection between it and the batch before (the weights' share of the bytes falls as the batch grows)
  const auto compute_bound = [&](std::int64_t b) {
    return step(DecoderPhase::kDecode, b).totals.bound == Bound::kCompute;
  };
  std::int64_t low = 0, high = 1;
  while (high <= DecoderOverview::kMaxSearchedBatch && !compute_bound(high)) {
    low = high;
    high *= 2;
  }
  if (high <= DecoderOverview::kMaxSearchedBatch) {
    while (high - low > 1) {
      const std::int64_t mid = low + (high - low) / 2;
      (compute_bound(mid) ? high : low) = mid;
    }
    out.compute_bound_batch = high;
  }

  // memory against context: the smallest, the largest and two batches between of those asked
  const std::vector<std::int64_t>& b = out.request.batches;
  std::vector<std::int64_t> chosen = {b.front(), b.back(), b[b.size() / 3], b[(2 * b.size()) / 3]};
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  out.memory_batches = chosen;
  std::vector<std::int64_t> contexts;
  for (std::int64_t c = 128; c < config.max_positions; c *= 2) contexts.push_back(c);
  contexts.push_back(config.max_positions);
  for (const std::int64_t batch : chosen) {
    for (const std::int64_t c : contexts) {
      DecoderMemoryPoint p;
      p.context = c;
      p.batch = batch;
      p.weight_bytes = out.weight_bytes;
      p.kv_bytes = checked_mul(kv_cache_bytes(config, request.dtype, c), static_cast<std::uint64_t>(batch), "KV bytes");
      out.memory.push_back(p);
    }
  }
  return out;
}

}  // namespace neuralcost
