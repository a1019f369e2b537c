// What the measured parallel checks share (tensor_parallel_check.cpp): one request to the
// collectives worker and the rounds' figures (all three); which decoders the worker builds, the
// fields it builds them from and the layout the model predicts (the tensor- and pipeline-parallel
// checks).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/parallel/model_parallel.hpp"

namespace neuralcost::decoder_steps {

/// Why the worker's decoder (tensor_parallel_steps.build) cannot run `c` at `tokens` a sequence;
/// empty when it can.
std::string unbuilt_feature(const DecoderConfig& c, std::int64_t tokens);

/// The fields the worker builds its shard or stage from.
nlohmann::json worker_config(const DecoderConfig& c);

/// dp=1 × tp × pp in fp32 on a local system of tp · pp devices joined by `link`: m micro-batches of
/// b sequences of `tokens`, with or without sequence parallelism.
ModelParallelRequest layout(int tp, int pp, std::int64_t batch, std::int64_t tokens, std::int64_t micro_batches,
                            const std::string& optimizer, const InterconnectSpec& link, bool sequence_parallel = false);

/// model_parallel_step of `layout` for `config`: the counts, bytes and parameters the checks
/// compare, which no hardware changes (the graphs are analysed on a built-in CPU spec). Its errors
/// (a layout the model refuses) as they are.
ModelParallelStep predicted_step(const DecoderConfig& config, const ModelParallelRequest& layout);

/// Refuses (kInvalidArgument, naming `model`) a run whose ranks would need more than 3/4 of this
/// machine's memory: every rank's model states and activations by the model's ledger
/// (memory_upper_bytes of its stage, times tp), plus `extra_bytes` (the inputs the worker makes).
void check_fits_this_machine(const ModelParallelStep& step, int tp, double extra_bytes, const std::string& model);

/// Sends `request` to a fresh collectives worker and returns its reply; kNotFound without the
/// worker's Python, the worker's failure as one error starting with `what`. `notes` gets a sentence
/// for each sign that other work shared the machine meanwhile (other processes' CPU time, steal:
/// load_reasons), since the ranks' times then include it.
nlohmann::json run_worker(const nlohmann::json& request, double deadline_seconds, const std::string& option,
                          const std::string& what, std::vector<std::string>& notes);

/// The median of each round's values of `key` (a list a round), their median and 95 % interval.
RoundFigure figure(const nlohmann::json& rounds, const char* key);

}  // namespace neuralcost::decoder_steps
