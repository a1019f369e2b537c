// `neural-cost profile`: run models through a backend under the timing contract and compare the
// measured time with the roofline, per run and per layer.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/calibrate/pipeline_parallel_check.hpp"
#include "neuralcost/calibrate/tensor_parallel_check.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/parallel/sharding.hpp"
#include "neuralcost/report/link_views.hpp"
#include "neuralcost/report/profile_views.hpp"
#include "run_options.hpp"

namespace neuralcost::cli {
namespace {

/// "113 µs" (the median of a finished run), for the progress line.
std::string report_median(const ProfileRun& r) {
  const double s = r.timing.summary.median;
  return s >= 1      ? fmt::format("{:.3g} s", s)
         : s >= 1e-3 ? fmt::format("{:.3g} ms", s * 1e3)
                     : fmt::format("{:.3g} µs", s * 1e6);
}

/// The options of profile's per-layer tables (--top, --sort, --group-by).
struct LayerArgs {
  long long top = 0;
  std::string sort, group;
};

/// --data-parallel N, --tensor-parallel N or --pipeline-parallel N (with --micro-batches), --link,
/// --zero: measured parallel steps against their prediction.
struct DataParallelArgs {
  int ranks = 0, tensor_ranks = 0, pipeline_ranks = 0;
  bool sequence_parallel = false;
  std::int64_t micro_batches = 4;
  std::string link, zero = "ddp";
};

/// What the measured parallel checks ask of their options: only those in `applies` (and --train,
/// --link, --model, --batch, --rounds, --optimizer, --format, --output) may be given, --train and
/// --link must be. `runs` says what the check runs.
void check_parallel_options(const RunArgs& args, const DataParallelArgs& dp, const CLI::App& cmd,
                            const std::string& check, std::set<std::string> applies, const std::string& runs) {
  applies.insert({check, "--link", "--train", "--model", "--batch", "--rounds", "--optimizer", "--format", "--output"});
  for (const CLI::Option* option : cmd.get_options()) {
    const std::string name = option->get_name();
    if (option->count() > 0 && applies.count(name) == 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} does not apply with {} ({})", name, check, runs));
    }
  }
  if (!args.train) throw Error(ErrorCode::kInvalidArgument, check + " applies only with --train");
  if (dp.link.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                check +
                    " needs --link SPEC.json, this machine's calibrated link (`neural-cost hardware calibrate "
                    "--collectives --spec-output SPEC.json`)");
  }
}

/// Before a measured parallel check runs: -o writable and none of its inputs; Ctrl-C and SIGTERM
/// end the worker and its ranks.
void prepare_parallel_run(const RunArgs& args, const DataParallelArgs& dp) {
  check_output_path(args.output, "-o");
  refuse_output_over_inputs(args.output, {dp.link, args.models.empty() ? std::string() : args.models.front()});
  install_interrupt_handlers();
}

/// The optimizer a decoder check runs: sgd (default) or adam.
std::string decoder_check_optimizer(const RunArgs& args, const std::string& check) {
  const std::string optimizer = args.optimizer.empty() ? "sgd" : args.optimizer;
  if (optimizer != "sgd" && optimizer != "adam") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--optimizer {} with {}: sgd or adam run", optimizer, check));
  }
  return optimizer;
}

