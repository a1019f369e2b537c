// Profiling real runs: for each mode and batch, capture the ops that ran, analyse them on the
// roofline, time the model under the timing contract on the run's device (with the device's
// samplers around the timed phase), time each layer with the backend's profiler, and record the
// contract. A run that fails is recorded with its error and the others go on. The checks of a
// profile request (options, modes, device, hardware spec against device) are here too: the CLI
// only parses and wires.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/backend.hpp"
#include "neuralcost/measure/model_files.hpp"
#include "neuralcost/measure/outcome.hpp"
#include "neuralcost/measure/rounds.hpp"
#include "neuralcost/measure/timing.hpp"

namespace neuralcost {

struct ProfileRun;

struct ProfileOptions {
  std::vector<std::string> modes;  ///< empty: the backend's default mode
  std::vector<std::int64_t> batches = {1};
  /// One round's sampling (warm-up, samples, stop rule); budget_seconds is the cell's sampling
  /// budget, split evenly over its rounds
  TimingOptions timing;
  int layer_runs = 20;  ///< profiled passes for per-layer times (0: skip)
  /// device, threads, worker deadline; with `train`, every run times whole training steps and
  /// its analysis is that of training_step() of the captured forward graph: efficiency, FLOP/s
  /// and samples/s are per step, and per-layer times are the step's phases
  RunOptions run;
  /// Accept a hardware spec of another kind of device than run.device (each run then carries a
  /// warning); refused otherwise (measure/device.hpp, check_hardware_matches).
  bool allow_hardware_mismatch = false;
  /// Called as each run ends, failed ones too (to write results as they finish, to show
  /// progress). After SIGINT/SIGTERM (core/interrupt.hpp) the run in progress ends as failed
  /// ("interrupted by ..."), is passed here, and no further run starts.
  std::function<void(const ProfileRun&)> on_run;
  /// The rounds of each cell and how they are scheduled (measure/rounds.hpp, schedule.hpp); last,
  /// so that positional initialisers of the fields above keep their meaning
  RoundOptions rounds;
};

/// One framework op of a run (it may have become several op records).
struct LayerMeasurement {
  std::size_t event = 0;
  std::string name;  ///< the framework's name, e.g. "aten::linear"
  /// the module path users know ("stage0.conv"): the event's, else the longest dotted prefix
  /// common to its records' "module" attributes (their distinct modules joined by "+" when they
  /// share none: a kernel that fused unrelated layers), else the module of the weights they
  /// read ("block0.linear" from block0.linear.weight), which also wins when it lies inside the
  /// module found and every record reads weights ("encoder0" -> "encoder0.linear1"; a kernel
  /// that fused block0.linear with block0.relu stays block0); "" when nothing names it
  std::string module;
  /// Training, per-layer rows of a step: the phase the row times ("forward", "backward",
  /// "optimizer"), the row then being that phase of `module` (measure/step_layers.hpp); "" for
  /// the layers of a forward run and for whole-phase rows ("step: forward")
  std::string pass;
  /// the op kind of its records ("linear"), "fused" when they are of several kinds, "none"
  /// when the op became no record (a view, a metadata call)
  std::string kind;
  std::string output_shape;          ///< of its last record's first output ("32x128"), "" without records
  std::vector<std::size_t> records;  ///< indices into ProfileRun::analysis.ops
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  double lower_bound_seconds = 0;
  double profiled_seconds = 0;  ///< median over the profiled passes (with the profiler's overhead)
  /// profiled_seconds scaled so that the layers and the unattributed time add up to the run's
  /// timed median: the profiler's overhead taken as proportional (ProfileRun::layer_scale)
  double measured_seconds = 0;
  double efficiency = 0;       ///< lower bound / measured (0 when nothing was measured)
  double share = 0;            ///< measured / the run's timed median
  double waste_seconds = 0;    ///< measured - lower bound (0 when faster than the bound)
  std::optional<Bound> bound;  ///< the roof of its records' largest lower bound
  bool modeled = true;
};

struct ProfileRun {
  std::string backend;
  std::string mode;
  std::string model;
  std::int64_t batch = 0;
  std::string device = "cpu";
  /// ok, mistrusted (the timing contract's and the roofline's reasons) or failed (its error).
  Outcome outcome;
  Analysis analysis;  ///< of the ops that actually ran
  /// The passes of every round pooled (samples_seconds, spread), with the counters of the first
  /// round; its summary's median and ci95_median are the rounds' estimate and interval
  TimingResult timing;
  std::vector<Round> rounds;  ///< the cell's rounds, in the order taken
  RoundsEstimate estimate;    ///< from the rounds: the run's median and interval
  int preparations = 0;       ///< how many times the model was prepared (worker processes)
  /// analysis lower bound / median time. Above 1 means the run beat the unfused bound (the
  /// framework fused or reused data in cache); only beating the fused bound is mistrusted.
  double efficiency = 0;
  double fused_efficiency = 0;  ///< fused lower bound / median time
  /// The efficiencies' intervals: the bound over the ends of the timing's 95% interval, the bound
  /// itself widened by the roofs' uncertainty (HardwareSpec::roof_uncertainty: a calibration's
  /// round-to-round disagreement) as bound / (1 ± u)
  Interval efficiency_interval, fused_efficiency_interval;
  double samples_per_second = 0;
  double achieved_flops_per_second = 0;
  std::vector<LayerMeasurement> layers;
  int profiled_passes = 0;           ///< passes run under the profiler for per-layer times
  double profiled_pass_seconds = 0;  ///< median wall time of the profiled passes
  /// the timed median - the layers' measured times: dispatch and framework overhead (never negative)
  double unattributed_seconds = 0;
  double layer_scale = 1;  ///< timed median / profiled pass: what reconciles layers to the run
  /// profiled pass / plain pass - 1, over passes interleaved with the profiled ones
  double profiling_overhead = 0;
  /// Training: the measured peak memory of one step (also the counters step_peak_memory and
  /// step_start_memory, and the contract's memory_source and memory_includes); empty when the
  /// backend has no telemetry (a warning says so) or the run is a forward pass.
  std::optional<StepMemory> step_memory;
  std::map<std::string, std::string> contract;  ///< everything needed to reproduce the figure
  std::vector<std::string> warnings;            ///< facts that distort this measurement
};

/// Throws kInvalidArgument naming the option when a training hyperparameter is out of range
/// (learning rate, momentum, betas, eps, weight decay).
void validate(const TrainHyperparameters& hyper);

/// Throws kInvalidArgument naming the option when `options` cannot work with any backend
/// (ranges of threads, budget, layer runs, worker deadline; batches; timing options; device name).
void validate(const ProfileOptions& options);

/// With several backends, a mode that none of them has is a typo: kInvalidArgument naming it.
/// (With one backend, profile() names the backend's own modes.)
void check_modes(const std::vector<const Backend*>& backends, const std::vector<std::string>& modes);

/// Training (options.run.train) runs the built-in networks only: kUnimplemented naming a model
/// file of `plan`.
void check_training(const std::vector<ModelBackends>& plan, const ProfileOptions& options);

/// Whether `model` is one of the reference networks.
bool is_reference_model(const std::string& model);
/// Whether --batch sizes `model`: a reference network or a decoder's config.json (a model file's
/// batch is the first dimension of its first input).
bool batch_is_an_option(const std::string& model);

/// The model options `base` says the user set (ModelRequest::given, inputs) against the models of
/// `plan`: a decoder's config.json takes --batch, --dtype, --phase (prefill or decode: one phase is
/// one timed pass), --prompt with prefill and --context with decode, and neither --seq, --width,
/// --depth nor inputs; --phase, --prompt and --context apply to decoders only. kInvalidArgument
/// naming the option and the model.
void check_model_options(const std::vector<ModelBackends>& plan, const ModelRequest& base);

/// Profiles `base` (model, sizes) on `backend` (on options.run's device) for every mode and batch of `options`.
std::vector<ProfileRun> profile(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                const ProfileOptions& options);

/// profile() for every model of `plan` on each of its backends, in that order of nesting. A
/// model with one backend: its errors are the caller's; with several: a backend that cannot run
/// (unavailable, no such mode or device) is recorded as failed runs and the others go on. A model
/// file's batch is the first dimension of its first input (inputs_of(base), model_inputs.hpp; 1
/// without inputs); options.batches size the reference networks. Each run's contract says how its
/// backend was chosen (`backend_chosen_by`).
std::vector<ProfileRun> profile_all(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                    const HardwareSpec& hardware, const ProfileOptions& options);
/// profile_all() of every model of `models` on every backend of `backends` (not checked against
/// the models' file types: choose_backends() does that).
std::vector<ProfileRun> profile_all(const std::vector<const Backend*>& backends, const std::vector<std::string>& models,
                                    const ModelRequest& base, const HardwareSpec& hardware,
                                    const ProfileOptions& options);
/// The backends of `plan`, each once, in order of first use (for default_hardware_for, check_modes).
std::vector<const Backend*> backends_of(const std::vector<ModelBackends>& plan);

}  // namespace neuralcost
