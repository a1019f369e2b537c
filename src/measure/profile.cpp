// The profiling pipeline (see profile.hpp). Backend-neutral: everything framework-specific
// comes through PreparedModel, everything device-specific through RunEnvironment.
#include "neuralcost/measure/profile.hpp"

#include <algorithm>
#include <new>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/version.hpp"
#include "measure/cell_session.hpp"
#include "neuralcost/measure/schedule.hpp"
#include "measure/layer_attribution.hpp"
#include "measure/step_layers.hpp"

namespace neuralcost {
namespace {

/// The measured peak memory of one step (the backend's telemetry) as counters, and where it came from.
void add_step_memory(ProfileRun& run, PreparedModel& model) {
  try {
    run.step_memory = model.step_memory();
  } catch (const Error& e) {
    run.warnings.push_back(std::string("no measured memory: ") + e.what());
    return;
  }
  if (!run.step_memory) {
    run.warnings.push_back("no measured memory: the backend has no allocator telemetry for this run");
    return;
  }
  const StepMemory& m = *run.step_memory;
  run.timing.counters.push_back({"step_peak_memory", static_cast<double>(m.peak_bytes), "B", Counter::Kind::kTotal});
  if (m.start_bytes) {
    run.timing.counters.push_back({"step_start_memory", static_cast<double>(*m.start_bytes), "B", Counter::Kind::kTotal});
  }
  run.contract["memory_source"] = m.source;
  run.contract["memory_includes"] = m.includes;
}

/// The measured peak beside the memory ledger of the step (training/memory.hpp): its total at
/// the lower and upper end of the activation interval, and a verdict. A peak outside the
/// interval is a warning naming both (the run's timing stands).
void compare_with_ledger(ProfileRun& run, const OpGraph& forward, const TrainingOptions& options) {
  if (!run.step_memory) return;
  MemoryLedger ledger;
  try {
    ledger = memory_ledger(forward, options);
  } catch (const Error& e) {
    run.warnings.push_back(std::string("no memory ledger to compare the measured peak with: ") + e.what());
    return;
  }
  const std::uint64_t lower = ledger.total_bytes(MemoryBound::kLower);
  const std::uint64_t upper = ledger.total_bytes(MemoryBound::kUpper);
  run.timing.counters.push_back({"ledger_lower_memory", static_cast<double>(lower), "B", Counter::Kind::kTotal});
  run.timing.counters.push_back({"ledger_upper_memory", static_cast<double>(upper), "B", Counter::Kind::kTotal});
  const std::uint64_t peak = run.step_memory->peak_bytes;
  const std::string where = peak < lower ? "below" : peak > upper ? "above" : "inside";
  run.contract["memory_verdict"] =
      fmt::format("measured peak {} B is {} the ledger's [{}, {}] B (parameters, buffers and optimizer state {} B + "
                  "gradients, activations and temporaries [{}, {}] B)",
                  peak, where, lower, upper, ledger.persistent_bytes(), lower - ledger.persistent_bytes(),
                  upper - ledger.persistent_bytes());
  if (where != "inside") {
    run.warnings.push_back(fmt::format("the measured peak memory ({} B) is {} the ledger's interval [{}, {}] B: {}",
                                       peak, where, lower, upper,
                                       ledger.complete() ? "the ledger or the telemetry misses something"
                                                         : "the ledger is incomplete (unknown saves)"));
  }
}

/// The training settings of a run, for its contract.
void describe_training(std::map<std::string, std::string>& c, const TrainRun& train) {
  const TrainHyperparameters& h = train.hyper;
  const Optimizer o = train.options.optimizer;
  c["workload"] = "train";
  c["train_step"] = "forward, loss, backward, optimizer step, zero-grad; one step per sample of the timing";
  c["train_optimizer"] = std::string(optimizer_name(o));
  c["train_precision"] = std::string(precision_name(train.options.precision));
  c["train_checkpoint"] = checkpoint_name(train.options.checkpoint);
  std::string hyper = fmt::format("learning_rate {}", h.learning_rate);
  if (o == Optimizer::kMomentum) hyper += fmt::format(", momentum {}", h.momentum);
  if (o == Optimizer::kAdam || o == Optimizer::kAdamW) hyper += fmt::format(", betas ({}, {}), eps {}", h.beta1, h.beta2, h.eps);
  hyper += fmt::format(", weight_decay {} ({}), labels_seed {}", h.weight_decay_for(o),
                       o == Optimizer::kAdamW ? "decoupled" : "L2", h.labels_seed);
  c["train_hyperparameters"] = hyper;
}

/// Layer times on the run's own scale: one efficiency per run (the headline's). The profiled
/// pass is slower than a timed one (the profiler's overhead), so the layers' times are scaled by
/// timed median / profiled pass; the layers and the unattributed rest then add up to the timed
/// median. When the layers' medians sum to more than the profiled pass (overlapping or
/// asynchronous events), nothing is unattributed and a warning says why.
void reconcile_layers(ProfileRun& run) {
  double sum = 0;
  for (const LayerMeasurement& l : run.layers) sum += l.profiled_seconds;
  double pass = run.profiled_pass_seconds;
  if (sum > pass) {
    run.warnings.push_back(fmt::format(
        "the layers' times add up to {:.4g} ms, more than the profiled pass ({:.4g} ms): the profiler's events "
        "overlap (nested or asynchronous ops), so no time is left unattributed", sum * 1e3, pass * 1e3));
    pass = sum;
  }
  const double median_pass = run.timing.summary.median;
  run.layer_scale = pass > 0 ? median_pass / pass : 1;
  for (LayerMeasurement& l : run.layers) {
    l.measured_seconds = l.profiled_seconds * run.layer_scale;
    if (l.measured_seconds > 0) l.efficiency = l.lower_bound_seconds / l.measured_seconds;
    if (median_pass > 0) l.share = l.measured_seconds / median_pass;
    l.waste_seconds = std::max(0.0, l.measured_seconds - l.lower_bound_seconds);
  }
  run.unattributed_seconds = (pass - sum) * run.layer_scale;
}

void fill_contract(ProfileRun& run, const ModelRequest& request, const HardwareSpec& hw, const CellSession& session,
                   const RunEnvironment& device, const ProfileOptions& options) {
  auto& c = run.contract;
  for (const auto& [k, v] : session.model_environment) c[k] = v;
  device.describe(c, run.timing.counters, run.warnings);
  c["neural_cost_version"] = std::string(kVersion);
  c["device"] = run.device;
  c["hardware_id"] = hw.id;
  // host and host-spec name the threads their roof is for ("this machine (calibrated, 1 thread): ...")
  c["hardware_name"] = hw.name;
  c["hardware_origin"] = hw.origin;
  c["dtype"] = std::string(dtype_name(request.dtype));
  std::string shapes;
  for (const TensorDesc& t : run.analysis.graph.inputs()) {
    shapes += fmt::format("{}{}: {} {}", shapes.empty() ? "" : "; ", t.name, shape_string(t.shape), dtype_name(t.dtype));
  }
  c["input_shapes"] = shapes;
  c["batch"] = std::to_string(request.batch);
  c["counted_unit"] = fmt::format("samples ({} per {})", request.batch, options.run.train ? "training step" : "forward pass");
  if (options.run.train) describe_training(c, *options.run.train);
  c["warmup_iterations"] = std::to_string(run.timing.warmup_iterations);
  c["warmup_seconds"] = fmt::format("{:.3f}", run.timing.warmup_seconds);
  c["samples"] = std::to_string(run.timing.summary.n);
  c["synchronisation"] = session.synchronisation;
  c["clock"] = device.clock(run.timing);
  c["model_sizes"] = fmt::format("seq {}, width {}, depth {}", request.seq, request.width, request.depth);
  const TimingOptions& o = options.timing;
  const RoundOptions& ro = options.rounds;
  const TimingOptions round = round_timing(options, true);
  c["timing_options"] = fmt::format(
      "per round: warm-up >= {} runs and >= {} s after a preparation, >= {} runs and >= {} s after other cells ran; "
      "{}..{} samples; stop at the round's 95% CI <= {} of its median or after {:.3g} s (--budget {} s over {} "
      "rounds); clock-tick floor {}",
      round.warmup_iterations, round.warmup_seconds, round_timing(options, false).warmup_iterations,
      round_timing(options, false).warmup_seconds, round.min_samples, round.max_samples, o.target_relative_ci,
      round.budget_seconds, o.budget_seconds, ro.rounds, o.min_clock_ticks);
  c["rounds"] = fmt::format(
      "{} rounds ({} to {}, more while the interval is wider than +-{}) in {} preparation(s), interleaved in a seeded "
      "order (seed {}) with the other cells of the same model and batch; estimate: the median of the round medians; "
      "interval: order statistics {}..{} of the round medians, coverage {:.1f}%",
      run.estimate.rounds, ro.rounds, ro.max_rounds, ro.ok_half_width, run.preparations, ro.seed,
      run.estimate.interval.k, run.estimate.rounds + 1 - run.estimate.interval.k,
      100 * run.estimate.interval.coverage);
  c["layer_profiled_passes"] = std::to_string(options.layer_runs);
}

}  // namespace

TimingOptions round_timing(const ProfileOptions& options, bool after_preparation) {
  TimingOptions t = options.timing;
  t.budget_seconds = options.timing.budget_seconds / std::max(1, options.rounds.rounds);
  t.min_samples = std::min(t.min_samples, kRoundMinSamples);
  t.max_samples = std::max(t.max_samples, t.min_samples);
  t.pass_verdict = false;
  if (!after_preparation) {
    // the model is warm; what other cells left in the caches is part of the round
    t.warmup_iterations = std::max(1, t.warmup_iterations / 5);
    t.warmup_seconds = t.warmup_seconds / 10;
  }
  return t;
}

void open_session(CellSession& s, const HardwareSpec& hw, const ProfileOptions& options) {
  const CellPlan& plan = s.plan;
  ProfileRun& run = s.run;
  s.device = run_environment(options.run.device);
  s.model = plan.backend->prepare(plan.request, plan.mode, options.run);
  ++s.preparations;
  s.model_environment = s.model->environment();
  s.synchronisation = s.model->synchronisation();
  // training: the step graph of the forward ops that ran (their backward and optimizer records)
  s.forward = s.model->captured_graph();
  run.analysis = options.run.train ? analyze(training_step(s.forward, options.run.train->options), hw, {plan.request.batch})
                                   : analyze(s.forward, hw, {plan.request.batch});
  s.samplers = s.device->samplers(*s.model, plan.request.batch);
  s.opened = true;
  if (options.run.train) add_step_memory(run, *s.model);
  if (options.layer_runs <= 0) {
    s.model->pause();
    return;
  }
  // per-layer times are extra: when they cannot be had, the run keeps its timing
  try {
    for (int i = 0; i < options.timing.warmup_iterations; ++i) {
      throw_if_interrupted();
      s.model->run();
      s.model->synchronize();
    }
    LayerTiming lt = s.model->profile_layers(options.layer_runs);
    if (!lt.wall_seconds.empty()) {
      if (lt.step_phases != options.run.train.has_value()) {
        throw Error(ErrorCode::kInternal, lt.step_phases ? "the backend timed a step's phases for a forward run"
                                                         : "the backend timed forward ops, not a training step's phases");
      }
      s.layer_timing = std::move(lt);
    }
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {
    run.warnings.push_back(std::string("no per-layer times: ") + e.what());
  }
  s.model->pause();  // until its first round: other cells of its group are prepared and measured
}

void prepare_again(CellSession& s, const ProfileOptions& options) {
  close_model(s);
  s.model = s.plan.backend->prepare(s.plan.request, s.plan.mode, options.run);
  ++s.preparations;
  s.samplers = s.device->samplers(*s.model, s.plan.request.batch);
  s.model->pause();
}

void close_model(CellSession& s) {
  s.samplers.clear();
  s.model.reset();
}

Round time_round(CellSession& s, const ProfileOptions& options, bool after_preparation) {
  PreparedModel& model = *s.model;
  model.resume();
  // paused again whatever happens: its threads stay off the CPUs while the other cells run
  struct Pause {
    PreparedModel& m;
    ~Pause() { m.pause(); }
  } pause{model};
  TimedCallable work{[&] { model.run(); }, [&] { model.synchronize(); }, [&] { return model.last_run_seconds(); }, {}};
  for (const auto& sampler : s.samplers) work.samplers.push_back(sampler.get());
  TimingResult t = time_until_stable(work, round_timing(options, after_preparation));
  check_load(t);
  Round r;
  r.process = s.preparations - 1;
  r.samples_seconds = t.samples_seconds;
  r.summary = t.summary;
  r.reasons = t.reasons;
  if (!s.first_timing) {
    // the model's contract facts after it ran (a training step's losses, a worker's execution)
    s.model_environment = model.environment();
    s.first_timing = std::move(t);
  }
  return r;
}

ProfileRun finish_session(CellSession& s, const HardwareSpec& hw, const ProfileOptions& options,
                          const std::string& cut_short) {
  ProfileRun& run = s.run;
  run.preparations = s.preparations;
  try {
    if (s.rounds.empty()) {
      // a model that fails when it runs: its own error is the cell's
      if (!s.round_error.empty()) throw Error(ErrorCode::kDataLoss, s.round_error);
      throw Error(ErrorCode::kDataLoss, "no round was timed" + (cut_short.empty() ? "" : ": " + cut_short));
    }
    run.rounds = s.rounds;
    run.estimate = estimate_rounds(s.rounds);
    // the rounds' passes pooled, for their spread; the headline is the rounds' estimate
    const Counters at_open = run.timing.counters;  // a training step's measured memory
    run.timing = s.first_timing ? *s.first_timing : TimingResult{};
    run.timing.counters.insert(run.timing.counters.end(), at_open.begin(), at_open.end());
    run.timing.samples_seconds.clear();
    run.timing.sampling_seconds = 0;
    std::size_t mistrusted_rounds = 0;
    std::string first_reason;
    for (const Round& r : s.rounds) {
      run.timing.samples_seconds.insert(run.timing.samples_seconds.end(), r.samples_seconds.begin(), r.samples_seconds.end());
      for (double x : r.samples_seconds) run.timing.sampling_seconds += x;
      if (!r.reasons.empty()) {
        ++mistrusted_rounds;
        if (first_reason.empty()) {
          for (const std::string& why : r.reasons) first_reason += (first_reason.empty() ? "" : "; ") + why;
        }
      }
    }
    run.timing.summary = summarize(run.timing.samples_seconds);
    run.timing.summary.median = run.estimate.median_seconds;
    run.timing.summary.ci95_median = run.estimate.interval.interval;
    run.timing.reasons.clear();
    run.timing.reached_target = rounds_agree(run.estimate, options.rounds);
    if (mistrusted_rounds > 0) {
      const std::string what = fmt::format("{} of {} rounds were measured under conditions that distort them; the "
                                           "first: {}", mistrusted_rounds, s.rounds.size(), first_reason);
      // one loaded round among many is a round of the distribution; most of them is the cell
      if (2 * mistrusted_rounds > s.rounds.size()) run.timing.reasons.push_back(what);
      else run.warnings.push_back(what);
    }
    const std::string disagreement = rounds_disagreement(run.estimate, options.rounds);
    if (!disagreement.empty()) run.timing.reasons.push_back(disagreement);
    if (!cut_short.empty()) run.timing.reasons.push_back(cut_short);
    run.timing.verdict = run.timing.reasons.empty() ? Verdict::kOk : Verdict::kMistrusted;
    check_against_roofline(run.timing, run.analysis.totals.fused_lower_bound_seconds);
    const double t = run.timing.summary.median;
    if (!(t > 0)) {
      // a rate per 0 s is no number (it was null in JSON): the run failed to measure
      throw Error(ErrorCode::kDataLoss, "the median pass took 0 s by the backend's clock: too short to time, so no "
                                        "rate can be given (a larger batch or model measures)");
    }
    run.efficiency = run.analysis.totals.lower_bound_seconds / t;
    run.fused_efficiency = run.analysis.totals.fused_lower_bound_seconds / t;
    run.samples_per_second = static_cast<double>(s.plan.request.batch) / t;
    run.achieved_flops_per_second = static_cast<double>(run.analysis.totals.flops) / t;
    for (const std::string& why : run.timing.reasons) run.outcome.mistrust(why);
    if (s.plan.mismatch) run.warnings.push_back(*s.plan.mismatch);
    if (options.run.train) compare_with_ledger(run, s.forward, options.run.train->options);
    fill_contract(run, s.plan.request, hw, s, *s.device, options);
    if (!s.plan.chosen_by.empty()) run.contract["backend_chosen_by"] = s.plan.chosen_by;
    if (s.layer_timing) {
      try {
        const LayerTiming& lt = *s.layer_timing;
        // a step's phases, or each phase of each module when the backend says which it timed
        run.layers = !lt.step_phases             ? measure_layers(run.analysis, lt)
                     : lt.event_modules.empty() ? measure_phases(run.analysis, lt)
                                                : measure_step_layers(run.analysis, lt, run.warnings);
        if (!lt.timer.empty()) run.contract["layer_timer"] = lt.timer;
        if (!lt.timer_warning.empty()) run.warnings.push_back(lt.timer_warning);
        run.profiled_passes = static_cast<int>(lt.wall_seconds.size());
        run.profiled_pass_seconds = median(lt.wall_seconds);
        reconcile_layers(run);
        run.profiling_overhead =
            run.profiled_pass_seconds / (lt.plain_wall_seconds.empty() ? t : median(lt.plain_wall_seconds)) - 1;
      } catch (const Error& e) {
        run.layers.clear();
        run.warnings.push_back(std::string("no per-layer times: ") + e.what());
      }
    }
  } catch (const std::bad_alloc&) {
    run.outcome = Outcome::failure("out of memory (the model or the worker's reply is too large for this machine)");
  } catch (const std::exception& e) {
    run.outcome = Outcome::failure(e.what());
  }
  close_model(s);
  return run;
}

ProfileRun failed_cell(const CellPlan& plan, const ProfileOptions& options, const std::string& error) {
  ProfileRun r;
  r.backend = std::string(plan.backend->name());
  r.mode = plan.mode;
  r.model = plan.request.model;
  r.batch = plan.request.batch;
  r.device = options.run.device;
  r.outcome = Outcome::failure(error);
  if (!plan.chosen_by.empty()) r.contract["backend_chosen_by"] = plan.chosen_by;
  return r;
}

namespace {

/// Runs that record why `backend` could not run at all, one per batch and mode.
std::vector<ProfileRun> failed_runs(const Backend& backend, const ModelRequest& base, const ProfileOptions& options,
                                    const std::string& error) {
  std::vector<ProfileRun> failed;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : options.modes.empty() ? backend.modes() : options.modes) {
      ProfileRun r;
      r.backend = std::string(backend.name());
      r.mode = mode;
      r.model = base.model;
      r.batch = batch;
      r.device = options.run.device;
      r.outcome = Outcome::failure(error);
      failed.push_back(std::move(r));
      if (options.modes.empty()) break;
    }
  }
  return failed;
}

}  // namespace

