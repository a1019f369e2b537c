// The profiling pipeline (see profile.hpp). Backend-neutral: everything framework-specific
// comes through PreparedModel.
#include "neuralcost/measure/profile.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/statistics.hpp"
#include "neuralcost/measure/environment.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost {
namespace {

std::vector<LayerMeasurement> measure_layers(const Analysis& a, const LayerTiming& t) {
  std::vector<LayerMeasurement> layers(t.event_names.size());
  for (std::size_t e = 0; e < layers.size(); ++e) {
    layers[e].event = e;
    layers[e].name = t.event_names[e];
    if (!t.seconds[e].empty()) layers[e].measured_seconds = median(t.seconds[e]);
  }
  std::vector<double> largest(layers.size(), -1);
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    const auto e = static_cast<std::size_t>(op.attributes.get_int("event", -1));
    if (e >= layers.size()) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("op '{}' belongs to framework op #{}, but the profiler saw {} ops", op.name, e, layers.size()));
    }
    LayerMeasurement& l = layers[e];
    if (l.name != op.source_type) {
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
  for (LayerMeasurement& l : layers) {
    if (l.measured_seconds > 0) l.efficiency = l.lower_bound_seconds / l.measured_seconds;
  }
  return layers;
}

void fill_contract(ProfileRun& run, const ModelRequest& request, const HardwareSpec& hw, PreparedModel& model,
                   double faults, const ProfileOptions& options) {
  EnvironmentFacts env = detect_environment();
  auto& c = run.contract;
  for (const auto& [k, v] : model.environment()) c[k] = v;
  // a backend in another process (a worker) says which BLAS it loaded; else it is this process's
  check_blas(env, c.count("blas_library") ? c["blas_library"] : loaded_blas_library());
  check_page_faults(env, faults);
  const int intra = c.count("intra_op_threads") ? std::atoi(c["intra_op_threads"].c_str()) : 1;
  const int blas = c.count("openblas_threads") ? std::atoi(c["openblas_threads"].c_str()) : 1;
  check_oversubscription(env, intra, blas);
  for (const auto& [k, v] : env.variables) c[k == "blas_library" ? k : "env." + k] = v;
  c["neural_cost_version"] = std::string(kVersion);
  c["cpu_model"] = env.cpu_model;
  c["logical_cpus"] = std::to_string(env.logical_cpus);
  c["virtual_machine"] = env.virtual_machine ? "yes" : "no";
  c["hardware_id"] = hw.id;
  c["hardware_origin"] = hw.origin;
  c["dtype"] = std::string(dtype_name(request.dtype));
  std::string shapes;
  for (const TensorDesc& t : run.analysis.graph.inputs()) {
    shapes += fmt::format("{}{}: {} {}", shapes.empty() ? "" : "; ", t.name, shape_string(t.shape), dtype_name(t.dtype));
  }
  c["input_shapes"] = shapes;
  c["batch"] = std::to_string(request.batch);
  c["counted_unit"] = fmt::format("samples ({} per forward pass)", request.batch);
  c["warmup_iterations"] = std::to_string(run.timing.warmup_iterations);
  c["warmup_seconds"] = fmt::format("{:.3f}", run.timing.warmup_seconds);
  c["samples"] = std::to_string(run.timing.summary.n);
  c["synchronisation"] = model.synchronisation();
  if (run.timing.backend_clock) {
    c["clock"] = "the backend's own clock around each forward pass (a worker: time.perf_counter_ns)";
  } else {
    c["clock"] = fmt::format("std::chrono::steady_clock, resolution {:.3g} s", run.timing.clock_resolution_seconds);
  }
  c["page_faults_per_iteration"] = fmt::format("{:.1f}", faults);
  c["model_sizes"] = fmt::format("seq {}, width {}, depth {}", request.seq, request.width, request.depth);
  const TimingOptions& o = options.timing;
  c["timing_options"] = fmt::format(
      "warm-up >= {} runs and >= {} s; {}..{} samples; stop at 95% CI <= {} of the median or after {} s; "
      "CV limit {}; clock-tick floor {}",
      o.warmup_iterations, o.warmup_seconds, o.min_samples, o.max_samples, o.target_relative_ci, o.budget_seconds,
      o.max_cv, o.min_clock_ticks);
  c["layer_profiled_passes"] = std::to_string(options.layer_runs);
  run.warnings = env.warnings;
}

ProfileRun profile_one(const Backend& backend, ModelRequest request, const std::string& mode, const HardwareSpec& hw,
                       const ProfileOptions& options) {
  ProfileRun run;
  run.backend = std::string(backend.name());
  run.mode = mode;
  run.model = request.model;
  run.batch = request.batch;
  try {
    std::unique_ptr<PreparedModel> model = backend.prepare(request, mode);
    run.analysis = analyze(model->captured_graph(), hw, {request.batch});
    run.timing = time_until_stable(
        {[&] { model->run(); }, [&] { model->synchronize(); }, [&] { return model->last_run_seconds(); }},
        options.timing);
    check_against_roofline(run.timing, run.analysis.totals.fused_lower_bound_seconds);
    const double t = run.timing.summary.median;
    run.efficiency = run.analysis.totals.lower_bound_seconds / t;
    run.fused_efficiency = run.analysis.totals.fused_lower_bound_seconds / t;
    run.samples_per_second = static_cast<double>(request.batch) / t;
    run.achieved_flops_per_second = static_cast<double>(run.analysis.totals.flops) / t;
    const double faults = model->page_faults_per_run(5);
    fill_contract(run, request, hw, *model, faults, options);
    if (options.layer_runs > 0) {
      // per-layer times are extra: when they cannot be had, the run keeps its timing
      try {
      const LayerTiming lt = model->profile_layers(options.layer_runs);
      if (!lt.wall_seconds.empty()) {
        run.layers = measure_layers(run.analysis, lt);
        run.profiled_passes = static_cast<int>(lt.wall_seconds.size());
        run.profiled_pass_seconds = median(lt.wall_seconds);
        double sum = 0;
        for (const LayerMeasurement& l : run.layers) sum += l.measured_seconds;
        run.unattributed_seconds = run.profiled_pass_seconds - sum;
        run.profiling_overhead =
            run.profiled_pass_seconds / (lt.plain_wall_seconds.empty() ? t : median(lt.plain_wall_seconds)) - 1;
      }
      } catch (const Error& e) {
        run.layers.clear();
        run.warnings.push_back(std::string("no per-layer times: ") + e.what());
      }
    }
  } catch (const std::exception& e) {
    run.failed = true;
    run.error = e.what();
  }
  return run;
}

}  // namespace

void validate(const ProfileOptions& options) {
  validate(options.timing);
  if (options.layer_runs < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--layer-runs must be >= 0 (got {})", options.layer_runs));
  }
  if (options.batches.empty()) throw Error(ErrorCode::kInvalidArgument, "no batch sizes to profile");
  for (std::int64_t b : options.batches) {
    if (b < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--batch must be at least 1 (got {})", b));
  }
}

double PreparedModel::page_faults_per_run(int iterations) {
  return page_faults_per_iteration([&] { run(); synchronize(); }, iterations);
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
  std::vector<ProfileRun> runs;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : modes) {
      ModelRequest request = base;
      request.batch = batch;
      runs.push_back(profile_one(backend, request, mode, hardware, options));
    }
  }
  return runs;
}

}  // namespace neuralcost
