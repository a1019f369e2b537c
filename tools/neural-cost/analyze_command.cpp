// `neural-cost analyze`: static roofline analysis of one model, or of all five reference
// networks when no model is named.
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

namespace neuralcost::cli {
namespace {

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
  std::int64_t global_batch = 0;  // --parallel with tp or pp: sequences a step over every replica
  int virtual_stages = 1;         // interleaved 1F1B: model chunks a device
  int devices = 0;                // --search over dp × tp × pp layouts of this many devices
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

/// Splits "NAME=VALUE" at the last '=' (input names may contain '=' only before it).
std::pair<std::string, std::string> binding(const std::string& text, const char* option) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} '{}' must look like NAME=VALUE", option, text));
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::int64_t positive_int(const std::string& text, const std::string& what) {
  try {
    const Shape one = parse_shape(text, what);  // the library's parser: one positive dimension
    if (one.size() == 1) return one.front();
  } catch (const Error&) {
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is not a positive integer", what, text));
}

/// `analyze TARGET --draft DRAFT`: the speculative decoding estimate per batch.
void run_speculative(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  for (const char* option :
       {"--train", "--prompt", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only", "--generate",
        "--price-per-hour", "--currency", "--parallel", "--zero", "--system", "--link"}) {
    if (cmd.count(option) > 0)
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} does not apply with --draft", option));
  }
  if (cmd.count("--phase") > 0 && args.phase != "decode") {
    throw Error(ErrorCode::kInvalidArgument, "--draft estimates decode steps: --phase must be decode (or left out)");
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--draft needs exactly one target model (a decoder preset or config.json)");
  }
  std::vector<SpeculativeEstimate> estimates;
  SpeculativeRequest request;
  request.target = args.models.front();
  request.draft = args.draft;
  request.context = args.context;
  request.draft_tokens = args.draft_tokens;
  request.acceptance = args.acceptance;
  request.variant = args.variant;
  if (cmd.count("--dtype") > 0) request.dtype = parse_dtype(args.dtype);
  request.hardware = hardware_for(args.hardware);
  for (const std::int64_t batch : args.batches) {
    request.batch = batch;
    estimates.push_back(analyze_speculative(request));
  }
  emit(render_speculative(estimates, format), args.output);
}

/// `analyze MODEL --phase generate`: a whole generation per batch.
void run_generation(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  for (const char* option :
       {"--train", "--context", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only", "--draft-tokens",
        "--acceptance", "--parallel", "--zero", "--system", "--link"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} does not apply with --phase generate", option));
    }
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--phase generate needs exactly one model (a decoder preset or config.json)");
  }
  GenerationRequest request;
  request.model = args.models.front();
  request.prompt = args.prompt;
  request.generate = args.generate;
  request.variant = args.variant;
  if (cmd.count("--dtype") > 0) request.dtype = parse_dtype(args.dtype);
  request.hardware = hardware_for(args.hardware);
  std::vector<GenerationEstimate> estimates;
  for (const std::int64_t batch : args.batches) {
    request.batch = batch;
    estimates.push_back(analyze_generation(request));
  }
  std::optional<PriceList> prices;
  if (!args.price_per_hour.empty()) {
    prices = PriceList{};
    prices->per_hour = parse_price_per_hour(args.price_per_hour, "--price-per-hour");
    prices->origin = "--price-per-hour";
    if (!args.currency.empty()) prices->currency = args.currency;
  } else if (!args.currency.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "--currency applies only with --price-per-hour");
  }
  emit(render_generation(estimates, format, prices), args.output);
}

