// The measured check of a pipeline-parallel step (`profile --train --pipeline-parallel N`, issue
// 26): real training steps of a Llama-family decoder cut into N stages (an even share of the layers
// each, the embedding on the first, the LM head and the loss on the last) in N local processes on
// torch.distributed (gloo), m micro-batches through the 1F1B schedule with point-to-point sends,
// against the prediction: the model's schedule (one_f_one_b: m × the busiest stage, the others'
// fill and drain, the transfers on the critical path on the link) on each stage's measured work
// (docs/distributed.md §9).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

struct PipelineParallelCheckRequest {
  std::string model;               ///< what `config` was read from (a preset or config.json; empty: built in)
  DecoderConfig config;            ///< the decoder (tensor_parallel_check_config(model))
  int ranks = 2;                   ///< pp: stages, one a process
  std::int64_t batch = 4;          ///< sequences a micro-batch
  std::int64_t tokens = 128;       ///< sequence length
  std::int64_t micro_batches = 4;  ///< m a step
  std::string optimizer = "sgd";
  int rounds = 7;  ///< each alternates `steps` steps through the pipeline with the stages' work alone
  int steps = 3;
  InterconnectSpec link;  ///< this machine's link (send/recv: its step latency and bus bandwidth)
  double deadline_seconds = 900;
};

struct PipelineParallelCheck {
  PipelineParallelCheckRequest request;
  std::string torch_version;
  std::vector<std::uint64_t> parameters, predicted_parameters;  ///< per stage: as run, by the stage's graph
  RoundFigure step;                       ///< seconds a step through the pipeline (its slowest rank's)
  RoundFigure overhead;                   ///< the step less its busiest stage's work alone (bubble, transfers, waits)
  std::vector<RoundFigure> stage_passes;  ///< per stage: its m forward and backward passes alone
  std::vector<RoundFigure> stage_optimizer;             ///< per stage: its optimizer step
  int transfers_per_step = 0, predicted_transfers = 0;  ///< sends of activations and gradients, all stages
  double transfer_bytes = 0, predicted_transfer_bytes = 0;
  double predicted_bubble_seconds = 0, predicted_p2p_seconds = 0, predicted_tied_seconds = 0;
  double predicted_step_seconds = 0;
  /// the predicted step less its busiest stage's measured work alone (passes and optimizer), as
  /// `overhead` is taken from the measured step
  double predicted_overhead_seconds = 0;
  std::vector<std::string> notes;
  /// nullopt when the measured overhead is not positive (the run cannot show a bubble)
  std::optional<double> overhead_error() const {
    if (overhead.median <= 0) return std::nullopt;
    return predicted_overhead_seconds / overhead.median - 1;
  }
  bool counts_equal() const {
    return transfers_per_step == predicted_transfers && transfer_bytes == predicted_transfer_bytes &&
           parameters == predicted_parameters;
  }
  double step_error() const { return step.median > 0 ? predicted_step_seconds / step.median - 1 : 0; }
};

/// The request's errors before anything slow runs (kInvalidArgument, one sentence naming the
/// value): fewer than 2 stages, layers that the stages do not divide, the decoders the worker does
/// not build (check_tensor_parallel_request's list), batch, tokens, micro-batches, rounds or steps
/// below 1, a link spec not calibrated on this machine, a layout the model refuses, and stages that
/// would need more than 3/4 of this machine's memory.
void check_pipeline_parallel_request(const PipelineParallelCheckRequest& request);

/// The prediction of `check` from its request and its stages' measured work: model_parallel_step
/// for dp=1, tp=1, pp=N (the transfers' time on the link, each stage's parameters, the tied
/// embedding's all-reduce), and one_f_one_b on each stage's measured passes a micro-batch, plus the
/// slowest optimizer step.
void predict_pipeline_parallel(PipelineParallelCheck& check);

/// Runs the steps (the collectives worker's `pp_steps`) and predicts them. The request's errors;
/// kNotFound without the worker's Python; a rank that dies (every rank stopped) as one error.
PipelineParallelCheck check_pipeline_parallel(const PipelineParallelCheckRequest& request);

}  // namespace neuralcost