void validate(const TrainHyperparameters& h) {
  const auto check = [](bool ok, const char* option, double value, const char* range) {
    if (!ok) throw Error(ErrorCode::kInvalidArgument, fmt::format("{} must be {} (got {})", option, range, value));
  };
  check(h.learning_rate > 0 && h.learning_rate <= 10, "--learning-rate", h.learning_rate, "more than 0 and at most 10");
  check(h.momentum >= 0 && h.momentum < 1, "--momentum", h.momentum, "at least 0 and less than 1");
  check(h.beta1 >= 0 && h.beta1 < 1, "--betas' first", h.beta1, "at least 0 and less than 1");
  check(h.beta2 >= 0 && h.beta2 < 1, "--betas' second", h.beta2, "at least 0 and less than 1");
  check(h.eps > 0 && h.eps <= 1, "--eps", h.eps, "more than 0 and at most 1");
  if (h.weight_decay) check(*h.weight_decay >= 0 && *h.weight_decay <= 1, "--weight-decay", *h.weight_decay, "from 0 to 1");
}

void validate(const ProfileOptions& options) {
  const RunOptions& run = options.run;
  if (run.threads < 0 || run.threads > 4096) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--threads must be 0 (library default) to 4096 (got {})", run.threads));
  }
  const double budget = options.timing.budget_seconds;
  if (!(budget > 0 && budget <= 3600)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--budget must be more than 0 and at most 3600 seconds (got {})", budget));
  }
  if (options.layer_runs > 100000) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--layer-runs must be at most 100000 (got {})", options.layer_runs));
  }
  if (!(run.worker_timeout_seconds > 0 && run.worker_timeout_seconds <= 86400)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--worker-timeout must be more than 0 and at most 86400 seconds "
                                                         "(got {})", run.worker_timeout_seconds));
  }
  parse_device(run.device);
  if (run.train) {
    validate(run.train->hyper);
    // what the backends run today; analyze --train counts the others
    if (run.train->options.precision != Precision::kFp32) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("--precision {}: measured training steps run in fp32 only (analyze --train counts it)",
                              precision_name(run.train->options.precision)));
    }
    if (run.train->options.checkpoint.kind != CheckpointKind::kNone) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("--checkpoint {}: measured training steps run without checkpointing only (analyze "
                              "--train counts it)", checkpoint_name(run.train->options.checkpoint)));
    }
  }
  validate(options.timing);
  const RoundOptions& r = options.rounds;
  if (r.rounds < 1 || r.rounds > 1000) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--rounds must be 1 to 1000 (got {})", r.rounds));
  }
  if (r.max_rounds < r.rounds || r.max_rounds > 1000) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-rounds must be from --rounds ({}) to 1000 (got {})", r.rounds, r.max_rounds));
  }
  if (r.processes < 1 || r.processes > r.rounds) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--preparations must be 1 to --rounds ({}) (got {}): each "
                                                         "preparation takes at least one round", r.rounds, r.processes));
  }
  if (!(r.ok_half_width > 0 && r.ok_half_width < 1)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--ok-within must be more than 0 and less than 100 percent (got {})", 100 * r.ok_half_width));
  }
  if (options.layer_runs < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--layer-runs must be >= 0 (got {})", options.layer_runs));
  }
  if (options.batches.empty()) throw Error(ErrorCode::kInvalidArgument, "no batch sizes to profile");
  for (std::int64_t b : options.batches) {
    if (b < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--batch must be at least 1 (got {})", b));
  }
}

