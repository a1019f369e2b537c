// The profiling pipeline (see profile.hpp). Backend-neutral: everything framework-specific
// comes through PreparedModel, everything device-specific through RunEnvironment.
#include "neuralcost/measure/profile.hpp"

#include <algorithm>
#include <new>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/measure/statistics.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/version.hpp"
#include "measure/step_layers.hpp"

namespace neuralcost {
namespace {

/// The longest dotted prefix common to `names` ("encoder0.norm1", "encoder0.linear1" ->
/// "encoder0"); "" when they share none.
std::string common_prefix(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string prefix = names.front();
  for (const std::string& n : names) {
    std::size_t i = 0;
    while (i < prefix.size() && i < n.size() && prefix[i] == n[i]) ++i;
    // cut back to a whole component: "block1" and "block10" share no "block1"
    const bool whole = (i == prefix.size() || prefix[i] == '.') && (i == n.size() || n[i] == '.');
    if (!whole) {
      const std::size_t dot = i == 0 ? std::string::npos : prefix.rfind('.', i - 1);
      i = dot == std::string::npos ? 0 : dot;
    }
    prefix.resize(i);
  }
  return prefix;
}

/// The distinct names of `names` in order, joined by "+" ("stage0.relu+stage0.bn"), at most
/// three and then how many more.
std::string joined(const std::vector<std::string>& names) {
  std::vector<std::string> distinct;
  for (const std::string& n : names) {
    if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
  }
  std::string out;
  for (std::size_t i = 0; i < distinct.size() && i < 3; ++i) out += (i ? "+" : "") + distinct[i];
  if (distinct.size() > 3) out += fmt::format("+{} more", distinct.size() - 3);
  return out;
}

/// The module of the weights a record reads: "block0.linear" from block0.linear.weight/bias.
std::string module_of_parameters(const OpRecord& op) {
  std::vector<std::string> modules;
  for (const ParameterDesc& p : op.parameters) {
    const std::size_t dot = p.id.rfind('.');
    if (dot != std::string::npos && dot > 0) modules.push_back(p.id.substr(0, dot));
  }
  return common_prefix(modules);
}

/// Names, kinds and output shapes of the layers, from their records (see LayerMeasurement).
void describe_layers(std::vector<LayerMeasurement>& layers, const OpGraph& graph, const LayerTiming& t) {
  for (LayerMeasurement& l : layers) {
    std::vector<std::string> modules;
    std::vector<std::string> weights;
    bool every_record_has_weights = true;
    l.kind = l.records.empty() ? "none" : "";
    for (std::size_t i : l.records) {
      const OpRecord& op = graph.op(i);
      const std::string module = op.attributes.get_string("module", "");
      if (!module.empty()) modules.push_back(module);
      const std::string w = module_of_parameters(op);
      if (!w.empty()) weights.push_back(w);
      every_record_has_weights = every_record_has_weights && !w.empty();
      const std::string kind(op_kind_name(op.kind));
      l.kind = l.kind.empty() || l.kind == kind ? kind : "fused";
      if (!op.outputs.empty()) l.output_shape = shape_string(op.outputs.front().shape);
    }
    if (l.event < t.event_modules.size() && !t.event_modules[l.event].empty()) {
      l.module = t.event_modules[l.event];
    } else if (!modules.empty()) {
      l.module = common_prefix(modules);
      if (l.module.empty()) l.module = joined(modules);  // a kernel that fused unrelated layers
    }
    // the weights name a module inside the scope more precisely (encoder0 -> encoder0.linear1),
    // unless some record reads none: a kernel that fused block0.linear with block0.relu is
    // block0, not block0.linear
    const std::string w = common_prefix(weights);
    if (l.module.empty() || (every_record_has_weights && w.rfind(l.module + ".", 0) == 0)) l.module = w;
  }
}

std::vector<LayerMeasurement> measure_layers(const Analysis& a, const LayerTiming& t) {
  std::vector<LayerMeasurement> layers(t.event_names.size());
  for (std::size_t e = 0; e < layers.size(); ++e) {
    layers[e].event = e;
    layers[e].name = t.event_names[e];
    if (!t.seconds[e].empty()) layers[e].profiled_seconds = median(t.seconds[e]);
  }
  std::vector<double> largest(layers.size(), -1);
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    const std::int64_t event = op.attributes.get_int("event", -1);
    if (t.kernel_events && event < 0) continue;  // no kernel ran it: unattributed
    const auto e = static_cast<std::size_t>(event);
    if (e >= layers.size()) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("op '{}' belongs to framework op #{}, but the profiler saw {} ops", op.name, e, layers.size()));
    }
    LayerMeasurement& l = layers[e];
    if (!t.kernel_events && l.name != op.source_type) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("profiled op #{} is '{}' but the captured op is '{}': the runs differ", e, l.name, op.source_type));
    }
    l.records.push_back(r.op_index);
    l.flops += r.cost.flops;
    l.bytes += r.cost.bytes();
    l.lower_bound_seconds += r.lower_bound_seconds;
    l.modeled = l.modeled && r.cost.modeled;
    if (r.lower_bound_seconds > largest[e]) largest[e] = r.lower_bound_seconds, l.bound = r.bound;
  }
  describe_layers(layers, a.graph, t);
  return layers;
}

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

