// The options of profile and study (see run_options.hpp).
#include "run_options.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/environment.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost::cli {

void add_run_options(CLI::App& command, RunArgs& a) {
  CLI::App* cmd = &command;
  RunArgs* args = &a;
  cmd->add_option(
         "model,--model", args->models,
         "ff, cnn, rnn, lstm, transformer, or a model file: TorchScript .pt/.ts (libtorch), torch.export .pt2 "
         "(torch), SavedModel directory (tensorflow), a decoder LLM's config.json (torch; --phase); comma-separated")
      ->delimiter(',');
  // list options take one argument per occurrence, so that a model after them stays the model
  cmd->add_option("--input", args->inputs,
                  "An input of a model file by its name, NAME=SHAPE[:DTYPE[:LOW..HIGH]], once per input: e.g. "
                  "ids=8x128:int64:0..30522 (token ids, HIGH excluded) and mask=8x128:fp32. DTYPE: fp32, fp64, fp16, "
                  "bf16, int64, int32, int8, bool (default: the file's own, else --dtype); integers need LOW..HIGH, a "
                  "float range makes values uniform instead of standard normal")
      ->allow_extra_args(false);
  cmd->add_option("--input-shape", args->input_shapes,
                  "An input of a model file by position, SHAPE[:DTYPE[:LOW..HIGH]] as for --input, e.g. 32x3x32x32; "
                  "once per input, in the model's order")
      ->allow_extra_args(false);
  cmd->add_option("--backend", args->backends,
                  "Backends, comma-separated: libtorch, jax, tensorflow, torch (several: the same runs in each, "
                  "side by side). Default: from the model: built-in networks and TorchScript .pt/.ts libtorch, "
                  ".pt2 torch, a SavedModel directory tensorflow, a decoder's config.json torch")
      ->allow_extra_args(false)
      ->delimiter(',');
  cmd->add_option("--mode", args->modes,
                  "Modes, comma-separated: eager, compiled (every backend's compiled mode), or a backend's own: "
                  "jax jit; tensorflow function, xla; torch compile")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--worker-timeout", args->worker_timeout,
                  "Seconds one request to a backend may take beyond its passes' expected time: a Python worker's "
                  "(start, build and compile included; then it is killed) or a LibTorch call's (loading a model "
                  "with its first pass, a pass, a profiled series; then its run fails and later LibTorch runs "
                  "are refused)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batches,
                  "Batch sizes of the reference networks, comma-separated (a model file's batch is the first "
                  "dimension of its first input)")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->capture_default_str();
  const auto mark = [args](const char* option) {
    return [args, option](const std::string&) { args->given.insert(option); };
  };
  cmd->add_option("--seq", args->seq, "Sequence length (rnn, lstm, transformer)")
      ->capture_default_str()
      ->each(mark("seq"));
  cmd->add_option("--width", args->width, "Hidden width d")->capture_default_str()->each(mark("width"));
  cmd->add_option("--depth", args->depth, "Hidden blocks / conv stages / layers")
      ->capture_default_str()
      ->each(mark("depth"));
  cmd->add_option("--phase", args->phase,
                  "A decoder's config.json (torch backend: transformers' model class, random weights): the phase "
                  "one timed pass is, prefill (--prompt tokens into an empty KV cache: time to first token) or decode "
                  "(1 token over a KV cache of --context tokens: time per output token)")
      ->capture_default_str()
      ->each(mark("phase"));
  cmd->add_option("--prompt", args->prompt, "A decoder's prefill: tokens of the prompt")
      ->capture_default_str()
      ->each(mark("prompt"));
  cmd->add_option("--context", args->context, "A decoder's decode step: tokens already in the KV cache")
      ->capture_default_str()
      ->each(mark("context"));
  cmd->add_option("--dtype", args->dtype,
                  "fp32 or fp64 (torch: also bf16): the model's, and a file's inputs without their own")
      ->capture_default_str();
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
  cmd->add_option("--budget", args->budget, "Seconds of sampling per cell, split over its rounds")
      ->capture_default_str();
  cmd->add_option(
         "--target-ci", args->target_ci,
         "A round stops sampling when the 95% CI of its median is this fraction of it (or its budget is spent)")
      ->capture_default_str();
  cmd->add_option("--rounds", args->rounds,
                  "Rounds per cell at least: each a window of its own, interleaved with the other cells of the same "
                  "model and batch; the cell's interval comes from the rounds (6 or more give a 95% interval)")
      ->capture_default_str();
  cmd->add_option("--max-rounds", args->max_rounds,
                  "More rounds, up to this, for cells whose interval is wider than --ok-within, and for both "
                  "modes of a backend whose paired speedup's interval is")
      ->each([args](const std::string&) { args->max_rounds_given = true; })
      ->capture_default_str();
  cmd->add_option("--preparations", args->preparations,
                  "Preparations per cell, each in a sweep of its own: the model built afresh (a worker: a fresh "
                  "process), so that rounds sample what differs between processes too")
      ->capture_default_str();
  cmd->add_option("--ok-within", args->ok_within,
                  "The verdict's threshold in percent: `ok` needs the cell's 95% interval within this of its median")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the interleaving order (the same seed, the same order)")
      ->each([](const std::string& text) {
        // an unsigned field takes "-1" as 2^64 - 1: a negative seed is said, not wrapped
        if (text.find('-') != std::string::npos) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("--seed {} must be a non-negative integer", text));
        }
      })
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Warm-up runs at least")->capture_default_str();
  cmd->add_option("--warmup-seconds", args->warmup_seconds, "Warm-up seconds at least")->capture_default_str();
  cmd->add_option("--layer-runs", args->layer_runs, "Profiled passes for per-layer times (0: skip)")
      ->capture_default_str();
  cmd->add_flag("--train", args->train,
                "Time whole training steps (forward, loss, backward, optimizer step, zero-grad) of the built-in "
                "networks: cross entropy on fixed random labels (mean squared error when the output is not [batch, "
                "classes]); the roofline is the step's (analyze --train), per-layer times the step's phases, and "
                "each run reports the allocator's measured peak memory of one step");
  cmd->add_option("--optimizer", args->optimizer, "With --train: sgd, momentum, adam, adamw (default adam)");
  cmd->add_option("--precision", args->precision,
                  "With --train: fp32 (default) or bf16-mixed (torch.autocast to bfloat16 over fp32 parameters; "
                  "libtorch and torch; the memory ledger as autocast keeps it); fp16-mixed is counted by analyze only");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "With --train: none (default; measured runs support none only), full, every:K, selective");
  // NaN stands for "not given" in these fields: a NaN on the command line is refused as it is read
  const auto not_nan = [](const char* option) {
    return [option](const std::string& text) {
      try {
        if (std::isnan(std::stod(text))) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("{} {} is not a number", option, text));
        }
      } catch (const std::logic_error&) {  // not a number at all: CLI11 says so
      }
    };
  };
  cmd->add_option("--learning-rate", args->learning_rate, "With --train: the learning rate (default 0.001)")
      ->each(not_nan("--learning-rate"));
  cmd->add_option("--momentum", args->momentum, "With --train --optimizer momentum: the momentum (default 0.9)")
      ->each(not_nan("--momentum"));
  cmd->add_option("--betas", args->betas, "With --train and adam or adamw: B1,B2 (default 0.9,0.999)");
  cmd->add_option("--eps", args->eps, "With --train and adam or adamw: epsilon (default 1e-8)")->each(not_nan("--eps"));
  cmd->add_option("--weight-decay", args->weight_decay,
                  "With --train: weight decay (default 0, adamw 0.01; decoupled for adamw, L2 for the others)")
      ->each(not_nan("--weight-decay"));
  cmd->add_option("--labels-seed", args->labels_seed,
                  "With --train: seed of the labels or regression target (default 0)");
}

