// The measured check of a tensor-parallel step (`profile --train --tensor-parallel N`, issue 26):
// real training steps of a Llama-family decoder split as Megatron-LM splits it (column- and
// row-parallel linears, vocabulary-parallel embedding and loss) in N local processes on
// torch.distributed (gloo), against the prediction from a calibrated link: the collectives
// model_parallel_step counts for that layout, on the link's measured α–β segments, added to the
// measured step without communication (docs/distributed.md §8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

struct TensorParallelCheckRequest {
  std::string model;     ///< what `config` was read from (a preset or config.json; empty: built in)
  DecoderConfig config;  ///< the decoder (tensor_parallel_check_config(model))
  int ranks = 2;         ///< tp
  /// Megatron's sequence parallelism: norms and residuals on 1/tp of the tokens, each all-reduce of
  /// the hidden states a reduce-scatter and an all-gather
  bool sequence_parallel = false;
  std::int64_t batch = 4;     ///< sequences a step (one micro-batch; every rank the same tokens)
  std::int64_t tokens = 128;  ///< sequence length
  std::string optimizer = "sgd";
  int rounds = 7;  ///< each alternates `steps` steps with and without communication
  int steps = 3;
  InterconnectSpec link;  ///< calibrated on this machine (its measured all-reduce over `ranks`)
  double deadline_seconds = 900;
};

struct TensorParallelCheck {
  TensorParallelCheckRequest request;
  std::string torch_version;
  std::uint64_t parameters = 0;            ///< elements on one rank, as run
  std::uint64_t predicted_parameters = 0;  ///< elements on one device, by the shard's graph
  RoundFigure step, compute, link, wait;   ///< seconds a step (as DataParallelCheck's)
  int collectives_per_step = 0;            ///< measured
  std::vector<double> call_bytes;          ///< the distinct sizes of the measured calls
  std::vector<std::string> collectives;    ///< the kinds measured ("all_reduce", "all_gather", ...)
  int predicted_calls = 0;
  double predicted_link_seconds = 0;  ///< the step's collectives on the calibrated link
  double predicted_step_seconds = 0;  ///< measured compute + predicted link (none overlapped)
  std::vector<std::string> notes;
  double step_error() const { return step.median > 0 ? predicted_step_seconds / step.median - 1 : 0; }
  double link_error() const { return link.median > 0 ? predicted_link_seconds / link.median - 1 : 0; }
};

/// The decoder `profile --train --tensor-parallel N` runs: `model` a preset or a config.json, or
/// empty for the built-in one (a Llama of 4 layers, hidden 256, 8 heads and 4 KV heads,
/// intermediate 704, vocabulary 4,096: a CPU step of about a tenth of a second, divisible by tp up
/// to 4). kInvalidArgument naming `option` when `model` is no decoder (a file missing, not JSON, not
/// a transformers config).
DecoderConfig tensor_parallel_check_config(const std::string& model, const std::string& option = "--tensor-parallel");

/// The request's errors before anything slow runs (kInvalidArgument, one sentence naming the
/// value): fewer than 2 ranks, a decoder the worker does not build (experts, latent attention,
/// LayerNorm or ungated MLPs, learned positions, a parallel residual, gemma2's extra norms and
/// soft-caps, partial rotary positions, quantized weights, a sliding window shorter than the
/// sequence), heads, KV heads or the intermediate size that tp does not divide, batch, tokens,
/// rounds or steps below 1, a link without a measured all-reduce over `ranks` (with sequence
/// parallelism also all-gather and reduce-scatter, and tokens that tp divides), a layout the model
/// refuses, and ranks that would need more than 3/4 of this machine's memory (the model's ledger).
void check_tensor_parallel_request(const TensorParallelCheckRequest& request);

/// The prediction of `check` from its request and measured compute: model_parallel_step's
/// tensor-parallel collectives for dp=1, tp=ranks, pp=1 in fp32 on the calibrated link (calls,
/// seconds, parameters per device), and the step as the measured step without communication plus
/// them (Megatron's collectives sit between the GEMMs that need them: none hides).
void predict_tensor_parallel(TensorParallelCheck& check);

/// Runs the steps (the collectives worker's `tp_steps`) and predicts them. The request's errors;
/// kNotFound without the worker's Python; a rank that dies (every rank stopped) as one error.
TensorParallelCheck check_tensor_parallel(const TensorParallelCheckRequest& request);

}  // namespace neuralcost