void fill_contract(ProfileRun& run, const ModelRequest& request, const HardwareSpec& hw, PreparedModel& model,
                   const RunEnvironment& device, const ProfileOptions& options) {
  auto& c = run.contract;
  for (const auto& [k, v] : model.environment()) c[k] = v;
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
  c["synchronisation"] = model.synchronisation();
  c["clock"] = device.clock(run.timing);
  c["model_sizes"] = fmt::format("seq {}, width {}, depth {}", request.seq, request.width, request.depth);
  const TimingOptions& o = options.timing;
  c["timing_options"] = fmt::format(
      "warm-up >= {} runs and >= {} s; {}..{} samples; stop at 95% CI <= {} of the median or after {} s; "
      "CV limit {}; p5 below the CI by at most {} of the median; clock-tick floor {}",
      o.warmup_iterations, o.warmup_seconds, o.min_samples, o.max_samples, o.target_relative_ci, o.budget_seconds,
      o.max_cv, o.max_p5_gap, o.min_clock_ticks);
  c["layer_profiled_passes"] = std::to_string(options.layer_runs);
}

ProfileRun profile_one(const Backend& backend, ModelRequest request, const std::string& mode, const HardwareSpec& hw,
                       const ProfileOptions& options, const std::optional<std::string>& mismatch) {
  ProfileRun run;
  run.backend = std::string(backend.name());
  run.mode = mode;
  run.model = request.model;
  run.batch = request.batch;
  run.device = options.run.device;
  try {
    const std::unique_ptr<RunEnvironment> device = run_environment(options.run.device);
    std::unique_ptr<PreparedModel> model = backend.prepare(request, mode, options.run);
    // training: the step graph of the forward ops that ran (their backward and optimizer records)
    OpGraph forward = model->captured_graph();
    run.analysis = options.run.train ? analyze(training_step(forward, options.run.train->options), hw, {request.batch})
                                     : analyze(std::move(forward), hw, {request.batch});
    const std::vector<std::unique_ptr<Sampler>> samplers = device->samplers(*model, request.batch);
    TimedCallable work{[&] { model->run(); }, [&] { model->synchronize(); }, [&] { return model->last_run_seconds(); }, {}};
    for (const auto& s : samplers) work.samplers.push_back(s.get());
    run.timing = time_until_stable(work, options.timing);
    check_load(run.timing);
    check_against_roofline(run.timing, run.analysis.totals.fused_lower_bound_seconds);
    const double t = run.timing.summary.median;
    if (!(t > 0)) {
      // a rate per 0 s is no number (it was null in JSON): the run failed to measure
      throw Error(ErrorCode::kDataLoss, "the median pass took 0 s by the backend's clock: too short to time, so no "
                                        "rate can be given (a larger batch or model measures)");
    }
    run.efficiency = run.analysis.totals.lower_bound_seconds / t;
    run.fused_efficiency = run.analysis.totals.fused_lower_bound_seconds / t;
    run.samples_per_second = static_cast<double>(request.batch) / t;
    run.achieved_flops_per_second = static_cast<double>(run.analysis.totals.flops) / t;
    for (const std::string& why : run.timing.reasons) run.outcome.mistrust(why);
    if (mismatch) run.warnings.push_back(*mismatch);
    if (options.run.train) {
      add_step_memory(run, *model);
      compare_with_ledger(run, forward, options.run.train->options);
    }
    fill_contract(run, request, hw, *model, *device, options);
    if (options.layer_runs > 0) {
      // per-layer times are extra: when they cannot be had, the run keeps its timing
      try {
      const LayerTiming lt = model->profile_layers(options.layer_runs);
      if (!lt.wall_seconds.empty()) {
        if (lt.step_phases != options.run.train.has_value()) {
          throw Error(ErrorCode::kInternal, lt.step_phases ? "the backend timed a step's phases for a forward run"
                                                           : "the backend timed forward ops, not a training step's phases");
        }
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
      }
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
  return run;
}

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

std::vector<ProfileRun> profile(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                const ProfileOptions& options) {
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
  std::vector<ProfileRun> runs;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : modes) {
      ModelRequest request = base;
      request.batch = batch;
      runs.push_back(profile_one(backend, request, mode, hardware, options, mismatch));
      if (options.on_run) options.on_run(runs.back());
      if (interrupted()) return runs;
    }
  }
  return runs;
}

std::vector<ProfileRun> profile_all(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                    const HardwareSpec& hardware, const ProfileOptions& options) {
  validate(options);
  check_modes(backends_of(plan), options.modes);
  // the same for every backend: the command's error, not a failed run each
  check_hardware_matches(hardware, options.run.device, options.allow_hardware_mismatch);
  const std::vector<InputSpec> inputs = inputs_of(base);  // mixed or repeated inputs: before anything runs
  check_training(plan, options);
  std::vector<ProfileRun> runs;
  for (const ModelBackends& entry : plan) {
    ModelRequest request = base;
    request.model = entry.model;
    ProfileOptions these = options;
    if (!is_reference_model(entry.model)) {
      these.batches = {inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0]};
    }
    these.on_run = [&](const ProfileRun& r) {
      if (!options.on_run) return;
      ProfileRun chosen = r;
      chosen.contract["backend_chosen_by"] = entry.chosen_by;
      options.on_run(chosen);
    };
    for (const Backend* backend : entry.backends) {
      std::vector<ProfileRun> some;
      if (entry.backends.size() == 1) {
        some = profile(*backend, request, hardware, these);
      } else {
        try {
          some = profile(*backend, request, hardware, these);
        } catch (const Error& e) {
          some = failed_runs(*backend, request, these, e.what());
          for (const ProfileRun& r : some) these.on_run(r);
        }
      }
      for (ProfileRun& r : some) {
        r.contract["backend_chosen_by"] = entry.chosen_by;
        runs.push_back(std::move(r));
      }
      if (interrupted()) return runs;
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
