// The analyze pipeline (`neural-cost analyze`): each requested model imported, analysed on a
// hardware spec, and, for a training step, its ledger and the largest batch that fits a memory
// budget. The CLI parses options into an AnalyzeRequest and prints what this returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/importer.hpp"
#include "neuralcost/parallel/model_parallel.hpp"
#include "neuralcost/parallel/serving_choice.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {

struct AnalyzeRequest {
  std::vector<ModelRequest> models;  ///< model_requests() of the models and batches asked for
  HardwareSpec hardware;
  std::optional<TrainingOptions> train;  ///< analyse a training step instead of a forward pass
  /// training only: find the largest batch whose step fits this many bytes, less `reserve`
  std::optional<std::uint64_t> memory_budget;
  double reserve = 0;
};

struct AnalyzeResults {
  /// per model, in request order: the forward pass, or the training step (= reports[i].step)
  std::vector<Analysis> analyses;
  std::vector<TrainingReport> reports;  ///< per model, for a training request; empty otherwise
};

/// Imports (registry.hpp, importer_for) and analyses every model of `request`. An analysis error
/// of a model file names the file ("m.onnx: ..."); a budget search of a model that fixes its batch
/// is kInvalidArgument. kInvalidArgument for a memory budget without training.
AnalyzeResults analyze_models(const AnalyzeRequest& request);

/// Speculative decoding (issue 25): a draft model proposes `draft_tokens` (γ) tokens one decode
/// step at a time, the target verifies them in one step of γ + 1 tokens, and each drafted token is
/// accepted with probability `acceptance` (α, independently: Leviathan et al. 2023).
struct SpeculativeRequest {
  std::string target, draft;  ///< decoder presets or config.json files sharing a tokenizer
  std::int64_t batch = 1;
  std::int64_t context = 1024;  ///< tokens in the KV cache when the round starts
  std::int64_t draft_tokens = 4;
  double acceptance = 0.7;
  std::optional<DType> dtype;  ///< both models' (default bf16)
  DecoderVariant variant;      ///< --weights, --kv-cache, --mla: both models'; --routing: the target's
  HardwareSpec hardware;
};

struct SpeculativeEstimate {
  SpeculativeRequest request;
  Analysis target_step;               ///< the target's decode step of 1 token at the context
  std::vector<Analysis> draft_steps;  ///< the draft's γ decode steps, at contexts C .. C + γ − 1
  Analysis verify_step;               ///< the target's step of γ + 1 tokens at the context
  double expected_tokens = 0;         ///< per round: (1 − α^(γ+1)) / (1 − α); γ + 1 at α = 1
  double round_seconds = 0;           ///< the draft steps' and the verify step's fused bounds summed
  double seconds_per_token = 0;       ///< round_seconds / expected_tokens
  double speedup = 0;                 ///< the target step's fused bound / seconds_per_token
  /// the acceptance at which the speedup is 1; empty when even α = 1 does not pay
  std::optional<double> break_even_acceptance;
};

/// (1 − α^(γ+1)) / (1 − α): the expected tokens a round of γ drafted tokens yields (the accepted
/// prefix and the target's own next token). kInvalidArgument for γ < 1 or α outside [0, 1].
double expected_tokens_per_round(std::int64_t draft_tokens, double acceptance);

/// The rounds' lower bounds from the decoders' analyses. kInvalidArgument for a model that is not
/// a decoder, a draft with another vocabulary than the target's, γ outside 1..64, α outside
/// [0, 1], or a context whose round runs beyond a model's positions.
SpeculativeEstimate analyze_speculative(const SpeculativeRequest& request);

/// A whole generation (`--phase generate`): a prefill of `prompt` tokens, then `generate` − 1
/// decode steps at contexts P … P + G − 2, which produce the G tokens after the prompt.
struct GenerationRequest {
  std::string model;  ///< a decoder preset or config.json
  std::int64_t batch = 1;
  std::int64_t prompt = 512;
  std::int64_t generate = 128;
  std::optional<DType> dtype;  ///< default bf16
  DecoderVariant variant;      ///< --weights, --kv-cache, --mla, --routing
  HardwareSpec hardware;
};

/// Figures summed over steps.
struct StepSums {
  std::uint64_t flops = 0, contraction_flops = 0, bytes_read = 0, bytes_written = 0;
  double lower_bound_seconds = 0, fused_lower_bound_seconds = 0;
};