namespace {

bool given(double v) { return !std::isnan(v); }

/// The training settings of --train and its options; kInvalidArgument for an option given without
/// --train or one that does not apply to the optimizer.
std::optional<TrainRun> training_of(const RunArgs& a) {
  const std::vector<std::pair<const char*, bool>> options = {{"--optimizer", !a.optimizer.empty()},
                                                             {"--precision", !a.precision.empty()},
                                                             {"--checkpoint", !a.checkpoint.empty()},
                                                             {"--learning-rate", given(a.learning_rate)},
                                                             {"--momentum", given(a.momentum)},
                                                             {"--betas", !a.betas.empty()},
                                                             {"--eps", given(a.eps)},
                                                             {"--weight-decay", given(a.weight_decay)},
                                                             {"--labels-seed", a.labels_seed != -1}};
  if (!a.train) {
    for (const auto& [name, set] : options) {
      if (set)
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{} applies to training runs only: add --train", name));
    }
    return std::nullopt;
  }
  TrainRun t;
  if (!a.optimizer.empty()) t.options.optimizer = parse_optimizer(a.optimizer);
  if (!a.precision.empty()) t.options.precision = parse_precision(a.precision);
  if (!a.checkpoint.empty()) t.options.checkpoint = parse_checkpoint(a.checkpoint);
  const Optimizer o = t.options.optimizer;
  const bool adam = o == Optimizer::kAdam || o == Optimizer::kAdamW;
  const auto only = [&](const char* option, bool set, bool applies, const char* which) {
    if (set && !applies) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply to --optimizer {} (only to {})", option, optimizer_name(o), which));
    }
  };
  only("--momentum", given(a.momentum), o == Optimizer::kMomentum, "momentum");
  only("--betas", !a.betas.empty(), adam, "adam, adamw");
  only("--eps", given(a.eps), adam, "adam, adamw");
  TrainHyperparameters& h = t.hyper;
  if (given(a.learning_rate)) h.learning_rate = a.learning_rate;
  if (given(a.momentum)) h.momentum = a.momentum;
  if (given(a.eps)) h.eps = a.eps;
  if (given(a.weight_decay)) h.weight_decay = a.weight_decay;
  if (a.labels_seed != -1) {
    if (a.labels_seed < 0)
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--labels-seed must be at least 0 (got {})", a.labels_seed));
    h.labels_seed = static_cast<std::uint64_t>(a.labels_seed);
  }
  if (!a.betas.empty()) {
    const auto comma = a.betas.find(',');
    try {
      std::size_t used1 = 0, used2 = 0;
      if (comma == std::string::npos) throw std::invalid_argument("one value");
      h.beta1 = std::stod(a.betas.substr(0, comma), &used1);
      h.beta2 = std::stod(a.betas.substr(comma + 1), &used2);
      if (used1 != comma || used2 != a.betas.size() - comma - 1) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--betas '{}' is not B1,B2 (e.g. 0.9,0.999)", a.betas));
    }
  }
  return t;
}

}  // namespace