/// --system and --link: the system (its device is the hardware) and the link inside its nodes.
std::pair<SystemSpec, InterconnectSpec> system_and_link(const AnalyzeArgs& args, const CLI::App& cmd) {
  if (args.system.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "--parallel needs --system (the devices and their links; `neural-cost hardware systems` lists them)");
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
  for (const char* option : {"--memory-budget", "--reserve", "--hardware", "--seq", "--width", "--depth", "--input",
                             "--dim", "--structure-only", "--context", "--phase"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply to a training step over tensor or pipeline parallelism (--batch is "
                              "the micro-batch, --prompt the tokens a sequence, --system the devices)",
                              option));
    }
  }
  if (cmd.count("--routing") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--routing does not apply to a training step over tensor or pipeline parallelism (its shards' "
                "costs are per layer kind, not per layer's routing)");
  }
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
  ModelParallelRequest r;
  r.training.optimizer = parse_optimizer(args.optimizer);
  r.training.precision = training_precision(args, cmd);
  r.recompute = args.checkpoint == "full";
  r.dtype = training_model_dtype(r.training.precision, *parse_dtype(args.dtype), cmd.count("--dtype") > 0);
  r.tokens = args.prompt;
  r.global_batch = args.global_batch;
  r.virtual_stages = args.virtual_stages;
  std::tie(r.stage, r.system, r.intra, r.inter) = stage_and_links(args, cmd);
  ShardCostCache costs = model_parallel_costs(args.models.front(), HardwareDatabase::builtin().get(r.system.device));
  const std::string base = args.models.front().substr(args.models.front().find_last_of('/') + 1);
  const std::string name = fmt::format("{} (training on {} tokens)", base, args.prompt);
  if (args.search) {
    for (const char* option : {"--parallel", "--zero", "--virtual-stages", "--checkpoint"}) {
      if (cmd.count(option) > 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{} does not apply with --search --devices (it tries every layout, ZeRO stage and "
                                "recomputation)",
                                option));
      }
    }
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
  r.micro_batch = cmd.count("--batch") > 0 ? args.batches.front() : 1;
  emit(render_model_parallel(name, model_parallel_step(costs, r), format), args.output);
}

/// `analyze DECODER --phase decode --context C --memory-budget M`: sequences served per tp degree.
void run_serving_capacity(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  if (args.phase != "decode") {
    throw Error(ErrorCode::kInvalidArgument, "--memory-budget applies with --train or with --phase decode");
  }
  for (const char* option : {"--hardware", "--zero", "--link", "--seq", "--width", "--depth", "--input", "--dim",
                             "--structure-only", "--prompt"}) {
    if (cmd.count(option) > 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{} does not apply with --phase decode --memory-budget (it counts bytes per device)", option));
    }
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--memory-budget with --phase decode needs exactly one model (a decoder preset or config.json)");
  }
  if (cmd.count("--batch") > 0 && args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--memory-budget with --phase decode takes one --batch (the sequences to serve)");
  }
  const std::int64_t batch = cmd.count("--batch") > 0 ? args.batches.front() : 1;
  const int max_tp = args.system.empty() ? 8 : find_system(args.system).devices_per_node;
  const DType dtype = cmd.count("--dtype") > 0 ? *parse_dtype(args.dtype) : DType::kBf16;
  const std::uint64_t budget = parse_memory_size(args.memory_budget);
  const double reserve = parse_reserve(args.reserve);
  emit(render_serving_capacity(args.models.front(), args.context, batch, budget, reserve,
                               analyze_serving_capacity(args.models.front(), dtype, args.context, budget, reserve,
                                                        max_tp, batch, args.variant),
                               format),
       args.output);
}

/// `analyze DECODER --parallel tp=N --system ID`: one prefill or decode step per batch over tp devices.
void run_tensor_parallel(const AnalyzeArgs& args, const CLI::App& cmd, const Format format,
                         const ParallelLayout& layout) {
  if (layout.dp > 1) {
    throw Error(ErrorCode::kUnimplemented, "--parallel dp=N,tp=N together is not built yet: one of them");
  }
  for (const char* option : {"--memory-budget", "--reserve"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply with --parallel tp=N (--phase decode --memory-budget without "
                              "--parallel lists every tp)",
                              option));
    }
  }
  for (const char* option :
       {"--zero", "--search", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} does not apply with --parallel tp=N", option));
    }
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--parallel tp=N needs exactly one model (a decoder preset or config.json)");
  }
  const auto [system, link] = system_and_link(args, cmd);
  const HardwareSpec& hardware = HardwareDatabase::builtin().get(system.device);
  std::vector<TensorParallelStep> steps;
  for (std::int64_t batch : args.batches) {
    DecoderRequest r;
    r.phase = args.phase == "decode" ? DecoderPhase::kDecode : DecoderPhase::kPrefill;
    r.batch = batch;
    r.prompt = args.prompt;
    r.context = args.context;
    r.variant = args.variant;
    if (cmd.count("--dtype") > 0) r.dtype = *parse_dtype(args.dtype);
    steps.push_back(
        analyze_tensor_parallel(args.models.front(), r, layout.tp, hardware, link, system.devices_per_node));
  }
  emit(render_tensor_parallel(steps, system, link, format), args.output);
}

