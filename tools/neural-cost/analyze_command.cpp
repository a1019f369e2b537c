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

#include "analyze_args.hpp"

namespace neuralcost::cli {
namespace {

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

void run_analyze(const AnalyzeArgs& args, const CLI::App& cmd) {
  const auto dtype = parse_dtype(args.dtype);
  const auto& compute = compute_dtypes();
  if (!dtype || std::find(compute.begin(), compute.end(), *dtype) == compute.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--dtype '{}' is not one of fp64, fp32, tf32, fp16, bf16, int8, fp8", args.dtype));
  }
  for (const std::string& model : args.models) refuse_output_over_inputs(args.output, {model});
  refuse_output_over_inputs(args.output, {args.variant.routing, args.link, args.price_file});
  if (wants_html(args, cmd)) return run_decoder_page(args, cmd);
  const Format format = output_format(cmd, args.format, args.output);
  if (!args.draft.empty()) return run_speculative(args, cmd, format);
  if (cmd.count("--target-ms-per-token") > 0) return run_serving_choice(args, cmd, format);
  if (cmd.count("--price-file") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--price-file applies only with --target-ms-per-token (the cost command prices measured runs)");
  }
  if (args.phase == "generate") return run_generation(args, cmd, format);
  refuse_given(cmd, {"--price-per-hour", "--currency"},
               " applies only with --phase generate (the cost command prices measured runs)");
  if (cmd.count("--generate") > 0)
    throw Error(ErrorCode::kInvalidArgument, "--generate applies only with --phase generate");
  refuse_given(cmd, {"--draft-tokens", "--acceptance"}, " applies only with --draft");
  if (!args.variant.weights.empty()) parse_weight_quantization(args.variant.weights);  // a bad format is named first
  if (args.train && cmd.count("--weights") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--weights does not apply with --train: training quantized weights (QLoRA and the like) is not "
                "modeled");
  }
  if (!args.variant.kv_cache.empty()) with_kv_cache(DecoderConfig{}, args.variant.kv_cache);
  if (!args.variant.activations.empty() && args.variant.activations != "int8" && args.variant.activations != "fp8") {
    with_activations(DecoderConfig{}, args.variant.activations);  // names the values
  }
  if (args.train && cmd.count("--activations") > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--activations does not apply with --train: training with 8-bit activations is not modeled");
  }
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
  if (cmd.count("--parallel") > 0) layout = parse_parallel_layout(args.parallel);
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
  refuse_given(cmd, {"--global-batch", "--virtual-stages", "--stage-layers", "--sequence-parallel"},
               " applies only with --train and --parallel tp=N or pp=N (or --search --devices N)");
  if (layout && layout->tp > 1) return run_tensor_parallel(args, cmd, format, *layout);
  if (!args.train && !args.memory_budget.empty() && !layout) return run_serving_capacity(args, cmd, format);
  if (!args.train) {
    refuse_given(cmd, {"--optimizer", "--precision", "--checkpoint"}, " applies only with --train");
    refuse_given(cmd, {"--memory-budget"}, " applies only with --train or --phase decode");
    refuse_given(cmd, {"--reserve"},
                 " applies only with --memory-budget (--train or --phase decode) or --target-ms-per-token");
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
  if (args.parallel.empty())
    refuse_given(cmd, {"--zero", "--system", "--link", "--search"}, " applies only with --parallel");
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
                             "kv-cache", "mla", "routing", "activations"}) {
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
  cmd->add_option("--activations", args->variant.activations,
                  "Decoder LLMs: W8A8, int8 or fp8: the blocks' linears multiply activations quantized per token by "
                  "8-bit weights of the same type, at the device's int8 or fp8 rate (--weights int8 or fp8, "
                  "fp8-block128; without --weights they are stored so); default: weight-only, dequantized to --dtype");
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
                  "tokens reach under that routing, not under uniform routing; in a training step over --parallel "
                  "...,ep=N, the busiest expert-parallel device's rows and all-to-alls");
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
  cmd->add_flag("--sequence-parallel", args->sequence_parallel,
                "With --train --parallel tp=N: Megatron's sequence parallelism, the norms and residual adds (and a "
                "mixture of experts' router and weighted sum) split over the tp devices by tokens, a reduce-scatter "
                "and an all-gather for each all-reduce (--search tries it on and off)");
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "With --parallel pp=N: model chunks a device (Megatron's interleaved 1F1B; bubble / v)")
      ->capture_default_str();
  cmd->add_option("--stage-layers", args->stage_layers,
                  "With --parallel pp=N: each stage's layers, first to last (N counts adding up to the model's "
                  "layers; with --virtual-stages v, pp × v chunks in model order), for uneven stages, e.g. "
                  "7,8,...,8,7 for 126 layers over 16 (the first and last a layer lighter: they hold the embedding "
                  "and the head); default: an even split")
      ->delimiter(',');
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