void check_modes(const std::vector<const Backend*>& backends, const std::vector<std::string>& modes) {
  if (backends.size() == 1) {
    // one backend: its own modes, before anything slow (a calibration) runs; a backend that cannot
    // run here has no modes, so its reason comes first (not "has no mode 'eager' (modes: )")
    if (auto why = backends.front()->unavailable_reason()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("backend '{}' cannot run here: {}", backends.front()->name(), *why));
    }
    const auto known = backends.front()->modes();
    for (const std::string& m : modes) {
      if (std::find(known.begin(), known.end(), m) == known.end()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("backend '{}' has no mode '{}' (modes: {})",
                                                             backends.front()->name(), m, fmt::join(known, ", ")));
      }
    }
    return;
  }
  if (backends.empty()) return;
  for (const std::string& m : modes) {
    const bool known = std::any_of(backends.begin(), backends.end(), [&](const Backend* b) {
      const auto own = b->modes();
      return std::find(own.begin(), own.end(), m) != own.end();
    });
    if (!known) throw Error(ErrorCode::kInvalidArgument, fmt::format("no backend of --backend has a mode '{}'", m));
  }
}

void check_training(const std::vector<ModelBackends>& plan, const ProfileOptions& options) {
  if (!options.run.train) return;
  for (const ModelBackends& entry : plan) {
    if (!is_reference_model(entry.model)) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("--train runs the built-in networks only (ff, cnn, rnn, lstm, "
                                                         "transformer), not the model file '{}'", entry.model));
    }
  }
}