/// `analyze DECODER --phase decode --target-ms-per-token T [--price-file F | --price-per-hour P]`:
/// every built-in system at every tp, the cheapest that decodes within T.
void run_serving_choice(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  if (args.phase != "decode")
    throw Error(ErrorCode::kInvalidArgument, "--target-ms-per-token applies with --phase decode");
  for (const char* option :
       {"--hardware", "--system", "--link", "--parallel", "--memory-budget", "--train", "--zero", "--search", "--seq",
        "--width", "--depth", "--input", "--dim", "--structure-only", "--prompt"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply with --target-ms-per-token (it tries every built-in system and "
                              "each device's own memory)",
                              option));
    }
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--target-ms-per-token needs exactly one model (a decoder preset or config.json)");
  }
  if (args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, "--target-ms-per-token takes one --batch (the sequences served at once)");
  }
  if (!(args.target_ms > 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--target-ms-per-token {} must be more than 0 milliseconds", args.target_ms));
  }
  PriceList prices;
  if (!args.price_file.empty()) prices = load_price_file(args.price_file);
  if (!args.price_per_hour.empty()) {
    prices.per_hour = parse_price_per_hour(args.price_per_hour, "--price-per-hour");
    if (prices.origin.empty()) prices.origin = "--price-per-hour";
  }
  if (!args.currency.empty()) {
    if (args.price_per_hour.empty())
      throw Error(ErrorCode::kInvalidArgument, "--currency applies only with --price-per-hour");
    prices.currency = args.currency;
  }
  DecoderRequest r;
  r.phase = DecoderPhase::kDecode;
  r.batch = cmd.count("--batch") > 0 ? args.batches.front() : 1;
  r.context = args.context;
  r.variant = args.variant;
  if (cmd.count("--dtype") > 0) r.dtype = *parse_dtype(args.dtype);
  const double reserve = parse_reserve(args.reserve);
  const ServingChoice choice = analyze_serving_choice(args.models.front(), r, args.target_ms / 1000, reserve,
                                                      [&](const std::string& id) { return prices.price_for(id); });
  emit(render_serving_choice(args.models.front(), r, args.target_ms / 1000, reserve, choice, prices.currency,
                             prices.origin, format),
       args.output);
}

/// Whether the output is the LLM page: --format html, or -o FILE.html without --format.
bool wants_html(const AnalyzeArgs& args, const CLI::App& cmd) {
  if (cmd.count("--format") > 0) return args.format == "html";
  const std::string& o = args.output;
  return o.size() > 5 && (o.compare(o.size() - 5, 5, ".html") == 0 || o.compare(o.size() - 4, 4, ".htm") == 0);
}

/// `analyze DECODER --format html`: the decoder's LLM page.
void run_decoder_page(const AnalyzeArgs& args, const CLI::App& cmd) {
  for (const char* option : {"--phase",         "--generate",       "--train",
                             "--optimizer",     "--precision",      "--checkpoint",
                             "--memory-budget", "--reserve",        "--target-ms-per-token",
                             "--price-file",    "--price-per-hour", "--currency",
                             "--parallel",      "--zero",           "--search",
                             "--system",        "--link",           "--draft",
                             "--draft-tokens",  "--acceptance",     "--seq",
                             "--width",         "--depth",          "--input",
                             "--dim",           "--structure-only"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply with --format html (the LLM page of one decoder: both phases, "
                              "--batch, --prompt, --context, --dtype, --weights, --hardware)",
                              option));
    }
  }
  if (args.models.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--format html needs exactly one model, a decoder preset or config.json (its LLM page)");
  }
  DecoderOverviewRequest request;
  request.model = args.models.front();
  if (cmd.count("--batch") > 0) request.batches = args.batches;
  request.prompt = args.prompt;
  request.context = args.context;
  request.variant = args.variant;
  if (cmd.count("--dtype") > 0) request.dtype = *parse_dtype(args.dtype);
  request.hardware = hardware_for(args.hardware);
  const DecoderOverview overview = analyze_decoder_overview(request);
  emit(render_decoder_page(overview, load_vega_script(vega_directory())), args.output);
}

