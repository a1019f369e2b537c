// The `analyze` command's options and its runs, split by what they analyse: analyze_command.cpp
// (models, training steps, data parallelism, and the command's options), analyze_llm.cpp (decoder
// LLMs' generation, speculative decoding, serving, tensor parallelism, the LLM page) and
// analyze_parallel.cpp (systems and links; training over tensor and pipeline parallelism).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/models/decoder_variant.hpp"
#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/parallel/model_parallel.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost::cli {

struct AnalyzeArgs {
  std::vector<std::string> models;
  std::vector<std::int64_t> batches = {32};
  std::int64_t seq = 32;
  std::string phase = "prefill";
  std::int64_t prompt = 512;
  std::int64_t context = 1024;
  std::int64_t width = 128;
  std::int64_t depth = 2;
  std::string dtype = "fp32";
  std::string hardware = "h100-sxm";
  std::string format = "table";
  std::string output;
  std::vector<std::string> inputs;  // NAME=SHAPE
  std::vector<std::string> dims;    // NAME=VALUE
  bool structure_only = false;
  bool train = false;
  std::string parallel, zero = "ddp", system, link;
  bool search = false;
  std::int64_t global_batch = 0;           // --parallel with tp or pp: sequences a step over every replica
  bool sequence_parallel = false;          // Megatron's sequence parallelism with tp
  int virtual_stages = 1;                  // interleaved 1F1B: model chunks a device
  std::vector<std::int64_t> stage_layers;  // uneven pipeline stages: each stage's layers
  int devices = 0;                         // --search over dp × tp × pp layouts of this many devices
  std::string optimizer = "adam";
  std::string precision = "fp32";
  std::string checkpoint = "none";
  std::string memory_budget;
  std::string reserve = "10%";
  std::int64_t generate = 128;  // --phase generate: tokens generated after the prompt
  std::string price_per_hour;   // --phase generate: $ per million tokens
  std::string currency;
  std::string draft;  // speculative decoding: the draft model
  std::int64_t draft_tokens = 4;
  double acceptance = 0.7;
  double target_ms = 0;    // --target-ms-per-token: the cheapest system and tp that decode within it
  std::string price_file;  // with it: prices per hardware id
  DecoderVariant variant;  // decoders: --weights, --kv-cache, --mla, --routing
};

// analyze_llm.cpp: decoder LLMs
/// `analyze TARGET --draft DRAFT`: the speculative decoding estimate per batch.
void run_speculative(const AnalyzeArgs& args, const CLI::App& cmd, Format format);
/// `analyze MODEL --phase generate`: a whole generation per batch.
void run_generation(const AnalyzeArgs& args, const CLI::App& cmd, Format format);
/// `analyze DECODER --phase decode --context C --memory-budget M`: sequences served per tp degree.
void run_serving_capacity(const AnalyzeArgs& args, const CLI::App& cmd, Format format);
/// `analyze DECODER --parallel tp=N --system ID`: one prefill or decode step per batch over tp devices.
void run_tensor_parallel(const AnalyzeArgs& args, const CLI::App& cmd, Format format, const ParallelLayout& layout);
/// `analyze DECODER --target-ms-per-token T`: the cheapest system and tp degree that decode within it.
void run_serving_choice(const AnalyzeArgs& args, const CLI::App& cmd, Format format);
/// Whether the output is the LLM page (--format html, or -o *.html).
bool wants_html(const AnalyzeArgs& args, const CLI::App& cmd);
/// `analyze DECODER --format html`: the LLM page.
void run_decoder_page(const AnalyzeArgs& args, const CLI::App& cmd);

// analyze_parallel.cpp: systems, links and training over tensor and pipeline parallelism
/// --system and --link: the system (its device is the hardware) and the link inside its nodes.
std::pair<SystemSpec, InterconnectSpec> system_and_link(const AnalyzeArgs& args, const CLI::App& cmd);
/// --zero, the system and the links inside and across its nodes.
std::tuple<ZeroStage, SystemSpec, InterconnectSpec, InterconnectSpec> stage_and_links(const AnalyzeArgs& args,
                                                                                      const CLI::App& cmd);
/// A data-parallel training step's request from the options.
DataParallelRequest parallel_request(const AnalyzeArgs& args, const CLI::App& cmd, const ParallelLayout& layout);
/// --precision, or the models' default.
Precision training_precision(const AnalyzeArgs& args, const CLI::App& cmd);
/// `analyze DECODER --train --parallel dp=D,tp=T,pp=P --system ID` or `--search --devices N`.
void run_model_parallel(const AnalyzeArgs& args, const CLI::App& cmd, Format format,
                        const std::optional<ParallelLayout>& layout);

}  // namespace neuralcost::cli