bool is_reference_model(const std::string& model) {
  const auto& reference = reference_model_names();
  return std::find(reference.begin(), reference.end(), model) != reference.end();
}

std::vector<CellPlan> backend_cells(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                    const ProfileOptions& options, const std::string& chosen_by) {
  if (auto why = backend.unavailable_reason()) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("backend '{}' cannot run here: {}", backend.name(), *why));
  }
  const auto known = backend.modes();
  std::vector<std::string> modes = options.modes.empty() ? std::vector<std::string>{known.front()} : options.modes;
  for (const std::string& m : modes) {
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("backend '{}' has no mode '{}' (modes: {})", backend.name(), m, fmt::join(known, ", ")));
    }
  }
  validate(options);
  check_device_offered(backend, options.run.device);
  const std::optional<std::string> mismatch =
      check_hardware_matches(hardware, options.run.device, options.allow_hardware_mismatch);
  std::vector<CellPlan> cells;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : modes) {
      CellPlan cell{&backend, base, mode, chosen_by, mismatch};
      cell.request.batch = batch;
      cells.push_back(std::move(cell));
    }
  }
  return cells;
}

std::vector<ProfileRun> profile(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                const ProfileOptions& options) {
  ScheduleHooks hooks;
  if (options.on_run) hooks.on_run = [&](const ProfileRun& r, std::size_t) { options.on_run(r); };
  return measure_cells(backend_cells(backend, base, hardware, options), hardware, options, std::move(hooks));
}