void run_analyze(const AnalyzeArgs& args, const CLI::App& cmd) {
  const auto dtype = parse_dtype(args.dtype);
  const auto& compute = compute_dtypes();
  if (!dtype || std::find(compute.begin(), compute.end(), *dtype) == compute.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--dtype '{}' is not one of fp64, fp32, tf32, fp16, bf16, int8, fp8", args.dtype));
  }
  if (wants_html(args, cmd)) return run_decoder_page(args, cmd);
  const Format format = output_format(cmd, args.format, args.output);
  if (!args.draft.empty()) return run_speculative(args, cmd, format);
  if (cmd.count("--target-ms-per-token") > 0) return run_serving_choice(args, cmd, format);
  if (cmd.count("--price-file") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--price-file applies only with --target-ms-per-token (the cost command prices measured runs)");
  }
  if (args.phase == "generate") return run_generation(args, cmd, format);
  for (const char* option : {"--price-per-hour", "--currency"}) {
    if (cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} applies only with --phase generate (the cost command prices measured runs)", option));
    }
  }
  if (cmd.count("--generate") > 0)
    throw Error(ErrorCode::kInvalidArgument, "--generate applies only with --phase generate");
  for (const char* option : {"--draft-tokens", "--acceptance"}) {
    if (cmd.count(option) > 0)
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} applies only with --draft", option));
  }
  if (!args.variant.weights.empty()) parse_weight_quantization(args.variant.weights);  // a bad format is named first
  if (args.train && cmd.count("--weights") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--weights does not apply with --train: training quantized weights (QLoRA and the like) is not "
                "modeled");
  }
  if (!args.variant.kv_cache.empty()) with_kv_cache(DecoderConfig{}, args.variant.kv_cache);
  if (args.train && cmd.count("--mla") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--mla does not apply with --train: a training step computes latent attention as transformers does");
  }
  if (args.train && cmd.count("--kv-cache") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--kv-cache does not apply with --train: a training step keeps no KV cache");
  }
  TrainingOptions training;
  std::optional<ParallelLayout> layout;
  if (!args.parallel.empty()) layout = parse_parallel_layout(args.parallel);
  if (layout && layout->ep > 1 && !args.train) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--parallel ep={} applies only with --train (a mixture of experts' training step)", layout->ep));
  }
  if (cmd.count("--devices") > 0 && !args.search) {
    throw Error(ErrorCode::kInvalidArgument, "--devices applies only with --search");
  }
  if ((layout && (layout->pp > 1 || layout->ep > 1 || (layout->tp > 1 && args.train))) ||
      (args.search && cmd.count("--devices") > 0)) {
    return run_model_parallel(args, cmd, format, layout);
  }
  for (const char* option : {"--global-batch", "--virtual-stages"}) {
    if (cmd.count(option) > 0) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{} applies only with --train and --parallel tp=N or pp=N (or --search --devices N)", option));
    }
  }
  if (layout && layout->tp > 1) return run_tensor_parallel(args, cmd, format, *layout);
  if (!args.train && !args.memory_budget.empty() && !layout) return run_serving_capacity(args, cmd, format);
  for (const char* option : {"--optimizer", "--precision", "--checkpoint", "--memory-budget", "--reserve"}) {
    if (!args.train && cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} applies only with --train", option));
    }
  }
  DType model_dtype = *dtype;
  if (args.train) {
    training.optimizer = parse_optimizer(args.optimizer);
    training.precision = training_precision(args, cmd);
    training.checkpoint = parse_checkpoint(args.checkpoint);
    if (cmd.count("--reserve") > 0 && args.memory_budget.empty()) {
      throw Error(ErrorCode::kInvalidArgument, "--reserve applies only with --memory-budget");
    }
    model_dtype = training_model_dtype(training.precision, *dtype, cmd.count("--dtype") > 0);
  }
  for (const char* option : {"--zero", "--system", "--link", "--search"}) {
    if (args.parallel.empty() && cmd.count(option) > 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} applies only with --parallel", option));
    }
  }
  AnalyzeRequest request;
  std::optional<DataParallelRequest> parallel;
  if (layout) parallel = parallel_request(args, cmd, *layout);
  request.hardware = parallel ? HardwareDatabase::builtin().get(parallel->system.device) : hardware_for(args.hardware);
  ModelRequest base;
  base.seq = args.seq;
  base.width = args.width;
  base.depth = args.depth;
  base.dtype = model_dtype;
  base.structure_only = args.structure_only;
  base.phase = args.phase;
  base.prompt = args.prompt;
  base.context = args.context;
  base.variant = args.variant;
  for (const char* option : {"batch", "seq", "width", "depth", "dtype", "phase", "prompt", "context", "weights",
                             "kv-cache", "mla", "routing"}) {
    if (cmd.count(std::string("--") + option) > 0) base.given.insert(option);
  }
  // a training precision sets the model's dtype (a decoder's own default is bf16)
  const bool decoders = default_training_precision(args.models) == Precision::kBf16Mixed;
  if (model_dtype != *dtype || (args.train && decoders)) base.given.insert("dtype");
  for (const std::string& b : args.inputs) {
    const auto [name, shape_text] = binding(b, "--input");
    const Shape shape = parse_shape(shape_text, fmt::format("--input '{}'", b));
    base.named_inputs[name] = shape;
  }
  for (const std::string& b : args.dims) {
    const auto [name, value] = binding(b, "--dim");
    base.dims[name] = positive_int(value, "--dim " + b);
  }
  if (args.search) {
    // every ZeRO stage × batch × checkpoint policy of one model over the devices
    if (cmd.count("--zero") > 0)
      throw Error(ErrorCode::kInvalidArgument, "--zero does not apply with --search (it tries each)");
    if (args.models.size() != 1) throw Error(ErrorCode::kInvalidArgument, "--search needs exactly one model");
    const std::vector<std::int64_t> batches =
        cmd.count("--batch") > 0 ? args.batches : std::vector<std::int64_t>{1, 2, 4, 8, 16, 32};
    std::vector<CheckpointPolicy> policies = {training.checkpoint};
    if (cmd.count("--checkpoint") == 0) policies = {parse_checkpoint("none"), parse_checkpoint("full")};
    request.models = model_requests(base, args.models, batches);
    std::vector<TrainingReport> reports;
    for (const CheckpointPolicy& policy : policies) {
      request.train = training;
      request.train->checkpoint = policy;
      for (TrainingReport& r : analyze_models(request).reports) reports.push_back(std::move(r));
    }
    emit(render_data_parallel_search(reports, rank_data_parallel(reports, *parallel), *parallel, format), args.output);
    return;
  }
  request.models = model_requests(base, args.models.empty() ? reference_model_names() : args.models, args.batches);
  if (args.train) request.train = training;
  if (!args.memory_budget.empty()) {
    request.memory_budget = parse_memory_size(args.memory_budget);
    request.reserve = parse_reserve(args.reserve);
  }
  const AnalyzeResults results = analyze_models(request);
  const std::vector<Analysis>& analyses = results.analyses;
  const std::vector<TrainingReport>& reports = results.reports;
  if (parallel) {
    std::vector<DataParallelStep> steps;
    for (const TrainingReport& r : reports) steps.push_back(data_parallel_step(r, *parallel));
    emit(render_data_parallel(reports, steps, *parallel, format), args.output);
  } else if (args.train) {
    emit(reports.size() > 1 ? render_training_summary(reports, format) : render_training(reports.front(), format),
         args.output);
  } else if (analyses.size() > 1) {
    emit(render_summary(analyses, format), args.output);
  } else {
    emit(render_analysis(analyses.front(), format), args.output);
  }
  // a report that is mostly unmodeled is not a result: say so last and fail
  for (const Analysis& a : analyses) {
    if (!a.complete() && ((format != Format::kTable && format != Format::kMarkdown) || analyses.size() > 1)) {
      fmt::print(stderr, "warning: {}: {} op(s) not modeled; totals are incomplete (see \"unmodeled\")\n",
                 terminal_text(a.model), a.unmodeled.size());
    }
  }
  refuse_mostly_unmodeled(analyses);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  CLI::App* cmd =
      app.add_subcommand("analyze",
                         "Per-layer FLOPs, bytes, arithmetic intensity, limiting roof and lower-bound time.\n"
                         "Without a model: a summary of the five reference networks.");
  cmd->add_option("model,--model", args->models,
                  "Models, comma-separated: ff, cnn, rnn, lstm, transformer, ONNX files, decoder configs (config.json) "
                  "or decoder presets (llama-2-7b, llama-3-8b, ...; omit for all five networks; several: a summary)")
      ->delimiter(',');
  cmd->add_option("--input", args->inputs, "ONNX: shape of a graph input, NAME=1x3x224x224 (repeatable)");
  cmd->add_option("--dim", args->dims, "ONNX: value of a symbolic dimension, NAME=32 (repeatable)");
  cmd->add_flag("--structure-only", args->structure_only,
                "ONNX: do not check or read external weight files (shapes only)");
  cmd->add_option("--batch", args->batches,
                  "Samples per forward pass, comma-separated (several: a summary). ONNX: binds a symbolic leading "
                  "dimension of the first input (default 32); a file that fixes its batch uses its own")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seq", args->seq, "Sequence length (rnn, lstm, transformer; not ONNX)")->capture_default_str();
  cmd->add_option("--width", args->width, "Hidden width d (cnn: channels of the last stage)")->capture_default_str();
  cmd->add_option("--depth", args->depth, "Hidden blocks / conv stages / layers")->capture_default_str();
  cmd->add_option("--phase", args->phase,
                  "Decoder LLMs (a config.json or a preset such as llama-3-8b): prefill (the prompt, time to first "
                  "token), decode (one token per sequence over a KV cache, time per output token) or generate (a "
                  "prefill and every decode step of --generate tokens, summed exactly)")
      ->capture_default_str();
  cmd->add_option("--prompt", args->prompt, "Decoder prefill: prompt tokens per sequence")->capture_default_str();
  cmd->add_option("--context", args->context, "Decoder decode: tokens already in the KV cache")->capture_default_str();
  cmd->add_option("--generate", args->generate, "Decoder generate: tokens generated after the prompt")
      ->capture_default_str();
  cmd->add_option("--price-per-hour", args->price_per_hour,
                  "Decoder generate: the hardware's price per hour: cost per million prompt and generated tokens "
                  "(at least, from the bounds); with --target-ms-per-token: the price of a device-hour the price "
                  "file does not list");
  cmd->add_option("--currency", args->currency, "With --price-per-hour: the currency label (default USD)");
  cmd->add_option("--weights", args->variant.weights,
                  "Decoder LLMs: the blocks' linear weights stored quantized and dequantized to --dtype: int8, "
                  "int8-gN, int4 (AWQ: groups of 128, fp16 scales, 4-bit zeros), int4-gN, int4-channel, int4-sym, "
                  "gptq-int4, gptq-int8, fp8, fp8-block128, nvfp4, mxfp4, nf4, nf4-dq, bnb-fp4 (default: the "
                  "config's quantization_config, else none)");
  cmd->add_option("--kv-cache", args->variant.kv_cache,
                  "Decoder LLMs: the KV cache's storage: fp8 (e4m3) or int8 with per-tensor scales, as vLLM's and "
                  "TensorRT-LLM's quantized caches, or fp16, bf16, fp32 (default: --dtype)");
  cmd->add_option("--mla", args->variant.mla,
                  "Decoder LLMs with multi-head latent attention (deepseek_v3): absorbed (a decode step absorbs "
                  "kv_b_proj into the query and output and reads the latent cache as stored, as DeepSeek's inference "
                  "code, vLLM and FlashMLA do) or expanded (every step expands the cache through kv_b_proj, as "
                  "transformers does; the default)");
  cmd->add_option("--routing", args->variant.routing,
                  "Decoder LLMs with experts: a routing histogram (JSON: the tokens each expert took per layer, "
                  "docs/llm.md \"A measured routing\"), so that the experts' weights a step reads are those a step's "
                  "tokens reach under that routing, not under uniform routing");
  cmd->add_option("--dtype", args->dtype,
                  "Compute dtype: fp64, fp32, tf32, fp16, bf16, int8, fp8 (ONNX: every floating-point tensor is "
                  "counted in it)")
      ->capture_default_str();
  cmd->add_option("--hardware", args->hardware,
                  "Built-in hardware id or alias (see `hardware list`), a spec JSON file, host (this machine, "
                  "calibrated) or host-spec (its theoretical peaks)")
      ->capture_default_str();
  cmd->add_flag("--train", args->train,
                "Analyse one training step (forward, loss, backward, optimizer) instead of a forward pass "
                "(docs/counting.md \"Training\")");
  cmd->add_option("--optimizer", args->optimizer, "With --train: sgd, momentum, adam or adamw")->capture_default_str();
  cmd->add_option("--precision", args->precision,
                  "With --train: fp32, bf16-mixed or fp16-mixed (low-precision model, fp32 master weights and states; "
                  "profile --train measures bf16-mixed as torch.autocast runs it). Default: bf16-mixed for a decoder "
                  "LLM, fp32 otherwise (fp32 computes in fp32 unless --dtype says otherwise)")
      ->capture_default_str();
  cmd->add_option("--checkpoint", args->checkpoint,
                  "With --train: activation checkpointing: none, full, every:K, every (K = square root of the op "
                  "count) or selective")
      ->capture_default_str();
  cmd->add_option("--memory-budget", args->memory_budget,
                  "With --train: the device memory, e.g. 24GB or 80GiB: prints the largest batch whose step fits; with "
                  "--phase decode (a decoder): the sequences of --context tokens each tensor-parallel degree serves");
  cmd->add_option("--target-ms-per-token", args->target_ms,
                  "With --phase decode (a decoder): every built-in system at every tensor-parallel degree, the "
                  "decode step's bound per output token at --batch and --context, whether it fits each device's "
                  "memory, and the cheapest that meets this target (with --price-file or --price-per-hour)");
  cmd->add_option("--price-file", args->price_file,
                  "With --target-ms-per-token: prices per device-hour by hardware id (docs/json-schema.md#price-file)");
  cmd->add_option("--reserve", args->reserve,
                  "With --memory-budget or --target-ms-per-token: the share of memory kept free (fragmentation, "
                  "workspace), 10% or 0.1")
      ->capture_default_str();
  cmd->add_option("--parallel", args->parallel,
                  "With --train: a data-parallel step, dp=N devices (per-device batch --batch): its collectives on "
                  "--system's links, overlapped as DDP or ZeRO do, and per-device memory; a decoder's dp=D,tp=T,pp=P: "
                  "Megatron's tensor split and 1F1B pipeline (--batch the micro-batch, --global-batch, "
                  "--virtual-stages, --checkpoint full), with ,ep=E a mixture of experts' experts split over E of the "
                  "dp replicas (all-to-alls); without --train, tp=N: a decoder's prefill or decode");
  cmd->add_option("--global-batch", args->global_batch,
                  "With --parallel tp/pp or --search --devices: sequences a step over every replica (micro-batches = "
                  "global batch / (dp × micro-batch); default one micro-batch)");
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "With --parallel pp=N: model chunks a device (Megatron's interleaved 1F1B; bubble / v)")
      ->capture_default_str();
  cmd->add_option("--devices", args->devices,
                  "With --train --search (a decoder): every dp × tp × pp layout of this many devices, micro-batch "
                  "(--batch, default 1,2,4,8), recomputation and ZeRO stage (ddp, zero1), ranked by step time among "
                  "those that fit");
  cmd->add_option("--zero", args->zero,
                  "With --parallel: ddp (replicated), zero1 (optimizer state sharded), zero2 (+ gradients), zero3 / "
                  "fsdp (+ parameters)")
      ->capture_default_str();
  cmd->add_flag("--search", args->search,
                "With --parallel dp=N: every ZeRO stage × per-device batch (--batch, default 1,2,4,8,16,32) × "
                "checkpoint policy (--checkpoint, default none and full), ranked by samples/s among those that fit; "
                "with --devices N (a decoder): every dp × tp × pp layout");
  cmd->add_option("--system", args->system,
                  "With --parallel or --search --devices: the system (its device, devices per node, links; "
                  "`neural-cost hardware systems`)");
  cmd->add_option("--link", args->link,
                  "With --parallel: the link inside a node instead of the system's: an interconnect id or a spec file "
                  "written by `hardware calibrate --collectives --spec-output`");
  cmd->add_option("--draft", args->draft,
                  "Speculative decoding: the draft decoder (a preset or config.json) for the one target model; prints "
                  "per batch the draft, verify and target steps' bounds, the tokens per round and the speedup");
  cmd->add_option("--draft-tokens", args->draft_tokens, "With --draft: tokens drafted per round (gamma, 1 to 64)")
      ->capture_default_str();
  cmd->add_option("--acceptance", args->acceptance,
                  "With --draft: the chance each drafted token is accepted (alpha, 0 to 1)")
      ->capture_default_str();
  add_format_option(*cmd, args->format, "html (one decoder: its LLM page, with charts)");
  cmd->add_option("-o,--output", args->output,
                  "Write to this file (atomically) instead of stdout; without --format, the format follows its "
                  "extension (.json, .csv, .md, .html)");
  cmd->callback([args, cmd] { run_analyze(*args, *cmd); });
}

}  // namespace neuralcost::cli
