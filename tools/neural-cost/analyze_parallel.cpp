// `analyze` over several devices: systems and links, and a decoder's training step over data,
// tensor and pipeline parallelism (analyze_args.hpp).
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/analyze_models.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/decoder_overview.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/parallel/serving_choice.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/report/cost.hpp"
#include "neuralcost/report/decoder_page.hpp"
#include "neuralcost/report/llm_views.hpp"
#include "neuralcost/report/model_parallel_views.hpp"
#include "neuralcost/report/parallel_views.hpp"
#include "neuralcost/report/report_views.hpp"
#include "neuralcost/report/training_views.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"

#include "analyze_args.hpp"

namespace neuralcost::cli {

/// --system and --link: the system (its device is the hardware) and the link inside its nodes.
std::pair<SystemSpec, InterconnectSpec> system_and_link(const AnalyzeArgs& args, const CLI::App& cmd) {
  if (args.system.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "--parallel and --search --devices need --system (the devices and their links; `neural-cost hardware "
                "systems` lists them)");
  }
  if (cmd.count("--hardware") > 0) {
    throw Error(ErrorCode::kInvalidArgument, "--hardware does not apply with --system (the system names its device)");
  }
  const SystemSpec& system = find_system(args.system);
  return {system, find_interconnect(args.link.empty() ? system.intra_node : args.link)};
}

/// --zero, --system and --link: the ZeRO stage, the system, and its links inside and between nodes.
std::tuple<ZeroStage, SystemSpec, InterconnectSpec, InterconnectSpec> stage_and_links(const AnalyzeArgs& args,
                                                                                      const CLI::App& cmd) {
  const auto stage = zero_stage_from_name(args.zero);
  if (!stage) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--zero '{}' is not one of ddp, zero1, zero2, zero3, fsdp", args.zero));
  }
  auto [system, intra] = system_and_link(args, cmd);
  InterconnectSpec inter = find_interconnect(system.inter_node);
  return {*stage, std::move(system), std::move(intra), std::move(inter)};
}

/// --parallel dp=N, --zero, --system, --link: the data-parallel request (checked by the library).
DataParallelRequest parallel_request(const AnalyzeArgs& args, const CLI::App& cmd, const ParallelLayout& layout) {
  if (!args.train) {
    throw Error(ErrorCode::kInvalidArgument,
                "--parallel dp=N applies only with --train (tp=N is for a decoder's prefill or decode)");
  }
  if (cmd.count("--memory-budget") > 0 || cmd.count("--reserve") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--memory-budget does not apply with --parallel: each device's memory is judged against the "
                "system's device (its share of the model states under --zero); --search ranks the layouts that fit");
  }
  DataParallelRequest r;
  r.ranks = layout.dp;
  std::tie(r.stage, r.system, r.intra, r.inter) = stage_and_links(args, cmd);
  return r;
}

/// --precision as given, else the library's default for the models (a decoder's bf16-mixed).
Precision training_precision(const AnalyzeArgs& args, const CLI::App& cmd) {
  return cmd.count("--precision") > 0 ? parse_precision(args.precision) : default_training_precision(args.models);
}

/// `analyze DECODER --train --parallel dp=D,tp=T,pp=P --system ID` (one step) or `--search
/// --devices N` (every layout): a decoder's training step over data, tensor and pipeline parallelism.
void run_model_parallel(const AnalyzeArgs& args, const CLI::App& cmd, const Format format,
                        const std::optional<ParallelLayout>& layout) {
  if (!args.train) {
    throw Error(ErrorCode::kInvalidArgument,
                "--parallel with pp applies only with --train (tp=N alone is a decoder's prefill or decode)");
  }
  refuse_given(cmd,
               {"--memory-budget", "--reserve", "--hardware", "--seq", "--width", "--depth", "--input", "--dim",
                "--structure-only", "--context", "--phase"},
               " does not apply to a training step over tensor or pipeline parallelism (--batch is the micro-batch, "
               "--prompt the tokens a sequence, --system the devices)");
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "tensor and pipeline parallelism need exactly one model (a decoder preset or config.json)");
  }
  if (args.checkpoint != "none" && args.checkpoint != "full") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--checkpoint {}: with tensor or pipeline parallelism none or full (each layer keeps its "
                            "input and recomputes its forward pass)",
                            args.checkpoint));
  }
  if (cmd.count("--global-batch") > 0 && args.global_batch == 0) {
    throw Error(ErrorCode::kInvalidArgument, "--global-batch 0 must be a positive integer below 2^31");
  }
  ModelParallelRequest r;
  r.training.optimizer = parse_optimizer(args.optimizer);
  r.training.precision = training_precision(args, cmd);
  r.recompute = args.checkpoint == "full";
  r.dtype = training_model_dtype(r.training.precision, *parse_dtype(args.dtype), cmd.count("--dtype") > 0);
  r.tokens = args.prompt;
  r.global_batch = args.global_batch;
  r.virtual_stages = args.virtual_stages;
  r.stage_layers = args.stage_layers;
  std::tie(r.stage, r.system, r.intra, r.inter) = stage_and_links(args, cmd);
  ShardCostCache costs =
      model_parallel_costs(args.models.front(), HardwareDatabase::builtin().get(r.system.device), args.variant.routing);
  const std::string base = args.models.front().substr(args.models.front().find_last_of('/') + 1);
  const std::string name = fmt::format("{} (training on {} tokens)", base, args.prompt);
  if (args.search && cmd.count("--devices") == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--search over tensor, pipeline and expert parallelism takes --devices N and tries every layout: "
                "leave out --parallel");
  }
  if (args.search) {
    refuse_given(cmd,
                 {"--parallel", "--zero", "--virtual-stages", "--stage-layers", "--checkpoint", "--sequence-parallel"},
                 " does not apply with --search --devices (it tries every layout, ZeRO stage, recomputation and "
                 "sequence parallelism)");
    const std::vector<std::int64_t> micro =
        cmd.count("--batch") > 0 ? args.batches : std::vector<std::int64_t>{1, 2, 4, 8};
    emit(render_model_parallel_search(name, search_model_parallel(costs, r, args.devices, micro), args.devices, 20,
                                      format),
         args.output);
    return;
  }
  if (cmd.count("--devices") > 0) throw Error(ErrorCode::kInvalidArgument, "--devices applies only with --search");
  if (args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, "--parallel with tp or pp takes one --batch (the micro-batch)");
  }
  r.dp = layout->dp;
  r.tp = layout->tp;
  r.pp = layout->pp;
  r.ep = layout->ep;
  r.sequence_parallel = args.sequence_parallel;
  r.micro_batch = cmd.count("--batch") > 0 ? args.batches.front() : 1;
  emit(render_model_parallel(name, model_parallel_step(costs, r), format), args.output);
}

}  // namespace neuralcost::cli