/// `profile --train --data-parallel N --link SPEC.json [--zero ddp|fsdp]`: real DDP or FSDP steps
/// of one reference network in N local processes (gloo) against the prediction from the link.
void run_data_parallel_check(const RunArgs& args, const DataParallelArgs& dp, const CLI::App& cmd) {
  check_parallel_options(args, dp, cmd, "--data-parallel", {"--zero", "--seq", "--width", "--depth", "--hardware"},
                         "it runs one reference network's DDP or FSDP steps in local processes: --model, --batch, "
                         "--seq, --width, --depth, --rounds, --optimizer, --zero, --link");
  if (args.models.size() > 1 || args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, "--data-parallel takes one --model and one --batch (per rank)");
  }
  const auto stage = zero_stage_from_name(dp.zero);
  if (!stage) throw Error(ErrorCode::kInvalidArgument, fmt::format("--zero '{}' is not one of ddp, fsdp", dp.zero));
  DataParallelCheckRequest r;
  r.model = args.models.empty() ? "cnn" : args.models.front();
  r.batch = cmd.count("--batch") > 0 ? args.batches.front() : 32;
  r.seq = args.seq;
  r.width = args.width;
  r.depth = args.depth;
  r.ranks = dp.ranks;
  r.stage = *stage;
  r.optimizer = args.optimizer.empty() ? "sgd" : args.optimizer;
  r.rounds = cmd.count("--rounds") > 0 ? args.rounds : 7;
  r.link = find_interconnect(dp.link);
  check_data_parallel_request(r);  // bad input is named before the host is calibrated
  const Format format = output_format(cmd, args.format, args.output);
  prepare_parallel_run(args, dp);
  r.hardware = hardware_for(args.hardware.empty() ? "host-spec" : args.hardware);
  emit(render_data_parallel_check(check_data_parallel(r), 0.15, format), args.output);
}

/// `profile --train --tensor-parallel N --link SPEC.json [--model DECODER]`: real Megatron-style
/// tensor-parallel steps of a decoder in N local processes (gloo) against the prediction.
void run_tensor_parallel_check(const RunArgs& args, const DataParallelArgs& dp, const CLI::App& cmd) {
  check_parallel_options(args, dp, cmd, "--tensor-parallel", {"--prompt", "--sequence-parallel"},
                         "it runs one decoder's tensor-parallel training steps in local processes: --model, "
                         "--batch, --prompt, --sequence-parallel, --rounds, --optimizer, --link");
  if (args.models.size() > 1 || args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, "--tensor-parallel takes one --model (a decoder) and one --batch");
  }
  TensorParallelCheckRequest r;
  r.model = args.models.empty() ? "" : args.models.front();
  r.config = tensor_parallel_check_config(r.model, "--tensor-parallel");
  r.ranks = dp.tensor_ranks;
  r.sequence_parallel = dp.sequence_parallel;
  if (cmd.count("--batch") > 0) r.batch = args.batches.front();
  if (cmd.count("--prompt") > 0) r.tokens = args.prompt;
  r.optimizer = decoder_check_optimizer(args, "--tensor-parallel");
  if (cmd.count("--rounds") > 0) r.rounds = args.rounds;
  r.link = find_interconnect(dp.link);
  check_tensor_parallel_request(r);
  const Format format = output_format(cmd, args.format, args.output);
  prepare_parallel_run(args, dp);
  emit(render_tensor_parallel_check(check_tensor_parallel(r), 0.15, format), args.output);
}

/// `profile --train --pipeline-parallel N --link SPEC.json [--model DECODER] [--micro-batches M]`:
/// real 1F1B pipeline steps of a decoder in N local processes (gloo) against the prediction.
void run_pipeline_parallel_check(const RunArgs& args, const DataParallelArgs& dp, const CLI::App& cmd) {
  check_parallel_options(args, dp, cmd, "--pipeline-parallel", {"--prompt", "--micro-batches"},
                         "it runs one decoder's pipeline training steps in local processes: --model, --batch, "
                         "--prompt, --micro-batches, --rounds, --optimizer, --link");
  if (args.models.size() > 1 || args.batches.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--pipeline-parallel takes one --model (a decoder) and one --batch (the micro-batch)");
  }
  PipelineParallelCheckRequest r;
  r.model = args.models.empty() ? "" : args.models.front();
  r.config = tensor_parallel_check_config(r.model, "--pipeline-parallel");
  r.ranks = dp.pipeline_ranks;
  r.micro_batches = dp.micro_batches;
  if (cmd.count("--batch") > 0) r.batch = args.batches.front();
  if (cmd.count("--prompt") > 0) r.tokens = args.prompt;
  r.optimizer = decoder_check_optimizer(args, "--pipeline-parallel");
  if (cmd.count("--rounds") > 0) r.rounds = args.rounds;
  r.link = find_interconnect(dp.link);
  check_pipeline_parallel_request(r);
  const Format format = output_format(cmd, args.format, args.output);
  prepare_parallel_run(args, dp);
  emit(render_pipeline_parallel_check(check_pipeline_parallel(r), 0.15, format), args.output);
}

