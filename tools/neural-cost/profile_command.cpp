// `neural-cost profile`: run models through a backend under the timing contract and compare the
// measured time with the roofline, per run and per layer.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/report/profile_views.hpp"

namespace neuralcost::cli {
namespace {

struct ProfileArgs {
  std::vector<std::string> models;
  std::vector<std::string> input_shapes;
  std::vector<std::string> backends = {"libtorch"};
  double worker_timeout = 300;
  std::vector<std::string> modes = {"eager"};
  std::vector<std::int64_t> batches = {1};
  std::int64_t seq = 32, width = 128, depth = 2;
  int threads = 0;
  std::string dtype = "fp32";
  std::string device = "cpu";
  std::string hardware;  // empty: the device's own (host for cpu)
  bool allow_hardware_mismatch = false;
  std::string format = "table";
  std::string output;
  double budget = 2.0;
  double target_ci = 0.02;
  int warmup = 5;
  double warmup_seconds = 0.2;
  int layer_runs = 20;
  bool summary_only = false;
};

void run_profile(const ProfileArgs& args) {
  const auto dtype = parse_dtype(args.dtype);
  if (!dtype) throw Error(ErrorCode::kInvalidArgument, fmt::format("--dtype '{}' is not a dtype", args.dtype));
  ProfileOptions options;
  options.modes = args.modes;
  options.batches = args.batches;
  options.layer_runs = args.layer_runs;
  options.run.device = args.device;
  options.run.threads = args.threads;
  options.run.worker_timeout_seconds = args.worker_timeout;
  options.timing.budget_seconds = args.budget;
  options.timing.target_relative_ci = args.target_ci;
  options.timing.warmup_iterations = args.warmup;
  options.timing.warmup_seconds = args.warmup_seconds;
  options.allow_hardware_mismatch = args.allow_hardware_mismatch;
  validate(options);  // before anything slow (calibration, workers)
  std::vector<const Backend*> backends;
  for (const std::string& name : args.backends) backends.push_back(&backend_named(name));
  check_modes(backends, options.modes);
  // one backend: a device it does not have is the command's error (several: a failed run each)
  if (backends.size() == 1) check_device_offered(*backends.front(), options.run.device);
  // the roof of a CPU run is the ceiling of the cores its threads use (host's calibration by thread count)
  const HardwareSpec hardware =
      hardware_for(args.hardware.empty() ? default_hardware_for(backends, options.run.device) : args.hardware,
                   options.run.threads);
  ModelRequest base;
  base.seq = args.seq;
  base.width = args.width;
  base.depth = args.depth;
  base.dtype = *dtype;
  for (const std::string& s : args.input_shapes) {
    base.input_shapes.push_back(parse_shape(s, fmt::format("--input-shape '{}'", s)));
  }
  const std::vector<std::string> models = args.models.empty() ? reference_model_names() : args.models;
  const std::vector<ProfileRun> runs = profile_all(backends, models, base, hardware, options);
  const Format format = *parse_format(args.format);
  emit(args.summary_only && format != Format::kJson ? render_profile_summary(runs, format)
                                                    : render_profile(runs, hardware, format),
       args.output);
  std::size_t failed = 0;
  for (const ProfileRun& r : runs) {
    if (r.outcome.failed()) {
      ++failed;
      fmt::print(stderr, "error: {} ({} {}, batch {}): {}\n", r.model, r.backend, r.mode, r.batch, r.outcome.error());
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
      "(and if not, why: no LibTorch plugin, no Python environment for the workers).");
  add_format_option(*cmd, *format);
  cmd->callback([format] { emit(render_backends(backends(), *parse_format(*format)), ""); });
}

void add_profile_command(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Run models through a backend, time them under the timing contract and compare with the\n"
      "roofline: latency with its 95% CI, samples/s, FLOP/s, efficiency, limit and verdict per\n"
      "run, and measured time per layer. Without --model: the five reference networks.");
  cmd->add_option("model,--model", args->models, "ff, cnn, rnn, lstm, transformer, or a model file: TorchScript .pt (libtorch), torch.export .pt2 "
                  "(torch), SavedModel directory (tensorflow); comma-separated")
      ->delimiter(',');
  // list options take one argument per occurrence, so that a model after them stays the model
  cmd->add_option("--input-shape", args->input_shapes, "Input shape of a model file, e.g. 32x3x32x32 (once per input)")
      ->expected(1);
  cmd->add_option("--backend", args->backends,
                  "Backends, comma-separated: libtorch, jax, tensorflow, torch (several: the same runs in each, "
                  "side by side)")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--mode", args->modes,
                  "Modes, comma-separated: eager, compiled (every backend's compiled mode), or a backend's own: "
                  "jax jit; tensorflow function, xla; torch compile")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--worker-timeout", args->worker_timeout,
                  "Seconds a Python worker may take per request (build and compile included) before it is killed")
      ->capture_default_str();
  cmd->add_option("--batch", args->batches,
                  "Batch sizes of the reference networks, comma-separated (a model file's batch is the first "
                  "dimension of its first --input-shape)")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seq", args->seq, "Sequence length (rnn, lstm, transformer)")->capture_default_str();
  cmd->add_option("--width", args->width, "Hidden width d")->capture_default_str();
  cmd->add_option("--depth", args->depth, "Hidden blocks / conv stages / layers")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "fp32 or fp64")->capture_default_str();
  cmd->add_option("--threads", args->threads,
                  "Intra-op threads (0: the library's default). With --hardware host or host-spec the roof is the "
                  "ceiling of the cores N threads use, calibrated (and cached) per thread count; 0: every CPU")
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Device to run on: cpu, or cuda:N (torch only; see `neural-cost backends` for each backend's)")
      ->capture_default_str();
  cmd->add_option("--hardware", args->hardware,
                  "Roofline spec (default: the device's own: host for cpu, the GPU's built-in spec for cuda:N): "
                  "host (this machine, calibrated for --threads: measured on first use and cached unless the "
                  "machine was busy), host-spec (its theoretical peaks at the CPU's documented clock), a built-in "
                  "id, or a spec JSON file");
  cmd->add_flag("--allow-hardware-mismatch", args->allow_hardware_mismatch,
                "Accept a --hardware spec of another kind of device than --device (e.g. a GPU's roofline for a "
                "cpu run); every run then carries a warning");
  cmd->add_option("--budget", args->budget, "Seconds of sampling per run at most")->capture_default_str();
  cmd->add_option("--target-ci", args->target_ci, "Stop when the 95% CI of the median is this fraction of it")
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Warm-up runs at least")->capture_default_str();
  cmd->add_option("--warmup-seconds", args->warmup_seconds, "Warm-up seconds at least")->capture_default_str();
  cmd->add_option("--layer-runs", args->layer_runs, "Profiled passes for per-layer times (0: skip)")->capture_default_str();
  cmd->add_flag("--summary", args->summary_only, "Print only the summary across runs (table, md, csv)");
  add_format_option(*cmd, args->format);
  cmd->add_option("-o,--output", args->output, "Write to this file (atomically) instead of stdout");
  cmd->callback([args] { run_profile(*args); });
}

}  // namespace neuralcost::cli
