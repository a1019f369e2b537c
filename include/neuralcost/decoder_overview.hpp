// The figures of a decoder's LLM page (`analyze DECODER --format html`, issue 25 item 8): its
// prefill and decode steps over a range of batches as points on the device's roofline, the time
// per output token and tokens/s against the batch with the batch at which decode turns
// compute-bound, and the bytes of its weights and KV cache against the context beside the
// device's memory. Every time is the lower bound `analyze` prints for the step (the fused bound).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

struct DecoderOverviewRequest {
  std::string model;                  ///< a decoder preset or config.json
  std::vector<std::int64_t> batches;  ///< empty: 1, 2, 4, ..., 256
  std::int64_t prompt = 512;          ///< the prefill's tokens per sequence
  std::int64_t context = 1024;        ///< the decode step's tokens in the cache
  DType dtype = DType::kBf16;
  DecoderVariant variant;  ///< --weights, --kv-cache, --mla, --routing
  HardwareSpec hardware;
};

/// One step at one batch.
struct DecoderOverviewStep {
  DecoderPhase phase = DecoderPhase::kPrefill;
  std::int64_t batch = 1;
  ModelTotals totals;
  double seconds() const { return totals.fused_lower_bound_seconds; }
  /// tokens the step handles per second at its bound: batch × prompt (prefill) or batch (decode)
  double tokens_per_second = 0;
};

/// Weights and KV cache of `batch` sequences of `context` tokens (kv_cache_bytes: a layer with a
/// sliding window holds min(context, window) of each); activations are not counted.
struct DecoderMemoryPoint {
  std::int64_t context = 0;
  std::int64_t batch = 1;
  std::uint64_t weight_bytes = 0;
  std::uint64_t kv_bytes = 0;
  std::uint64_t total() const { return weight_bytes + kv_bytes; }
};

struct DecoderOverview {
  DecoderOverviewRequest request;
  std::uint64_t parameters = 0, active_parameters = 0;
  std::uint64_t weight_bytes = 0;        ///< as stored (quantized weights in their format)
  std::uint64_t kv_bytes_per_token = 0;  ///< 2 · layers · kv heads · head dim · bytes
  std::int64_t max_positions = 0;
  std::int64_t sliding_window = 0;                   ///< 0: none
  std::vector<DecoderOverviewStep> prefill, decode;  ///< one per batch, in the batches' order
  /// The smallest batch whose decode step at `context` is compute-bound (the roof behind most of its
  /// lower bound), found by doubling and then bisection up to kMaxSearchedBatch; empty when none is
  /// (attention's reads of the cache grow with the batch as fast as its FLOPs)
  std::optional<std::int64_t> compute_bound_batch;
  static constexpr std::int64_t kMaxSearchedBatch = 65536;
  std::vector<std::int64_t> memory_batches;  ///< the batches of the memory curves
  std::vector<DecoderMemoryPoint> memory;    ///< contexts 128, 256, ... and the model's positions
  std::optional<double> capacity_bytes;      ///< the device's memory, when its spec has it
};

/// The overview. kInvalidArgument for a model that is not a decoder, a batch below 1, a prompt or
/// context beyond the model's positions; the decoder analysis's errors.
DecoderOverview analyze_decoder_overview(const DecoderOverviewRequest& request);

}  // namespace neuralcost