void run_profile(const RunArgs& args, const LayerArgs& layer_args, const DataParallelArgs& dp, const CLI::App& cmd) {
  const int checks = static_cast<int>(cmd.count("--data-parallel") + cmd.count("--tensor-parallel") +
                                      cmd.count("--pipeline-parallel"));
  if (checks > 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "--data-parallel, --tensor-parallel and --pipeline-parallel are separate checks: give one (analyze "
                "--parallel combines them)");
  }
  if (cmd.count("--data-parallel") > 0) return run_data_parallel_check(args, dp, cmd);
  if (cmd.count("--tensor-parallel") > 0) return run_tensor_parallel_check(args, dp, cmd);
  if (cmd.count("--pipeline-parallel") > 0) return run_pipeline_parallel_check(args, dp, cmd);
  refuse_given(cmd, {"--link"}, " applies only with --data-parallel, --tensor-parallel or --pipeline-parallel");
  refuse_given(cmd, {"--micro-batches"}, " applies only with --pipeline-parallel");
  refuse_given(cmd, {"--sequence-parallel"}, " applies only with --tensor-parallel");
  refuse_given(cmd, {"--zero"}, " applies only with --data-parallel");
  // Ctrl-C ends the run in progress and its workers; -o holds every finished run as it ends.
  // Installed first: a signal while the plan is made (calibration, loading plugins) is kept too.
  install_interrupt_handlers();
  const LayerTableOptions table =
      layer_table_options(cmd.count("--top") ? std::optional<long long>(layer_args.top) : std::nullopt, layer_args.sort,
                          layer_args.group, args.layer_runs);
  const Format format = output_format(cmd, args.format, args.output);
  if (table.any() && (args.summary_only || format == Format::kJson)) {
    // JSON has every layer; --summary prints no layer table (checked before anything slow runs)
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--top, --sort and --group-by shape the layer tables of table, md and csv output, not {}",
                            args.summary_only ? "--summary" : "--format json"));
  }
  RunSetup setup = prepare_run(args);
  ProfileOptions& options = setup.options;
  const HardwareSpec& hardware = setup.hardware;
  const std::vector<ModelBackends>& plan = setup.plan;
  const ModelRequest& base = setup.base;
  auto render = [&](const std::vector<ProfileRun>& runs) {
    return args.summary_only && format != Format::kJson ? render_profile_summary(runs, format)
                                                        : render_profile(runs, hardware, format, table);
  };
  std::vector<ProfileRun> finished;
  const bool progress = ::isatty(2) != 0;
  options.on_run = [&](const ProfileRun& r) {
    if (interrupted() && r.outcome.failed()) return;  // the run the signal cut short
    finished.push_back(r);
    if (!args.output.empty()) emit(render(finished), args.output);
    if (progress) {
      fmt::print(stderr, "\r\033[K[{} done] {} {} {}, batch {}: {}", finished.size(), terminal_text(r.model), r.backend,
                 r.mode, r.batch, r.outcome.failed() ? "failed" : report_median(r));
    }
  };
  const std::vector<ProfileRun> runs = profile_all(plan, base, hardware, options);
  if (progress) fmt::print(stderr, "\r\033[K");
  if (interrupted()) {
    if (args.output.empty()) emit(render(finished), "");
    throw Interrupted(fmt::format("{} run(s) finished{}", finished.size(),
                                  args.output.empty() ? " (printed above)" : " and are in " + args.output));
  }
  emit(render(runs), args.output);
  const auto why = [](const ProfileRun& r) {
    return fmt::format("{} ({} {}, batch {}): {}", r.model, r.backend, r.mode, r.batch, r.outcome.error());
  };
  // the only run failed: its reason is the one error line
  if (runs.size() == 1 && runs[0].outcome.failed()) throw Error(ErrorCode::kInvalidArgument, why(runs[0]));
  std::size_t failed = 0;
  for (const ProfileRun& r : runs) {
    if (r.outcome.failed()) {
      ++failed;
      fmt::print(stderr, "error: {}\n", terminal_text(why(r)));
    }
  }
  // the other runs are printed (and written) above; the exit code still says that some failed
  if (failed > 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("{} of {} runs failed", failed, runs.size()));
}

}  // namespace