struct GenerationEstimate {
  GenerationRequest request;
  ModelTotals prefill;             ///< the prompt: time to first token
  ModelTotals first_step;          ///< the decode step at context P (when G ≥ 2)
  ModelTotals last_step;           ///< the decode step at context P + G − 2
  std::int64_t decode_steps = 0;   ///< G − 1
  StepSums decode;                 ///< every decode step's figures, summed exactly
  std::size_t analysed_steps = 0;  ///< decode contexts analysed to sum them (the rest are exact interpolation)
  double seconds() const { return prefill.fused_lower_bound_seconds + decode.fused_lower_bound_seconds; }
  /// the decode steps' mean fused bound (0 when G = 1)
  double seconds_per_output_token() const {
    return decode_steps > 0 ? decode.fused_lower_bound_seconds / static_cast<double>(decode_steps) : 0;
  }
};

/// A decoder step's totals, and the roof and memory level of each op and fusion group (its
/// signature). A decoder whose layers are alike (every layer dense, or every one with experts, and
/// one attention window for all: not gemma2's alternating ones) is
/// analysed as graphs of one and of two layers: each further layer adds what the second added (its
/// ops, and the fusion across the boundary before it), and the whole model's state decides the
/// memory levels, so L layers' totals are t1 + (L − 1)·(t2 − t1), equal to the whole graph's
/// (tested) at a fraction of the work. Other decoders: the whole graph.
struct DecoderStep {
  ModelTotals totals;
  std::vector<std::string> signature;
};
DecoderStep analyze_decoder_step(const DecoderConfig& config, const DecoderRequest& request,
                                 const HardwareSpec& hardware, const std::string& name);

/// Sums the decode steps exactly without analysing each: over contexts where every op and fusion
/// group keeps its roof and memory level (both change monotonically with the context, so equal at
/// the two ends means equal between), every figure is affine in the context and an arithmetic
/// series sums it; the midpoint is checked against the chord, and an interval that fails either
/// test is split. kInvalidArgument for a model that is not a decoder, a prompt or generation
/// below 1, or one that runs beyond the model's positions.
GenerationEstimate analyze_generation(const GenerationRequest& request);

/// A decoder's prefill or decode step over tp devices of one node (`analyze MODEL --parallel tp=N
/// --system ID`): tensor_parallel_step() on the model's config (a preset or config.json).
/// kInvalidArgument for a model that is not a decoder, and tensor_parallel_step()'s errors.
/// The shard costs of a decoder preset or config.json on `hardware`, for model_parallel_step and
/// search_model_parallel (`analyze DECODER --train --parallel dp=D,tp=T,pp=P`, `--search
/// --devices N`), with a measured routing when `routing` names a histogram (--routing). kInvalidArgument
/// for a model that is not a decoder.
ShardCostCache model_parallel_costs(const std::string& model, const HardwareSpec& hardware,
                                    const std::string& routing = "");

TensorParallelStep analyze_tensor_parallel(const std::string& model, const DecoderRequest& request, int tp,
                                           const HardwareSpec& hardware, const InterconnectSpec& link,
                                           int devices_per_node);
/// The serving capacity of a decoder (`analyze MODEL --phase decode --context C --memory-budget M`)
/// at every tensor-parallel degree up to `max_tp` its heads allow (serving_capacity()), with the
/// longest sequence when `concurrency` (--batch) are served at once.
/// kInvalidArgument for a model that is not a decoder or a context beyond its positions.
std::vector<ServingCapacity> analyze_serving_capacity(const std::string& model, DType dtype, std::int64_t context,
                                                      std::uint64_t budget, double reserve, int max_tp,
                                                      std::int64_t concurrency = 1, const DecoderVariant& variant = {});
/// The cheapest built-in system and tensor-parallel degree that decode `request` within
/// `target_seconds` per output token (choose_serving()); kInvalidArgument for a model that is not a
/// decoder or a context beyond its positions.
ServingChoice analyze_serving_choice(const std::string& model, const DecoderRequest& request, double target_seconds,
                                     double reserve,
                                     const std::function<std::optional<double>(const std::string&)>& price_of);
/// The model's dtype for a training precision: the low-precision type of mixed precision (its
/// fp32 master weights and optimizer state are the optimizer step's); for fp32, fp32 unless a
/// dtype is asked for explicitly (then `asked`). kInvalidArgument when `asked_explicitly` names
/// another one under mixed precision ("--dtype fp32 contradicts --precision bf16-mixed (which
/// computes in bf16)").
DType training_model_dtype(Precision precision, DType asked, bool asked_explicitly);
/// --precision's default for training `models`: bf16-mixed when every one is a decoder LLM (a
/// preset or a config.json: they train in bf16 with fp32 master weights), fp32 otherwise.
Precision default_training_precision(const std::vector<std::string>& models);

/// kInvalidArgument for the first analysis that is mostly unmodeled (Analysis::mostly_unmodeled):
/// its totals mean nothing, so it is not a result. Partly unmodeled ones pass (their views say so).
void refuse_mostly_unmodeled(const std::vector<Analysis>& analyses);

}  // namespace neuralcost
