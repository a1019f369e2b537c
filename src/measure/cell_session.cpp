// A cell's sessions (cell_session.hpp): preparing and analysing a cell, timing its rounds and
// finishing its run from them. The schedule (schedule.cpp) decides when each happens.
#include "measure/cell_session.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "measure/layer_attribution.hpp"
#include "measure/step_layers.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/measure/model_files.hpp"
#include "neuralcost/measure/schedule.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/version.hpp"

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
    run.timing.counters.push_back(
        {"step_start_memory", static_cast<double>(*m.start_bytes), "B", Counter::Kind::kTotal});
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
  run.contract["memory_verdict"] = fmt::format(
      "measured peak {} B is {} the ledger's [{}, {}] B (parameters, buffers and optimizer state {} B + "
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

/// A measured step's options: its mixed precision is torch.autocast's, whose casts and dtypes the
/// captured forward graph holds (TrainingOptions::autocast).
TrainingOptions measured_step(TrainingOptions options) {
  options.autocast = options.precision != Precision::kFp32;
  return options;
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
  if (o == Optimizer::kAdam || o == Optimizer::kAdamW)
    hyper += fmt::format(", betas ({}, {}), eps {}", h.beta1, h.beta2, h.eps);
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
        "overlap (nested or asynchronous ops), so no time is left unattributed",
        sum * 1e3, pass * 1e3));
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
    shapes +=
        fmt::format("{}{}: {} {}", shapes.empty() ? "" : "; ", t.name, shape_string(t.shape), dtype_name(t.dtype));
  }
  c["input_shapes"] = shapes;
  c["batch"] = std::to_string(request.batch);
  c["counted_unit"] =
      fmt::format("samples ({} per {})", request.batch, options.run.train ? "training step" : "forward pass");
  if (options.run.train) describe_training(c, *options.run.train);
  c["warmup_iterations"] = std::to_string(run.timing.warmup_iterations);
  c["warmup_seconds"] = fmt::format("{:.3f}", run.timing.warmup_seconds);
  c["samples"] = std::to_string(run.timing.summary.n);
  c["synchronisation"] = session.synchronisation;
  c["clock"] = device.clock(run.timing);
  if (model_kind(request.model) == ModelKind::kDecoderConfig) {
    // a decoder's sizes are its config's; the run's are the phase's
    const bool prefill = request.phase == "prefill";
    c["model_sizes"] =
        prefill ? fmt::format("prefill of {} tokens per sequence into an empty KV cache", request.prompt)
                : fmt::format("decode of 1 token per sequence over a KV cache of {} tokens", request.context);
    c["tokens_per_sample"] = std::to_string(prefill ? request.prompt : 1);
  } else {
    c["model_sizes"] = fmt::format("seq {}, width {}, depth {}", request.seq, request.width, request.depth);
  }
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
      "order (seed {}) with the other cells of the same model and batch{}; estimate: the median of the round medians; "
      "interval: order statistics {}..{} of the round medians, coverage {:.1f}%",
      run.estimate.rounds, ro.rounds, ro.max_rounds, ro.ok_half_width, run.preparations, ro.seed,
      options.run.device.is_cpu()
          ? fmt::format(", pass by pass (a round's visits of >= {:g} ms in turn with theirs, each begun by "
                        "one untimed pass that finds the model warm again)",
                        1e3 * kInterleavedVisitSeconds)
          : std::string(),
      run.estimate.interval.k, run.estimate.rounds + 1 - run.estimate.interval.k, 100 * run.estimate.interval.coverage);
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
  run.analysis = options.run.train ? analyze(training_step(s.forward, measured_step(options.run.train->options)), hw,
                                             {plan.request.batch})
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
        throw Error(ErrorCode::kInternal, lt.step_phases
                                              ? "the backend timed a step's phases for a forward run"
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

std::unique_ptr<TimingWindow> begin_round(CellSession& s, const ProfileOptions& options, bool after_preparation) {
  PreparedModel& model = *s.model;
  TimedCallable work{
      [&model] { model.run(); }, [&model] { model.synchronize(); }, [&model] { return model.last_run_seconds(); }, {}};
  for (const auto& sampler : s.samplers) work.samplers.push_back(sampler.get());
  auto window = std::make_unique<TimingWindow>(std::move(work), round_timing(options, after_preparation));
  model.resume();
  try {
    window->warm_up();
  } catch (...) {
    model.pause();  // its threads stay off the CPUs while the other cells run
    throw;
  }
  return window;
}

Round end_round(CellSession& s, TimingWindow& window) {
  s.model->pause();  // its threads stay off the CPUs while the other cells run
  TimingResult t = window.finish();
  check_load(t);
  Round r;
  r.process = s.preparations - 1;
  r.samples_seconds = t.samples_seconds;
  r.summary = t.summary;
  r.reasons = t.reasons;
  if (const Counter* growth = find_counter(t.counters, "memory_growth")) r.memory_growth_bytes = growth->value;
  if (!s.first_timing) {
    // the model's contract facts after it ran (a training step's losses, a worker's execution)
    s.model_environment = s.model->environment();
    s.first_timing = std::move(t);
  }
  return r;
}

Round time_round(CellSession& s, const ProfileOptions& options, bool after_preparation) {
  std::unique_ptr<TimingWindow> window = begin_round(s, options, after_preparation);
  try {
    window->visit(std::numeric_limits<double>::infinity());
  } catch (...) {
    s.model->pause();
    throw;
  }
  return end_round(s, *window);
}

ProfileRun finish_session(CellSession& s, const HardwareSpec& hw, const ProfileOptions& options,
                          const std::string& cut_short, const MachineLevel& level) {
  ProfileRun& run = s.run;
  run.preparations = s.preparations;
  try {
    if (s.rounds.empty()) {
      // a model that fails when it runs: its own error is the cell's
      if (!s.round_error.empty()) throw Error(ErrorCode::kDataLoss, s.round_error);
      throw Error(ErrorCode::kDataLoss, "no round was timed" + (cut_short.empty() ? "" : ": " + cut_short));
    }
    run.rounds = s.rounds;
    run.estimate = estimate_rounds(s.rounds, level);
    // the rounds' passes pooled, for their spread; the headline is the rounds' estimate
    const Counters at_open = run.timing.counters;  // a training step's measured memory
    run.timing = s.first_timing ? *s.first_timing : TimingResult{};
    run.timing.counters.insert(run.timing.counters.end(), at_open.begin(), at_open.end());
    run.timing.samples_seconds.clear();
    run.timing.sampling_seconds = 0;
    std::size_t mistrusted_rounds = 0;
    std::string first_reason;
    for (const Round& r : s.rounds) {
      run.timing.samples_seconds.insert(run.timing.samples_seconds.end(), r.samples_seconds.begin(),
                                        r.samples_seconds.end());
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
      const std::string what = fmt::format(
          "{} of {} rounds were measured under conditions that distort them; the "
          "first: {}",
          mistrusted_rounds, s.rounds.size(), first_reason);
      // one loaded round among many is a round of the distribution; most of them is the cell
      if (2 * mistrusted_rounds > s.rounds.size())
        run.timing.reasons.push_back(what);
      else
        run.warnings.push_back(what);
    }
    // the intra-op threads split a CPU cell's rounds; a GPU's kernels do not run on them
    const auto threads = s.model_environment.find("intra_op_threads");
    const int cpu_threads =
        options.run.device.is_cpu() && threads != s.model_environment.end() ? std::atoi(threads->second.c_str()) : 0;
    const std::string disagreement = rounds_disagreement(run.estimate, options.rounds, cpu_threads);
    if (!disagreement.empty()) run.timing.reasons.push_back(disagreement);
    const MemoryGrowth growth = memory_growth(s.rounds);
    if (!growth.reason.empty()) run.timing.reasons.push_back(growth.reason);
    if (!cut_short.empty()) run.timing.reasons.push_back(cut_short);
    run.timing.verdict = run.timing.reasons.empty() ? Verdict::kOk : Verdict::kMistrusted;
    check_against_roofline(run.timing, run.analysis.totals.fused_lower_bound_seconds);
    const double t = run.timing.summary.median;
    if (!(t > 0)) {
      // a rate per 0 s is no number (it was null in JSON): the run failed to measure
      throw Error(ErrorCode::kDataLoss,
                  "the median pass took 0 s by the backend's clock: too short to time, so no "
                  "rate can be given (a larger batch or model measures)");
    }
    run.efficiency = run.analysis.totals.lower_bound_seconds / t;
    run.fused_efficiency = run.analysis.totals.fused_lower_bound_seconds / t;
    // the timing's interval, and the roofs' own uncertainty (a calibration's: bound / (1 ± u))
    const double u = std::clamp(hw.roof_uncertainty, 0.0, 0.5);
    const Interval& ci = run.timing.summary.ci95_median;
    const auto interval_of = [&](double bound) {
      return Interval{ci.high > 0 ? bound / (1 + u) / ci.high : 0.0, ci.low > 0 ? bound / (1 - u) / ci.low : 0.0};
    };
    run.efficiency_interval = interval_of(run.analysis.totals.lower_bound_seconds);
    run.fused_efficiency_interval = interval_of(run.analysis.totals.fused_lower_bound_seconds);
    run.samples_per_second = static_cast<double>(s.plan.request.batch) / t;
    run.achieved_flops_per_second = static_cast<double>(run.analysis.totals.flops) / t;
    for (const std::string& why : run.timing.reasons) run.outcome.mistrust(why);
    if (s.plan.mismatch) run.warnings.push_back(*s.plan.mismatch);
    if (options.run.train) compare_with_ledger(run, s.forward, measured_step(options.run.train->options));
    fill_contract(run, s.plan.request, hw, s, *s.device, options);
    if (!s.plan.chosen_by.empty()) run.contract["backend_chosen_by"] = s.plan.chosen_by;
    if (s.layer_timing) {
      try {
        const LayerTiming& lt = *s.layer_timing;
        // a step's phases, or each phase of each module when the backend says which it timed
        run.layers = !lt.step_phases            ? measure_layers(run.analysis, lt)
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
  r.device = options.run.device.name();
  r.outcome = Outcome::failure(error);
  if (!plan.chosen_by.empty()) r.contract["backend_chosen_by"] = plan.chosen_by;
  return r;
}

}  // namespace neuralcost
