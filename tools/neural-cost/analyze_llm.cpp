// `analyze` of decoder LLMs beyond one step: speculative decoding, a whole generation, serving
// capacity and the cheapest serving system, tensor parallelism, the LLM page (analyze_args.hpp).
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

/// `analyze TARGET --draft DRAFT`: the speculative decoding estimate per batch.
void run_speculative(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  refuse_given(cmd,
               {"--train", "--prompt", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only",
                "--generate", "--price-per-hour", "--currency", "--parallel", "--zero", "--system", "--link",
                "--memory-budget", "--reserve", "--target-ms-per-token"},
               " does not apply with --draft");
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
  refuse_given(cmd,
               {"--train", "--context", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only",
                "--draft-tokens", "--acceptance", "--parallel", "--zero", "--system", "--link", "--memory-budget",
                "--reserve", "--target-ms-per-token"},
               " does not apply with --phase generate");
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

/// `analyze DECODER --phase decode --context C --memory-budget M`: sequences served per tp degree.
void run_serving_capacity(const AnalyzeArgs& args, const CLI::App& cmd, const Format format) {
  if (args.phase != "decode") {
    throw Error(ErrorCode::kInvalidArgument, "--memory-budget applies with --train or with --phase decode");
  }
  refuse_given(cmd,
               {"--hardware", "--zero", "--link", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only",
                "--prompt", "--routing"},
               " does not apply with --phase decode --memory-budget (it counts bytes per device)");
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
  refuse_given(
      cmd, {"--memory-budget", "--reserve"},
      " does not apply with --parallel tp=N (--phase decode --memory-budget without --parallel lists every tp)");
  refuse_given(cmd, {"--zero", "--search", "--seq", "--width", "--depth", "--input", "--dim", "--structure-only"},
               " does not apply with --parallel tp=N");
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
  refuse_given(
      cmd,
      {"--hardware", "--system", "--link", "--parallel", "--memory-budget", "--train", "--zero", "--search", "--seq",
       "--width", "--depth", "--input", "--dim", "--structure-only", "--prompt"},
      " does not apply with --target-ms-per-token (it tries every built-in system and each device's own memory)");
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
  refuse_given(cmd, {"--phase",         "--generate",       "--train",
                     "--optimizer",     "--precision",      "--checkpoint",
                     "--memory-budget", "--reserve",        "--target-ms-per-token",
                     "--price-file",    "--price-per-hour", "--currency",
                     "--parallel",      "--zero",           "--search",
                     "--system",        "--link",           "--draft",
                     "--draft-tokens",  "--acceptance",     "--seq",
                     "--width",         "--depth",          "--input",
                     "--dim",           "--structure-only"},
               " does not apply with --format html (the LLM page of one decoder: both phases, --batch, --prompt, "
               "--context, --dtype, --weights, --hardware)");
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

}  // namespace neuralcost::cli