void add_backends_command(CLI::App& app) {
  auto format = std::make_shared<std::string>("table");
  CLI::App* cmd = app.add_subcommand(
      "backends",
      "List the backends of `profile`: their modes, and whether each can run on this machine\n"
      "(and if not, why: no LibTorch plugin, no Python environment for the workers), and why there are no\n"
      "cuda:N devices when CUDA is not available here (no NVIDIA driver, no device).");
  add_format_option(*cmd, *format);
  cmd->callback([format] { emit(render_backends(backends(), *parse_format(*format), &cuda_devices()), ""); });
}

void add_profile_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto layer_args = std::make_shared<LayerArgs>();
  auto dp = std::make_shared<DataParallelArgs>();
  CLI::App* cmd =
      app.add_subcommand("profile",
                         "Run models through a backend, time them under the timing contract and compare with the\n"
                         "roofline: latency with its 95% CI, samples/s, FLOP/s, efficiency, limit and verdict per\n"
                         "run, and measured time per layer. Without --model: the five reference networks.");
  add_run_options(*cmd, *args);
  cmd->add_flag("--summary", args->summary_only, "Print only the summary across runs (table, md, csv)");
  cmd->add_option(
      "--top", layer_args->top,
      "Per-layer tables (table, md, csv; an error with --summary, --format json or --layer-runs 0): keep the "
      "first N rows (after --sort and --group-by); one row sums the rest");
  cmd->add_option("--sort", layer_args->sort,
                  "Per-layer tables: time (longest first), waste (time above the lower bound, largest first) or "
                  "efficiency (lowest first); default: execution order");
  cmd->add_option("--group-by", layer_args->group,
                  "Per-layer tables: one row per op kind (kind) or per module path (module), summing their layers");
  add_format_option(*cmd, args->format);
  cmd->add_option("-o,--output", args->output,
                  "Write to this file (atomically) instead of stdout; without --format, the format follows its "
                  "extension (.json, .csv, .md)");
  cmd->add_option("--data-parallel", dp->ranks,
                  "With --train: real DDP (or --zero fsdp: FSDP2) steps of one reference network in N local "
                  "processes on gloo, against the prediction from --link (docs/distributed.md §7)");
  cmd->add_option("--tensor-parallel", dp->tensor_ranks,
                  "With --train: real tensor-parallel steps of a decoder (--model: a preset or config.json; default "
                  "a 4-layer Llama) split as Megatron-LM splits it, in N local processes on gloo, against the "
                  "prediction from --link (docs/distributed.md §8)");
  cmd->add_flag("--sequence-parallel", dp->sequence_parallel,
                "With --tensor-parallel: Megatron's sequence parallelism (norms and residuals on 1/N of the tokens, "
                "each all-reduce a reduce-scatter and an all-gather)");
  cmd->add_option("--pipeline-parallel", dp->pipeline_ranks,
                  "With --train: real 1F1B pipeline steps of a decoder (--model as with --tensor-parallel) cut into N "
                  "stages in N local processes on gloo, against the model's schedule on the stages' measured work "
                  "(docs/distributed.md §9)");
  cmd->add_option("--micro-batches", dp->micro_batches, "With --pipeline-parallel: micro-batches a step")
      ->capture_default_str();
  cmd->add_option("--link", dp->link,
                  "With --data-parallel, --tensor-parallel or --pipeline-parallel: this machine's calibrated link, a "
                  "spec written by `hardware calibrate --collectives --spec-output`");
  cmd->add_option("--zero", dp->zero, "With --data-parallel: ddp or fsdp")->capture_default_str();
  cmd->callback([args, layer_args, dp, cmd] { run_profile(*args, *layer_args, *dp, *cmd); });
}

}  // namespace neuralcost::cli