std::vector<ProfileRun> profile_all(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                    const HardwareSpec& hardware, const ProfileOptions& options) {
  validate(options);
  check_modes(backends_of(plan), options.modes);
  // the same for every backend: the command's error, not a failed run each
  check_hardware_matches(hardware, options.run.device, options.allow_hardware_mismatch);
  const std::vector<InputSpec> inputs = inputs_of(base);  // mixed or repeated inputs: before anything runs
  check_training(plan, options);
  std::vector<CellPlan> cells;
  // the runs in plan order: a failed backend's runs, or the index of a measured cell
  std::vector<std::variant<ProfileRun, std::size_t>> order;
  for (const ModelBackends& entry : plan) {
    ModelRequest request = base;
    request.model = entry.model;
    ProfileOptions these = options;
    if (!is_reference_model(entry.model)) {
      these.batches = {inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0]};
    }
    for (const Backend* backend : entry.backends) {
      std::vector<CellPlan> some;
      if (entry.backends.size() == 1) {
        some = backend_cells(*backend, request, hardware, these, entry.chosen_by);
      } else {
        try {
          some = backend_cells(*backend, request, hardware, these, entry.chosen_by);
        } catch (const Error& e) {
          // a backend that cannot run (unavailable, no such mode or device) fails its cells; the others go on
          for (ProfileRun& r : failed_runs(*backend, request, these, e.what())) {
            r.contract["backend_chosen_by"] = entry.chosen_by;
            if (options.on_run) options.on_run(r);
            order.emplace_back(std::move(r));
          }
        }
      }
      for (CellPlan& c : some) {
        order.emplace_back(cells.size());
        cells.push_back(std::move(c));
      }
    }
  }
  ScheduleHooks hooks;
  if (options.on_run) hooks.on_run = [&](const ProfileRun& r, std::size_t) { options.on_run(r); };
  const std::vector<ProfileRun> measured = measure_cells(cells, hardware, options, std::move(hooks));
  // measure_cells returns the finished cells in cell order (fewer after an interruption)
  std::vector<ProfileRun> runs;
  std::size_t next = 0;
  for (auto& slot : order) {
    if (auto* r = std::get_if<ProfileRun>(&slot)) {
      runs.push_back(std::move(*r));
      continue;
    }
    const CellPlan& c = cells[std::get<std::size_t>(slot)];
    if (next < measured.size() && measured[next].backend == c.backend->name() && measured[next].mode == c.mode &&
        measured[next].model == c.request.model && measured[next].batch == c.request.batch) {
      runs.push_back(measured[next++]);
    }
  }
  return runs;
}

std::vector<ProfileRun> profile_all(const std::vector<const Backend*>& backends, const std::vector<std::string>& models,
                                    const ModelRequest& base, const HardwareSpec& hardware, const ProfileOptions& options) {
  std::vector<ModelBackends> plan;
  for (const std::string& model : models) plan.push_back({model, backends, "--backend"});
  return profile_all(plan, base, hardware, options);
}

std::vector<const Backend*> backends_of(const std::vector<ModelBackends>& plan) {
  std::vector<const Backend*> all;
  for (const ModelBackends& entry : plan) {
    for (const Backend* b : entry.backends) {
      if (std::find(all.begin(), all.end(), b) == all.end()) all.push_back(b);
    }
  }
  return all;
}

}  // namespace neuralcost