RunSetup prepare_run(const RunArgs& args) {
  // before any model or worker starts: freed memory stays in the measured processes
  tune_malloc_for_measurement();
  const auto dtype = parse_dtype(args.dtype);
  if (!dtype) throw Error(ErrorCode::kInvalidArgument, fmt::format("--dtype '{}' is not a dtype", args.dtype));
  RunSetup setup;
  ProfileOptions& options = setup.options;
  options.modes = args.modes;
  options.batches = args.batches;
  options.layer_runs = args.layer_runs;
  options.run.device = Device::parse(args.device);
  options.run.threads = args.threads;
  options.run.worker_timeout_seconds = args.worker_timeout;
  options.timing.budget_seconds = args.budget;
  options.timing.target_relative_ci = args.target_ci;
  options.timing.warmup_iterations = args.warmup;
  options.timing.warmup_seconds = args.warmup_seconds;
  options.rounds.rounds = args.rounds;
  options.rounds.max_rounds = std::max(args.max_rounds, args.rounds);
  options.rounds.processes = args.preparations;
  options.rounds.ok_half_width = args.ok_within / 100;
  options.rounds.seed = args.seed;
  if (args.max_rounds < args.rounds && args.max_rounds_given) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-rounds ({}) must be at least --rounds ({})", args.max_rounds, args.rounds));
  }
  options.allow_hardware_mismatch = args.allow_hardware_mismatch;
  options.run.train = training_of(args);
  validate(options);  // before anything slow (calibration, workers)
  ModelRequest& base = setup.base;
  base.seq = args.seq;
  base.width = args.width;
  base.depth = args.depth;
  base.dtype = *dtype;
  base.phase = args.phase;
  base.prompt = args.prompt;
  base.context = args.context;
  base.given = args.given;
  for (const std::string& s : args.inputs) base.inputs.push_back(parse_input(s, true, "--input"));
  for (const std::string& s : args.input_shapes) base.inputs.push_back(parse_input(s, false, "--input-shape"));
  inputs_of(base);  // one way of giving inputs, each name once
  const std::vector<std::string> models = args.models.empty() ? reference_model_names() : args.models;
  setup.plan = choose_backends(models, args.backends);
  check_training(setup.plan, options);
  check_model_options(setup.plan, base);
  const std::vector<ModelBackends>& plan = setup.plan;
  const std::vector<const Backend*> backends = backends_of(plan);
  check_modes(backends, options.modes);
  // one backend: a device it does not have is the command's error (several: a failed run each)
  if (backends.size() == 1) check_device_offered(*backends.front(), options.run.device);
  // the roof of a CPU run is the ceiling of the cores its threads use (host's calibration by thread count)
  setup.hardware = hardware_for(
      args.hardware.empty() ? default_hardware_for(backends, options.run.device, options.run.worker_timeout_seconds)
                            : args.hardware,
      options.run.threads);
  return setup;
}

}  // namespace neuralcost::cli
