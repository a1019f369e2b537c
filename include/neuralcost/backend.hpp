// The backend interface: a framework that runs and times a model on a device. Where
// measurements come from; the timing loop, statistics and checks that every backend shares are
// in measure/. The one list of backends is in registry.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/device.hpp"
#include "neuralcost/importer.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

/// The version of the Backend and PreparedModel interfaces a backend plugin is built against.
/// A plugin exports it (NEURALCOST_PLUGIN_API_VERSION below); the loader refuses a plugin whose
/// version differs, since calling through a changed vtable would crash. Bump it with every
/// change to this header's classes and to the structs they pass (ModelRequest: 3 added its
/// `inputs`; 4: OpRecord gained `differentiates`, op kinds for training steps, OpGraph hashed
/// indexes; 5 added measured training: RunOptions::train, PreparedModel::step_memory, the step
/// phases of LayerTiming; 6: LayerTiming::kernel_events; 7: LayerTiming::event_modules; 8:
/// Backend::device_name takes the worker timeout; 9: LayerTiming::timer and timer_warning; 10:
/// PreparedModel::pause and resume; 11: RunOptions::process_pool, PreparedModel::shares_process and
/// lost_its_process; 12: Backend::accepts; 14: ModelKind::kDecoderConfig).
inline constexpr int kPluginApiVersion = 14;

/// What a model named to a backend is: a built-in network or a file of some type
/// (measure/model_files.hpp tells it from the name; Backend::accepts says who loads it).
enum class ModelKind {
  kBuiltIn,        ///< ff, cnn, rnn, lstm, transformer: every backend builds them
  kTorchScript,    ///< .pt, .ts
  kTorchExport,    ///< .pt2 (torch.export.save)
  kSavedModel,     ///< a directory with saved_model.pb
  kOnnx,           ///< .onnx: analysed (neural-cost analyze), never run
  kDecoderConfig,  ///< a decoder LLM's config.json (models/decoder.hpp): one phase built by transformers
  kOtherFile,      ///< an existing file of no known type: only a named backend may try it
};

/// The loss of a training step: cross entropy on fixed random integer labels when the network's
/// output is [batch, classes], mean squared error against a fixed random target otherwise.
enum class Loss { kCrossEntropy, kMse };
std::string_view loss_name(Loss loss);
/// The loss for a network whose output has `output_shape` (the rule above).
Loss loss_for_output(const std::vector<std::int64_t>& output_shape);
/// The loss of a built-in network (the only ones that train) at `request`'s sizes: the rule on
/// its output as the cost model builds it. What a worker is sent: it checks, it does not decide.
/// kUnimplemented for a model that is not a built-in network; build_reference_model's errors.
Loss loss_for_reference_model(const ModelRequest& request);

/// The hyperparameters of a measured training step (recorded in the run's contract).
struct TrainHyperparameters {
  double learning_rate = 1e-3;
  double momentum = 0.9;              ///< momentum (SGD with momentum)
  double beta1 = 0.9, beta2 = 0.999;  ///< Adam, AdamW
  double eps = 1e-8;                  ///< Adam, AdamW
  /// decoupled for AdamW, L2 for the others; empty: 0.01 for AdamW, 0 for the others
  std::optional<double> weight_decay;
  std::uint64_t labels_seed = 0;  ///< seeds the labels (or the regression target)
  double weight_decay_for(Optimizer optimizer) const {
    return weight_decay.value_or(optimizer == Optimizer::kAdamW ? 0.01 : 0.0);
  }
};

/// A measured training step: each run() is forward, loss, backward, optimizer step and
/// zero-grad (gradients set to none), synchronised.
struct TrainRun {
  TrainingOptions options;
  TrainHyperparameters hyper;
};

/// The run options: how a backend runs a model (the model itself is the ModelRequest).
struct RunOptions {
  Device device;                        ///< one of Backend::devices(); the CPU by default
  int threads = 0;                      ///< intra-op threads; 0 = the library's default
  double worker_timeout_seconds = 300;  ///< a worker process's deadline per request
  /// Train instead of infer: run() is one whole training step; captured_graph() still returns
  /// the forward ops (the caller builds the step graph with training_step()). A backend that
  /// cannot run the precision or checkpoint policy throws kUnimplemented saying so.
  std::optional<TrainRun> train;
  /// Models prepared with the same non-empty pool name (and the same framework, mode, device,
  /// threads and dtype) share one worker process, each in a slot of its own (a study keeps all its
  /// cells prepared at once: docs/profiling.md, "Rounds"); empty: a process of its own. Ignored
  /// by backends that run models in this process, and for training runs (whose memory is
  /// measured per process).
  std::string process_pool;
};

/// The measured peak memory of one training step (PreparedModel::step_memory).
struct StepMemory {
  std::uint64_t peak_bytes = 0;  ///< the most bytes live at once during the step
  /// bytes live when the step began (parameters, optimizer state, inputs, labels...), included
  /// in peak_bytes; empty when the source cannot tell
  std::optional<std::uint64_t> start_bytes;
  std::string source;    ///< what was measured, e.g. "counting CPU allocator (c10)"
  std::string includes;  ///< one line: what the figure counts and what it leaves out
};

/// Per-layer times from a backend's profiler over several runs of one model.
struct LayerTiming {
  std::vector<std::string> event_names;      ///< top-level framework ops, in execution order
  std::vector<std::vector<double>> seconds;  ///< [event][run]
  std::vector<double> wall_seconds;          ///< [run]: the whole profiled forward pass
  /// [run]: a plain pass run right before each profiled one, so that the profiler's overhead
  /// is measured against passes taken at the same moment (empty if the backend cannot)
  std::vector<double> plain_wall_seconds;
  /// (optional) [event]: the module path the op ran in ("stage0.conv"; "" when unknown), for
  /// events that became no op record (views such as aten::t), whose records cannot carry it
  std::vector<std::string> event_modules;
  /// Training: the events are the step's phases, named after their pass tags ("forward" with
  /// the loss, "backward", "optimizer" with zero-grad), instead of framework ops. With
  /// event_modules, each event is one phase of one module ("backward" of "block0.linear"; the
  /// loss is "loss", "" the network's own ops outside its modules or the whole phase, as for
  /// the optimizer): the per-layer rows of measure/step_layers.hpp.
  bool step_phases = false;
  /// The events are a compiled program's kernels (XLA thunks, Inductor kernels, graph nodes),
  /// named by the backend: one kernel may run several records of different ops, and a record
  /// no kernel ran has event -1 (unattributed). False: each event is one framework op, named
  /// as its records' source_type.
  bool kernel_events = false;
  /// (optional) what timed the events, for the run's contract ("layer_timer"), and a warning
  /// when it is not the backend's usual timer (a fallback that costs more per op)
  std::string timer;
  std::string timer_warning;
};

/// A model loaded by a backend, ready to run.
class PreparedModel {
 public:
  virtual ~PreparedModel() = default;
  /// One forward pass (its work may still be in flight on an accelerator).
  virtual void run() = 0;
  /// (optional) Waits until the work of run() is done; a no-op on the CPU.
  virtual void synchronize() {}
  /// Runs once while recording the ops that execute, and returns them with their shapes as an
  /// op graph. Each record has an integer attribute "event": the index of the framework op
  /// it came from, as counted in profile_layers(); several records sharing one event are one
  /// (fused) layer. (optional) A string attribute "module": the record's name as the user's
  /// model calls it ("stage0.conv", "encoder0.self_attn.in_proj"), when the framework says.
  virtual OpGraph captured_graph() = 0;
  /// (optional) Runs `runs` times under the framework's profiler: per-op and whole-pass times.
  virtual LayerTiming profile_layers(int runs) {
    (void)runs;
    return {};
  }
  /// (optional) Facts that belong in a benchmark contract: versions, thread counts, BLAS.
  virtual std::map<std::string, std::string> environment() const { return {}; }
  /// (optional) The duration of the last run() by the backend's own clock, when the backend
  /// times itself (a worker process); empty when this process's clock is the one to use.
  virtual std::optional<double> last_run_seconds() const { return std::nullopt; }
  /// Page faults (minor + major) so far in the process that runs the model, for the page-fault
  /// sampler of the CPU's run environment (measure/device.hpp). By default this process's; a
  /// worker counts those of its own passes. Empty when unknown.
  virtual std::optional<double> page_faults() const;
  /// Resident memory (RSS) of the process that runs the model, in bytes, for the memory-growth
  /// sampler (a model that keeps every pass's tensors grows pass by pass). By default this
  /// process's; a worker reads its own process's. Empty when unknown.
  virtual std::optional<double> resident_bytes() const;
  /// (optional) Training: runs one step with the allocator's peak reset before it and returns
  /// that step's peak; empty when the backend has no real telemetry (never a guess).
  virtual std::optional<StepMemory> step_memory() { return std::nullopt; }
  /// (optional) Stops the process that runs the model while other cells' rounds run, and lets it
  /// go on before its own (measure/schedule.hpp): a framework's idle thread pools, spinning after
  /// a pass, must not take the CPUs another cell is measuring. A no-op for a model run in this
  /// process. Any other call resumes a paused model first.
  virtual void pause() {}
  virtual void resume() {}
  /// (optional) Whether the process that runs the model also runs other prepared models
  /// (RunOptions::process_pool): one of them that crashes it ends this one too, so a failure of
  /// this model may not be its own.
  virtual bool shares_process() const { return false; }
  /// (optional) Whether the last call that failed found the shared process already ended (by
  /// another of its models) before it asked anything: the failure was not this model's.
  virtual bool lost_its_process() const { return false; }
  /// (optional) How the run's time is synchronised, for the contract.
  virtual std::string synchronisation() const { return "none needed: CPU ops return when their results are written"; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  ///< "libtorch", "jax", ...
  virtual std::string_view description() const = 0;
  /// Empty when the backend can run on this machine, otherwise why it cannot.
  virtual std::optional<std::string> unavailable_reason() const = 0;
  /// The modes prepare() accepts, the default first ("eager", "compiled", ...).
  virtual std::vector<std::string> modes() const = 0;
  /// Whether prepare() loads models of `kind`: the one place that says which backend runs which
  /// file (choose_backends in measure/model_files.hpp asks every backend). Every backend builds
  /// the built-in networks; a backend that loads files says which kinds. kOtherFile is never
  /// accepted: a backend named for such a file tries it.
  virtual bool accepts(ModelKind kind) const { return kind == ModelKind::kBuiltIn; }
  /// The devices prepare() accepts on this machine, the CPU first (then cuda:0, ...).
  virtual std::vector<Device> devices() const { return {Device::cpu()}; }
  /// (optional) The name the framework gives `device` ("NVIDIA H100 80GB HBM3"), from which
  /// the device's hardware spec is found; empty when the backend cannot tell. A backend that
  /// must start something to ask gives up after `timeout_seconds` (the run's worker timeout).
  virtual std::optional<std::string> device_name(const Device& device, double timeout_seconds) const {
    (void)device;
    (void)timeout_seconds;
    return std::nullopt;
  }
  /// Loads or builds the model in `mode` on `run.device`. Throws neuralcost::Error naming the
  /// file or option.
  virtual std::unique_ptr<PreparedModel> prepare(const ModelRequest& model, const std::string& mode,
                                                 const RunOptions& run) const = 0;
  /// prepare() with the default run options (cpu, the library's threads).
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& model, const std::string& mode) const {
    return prepare(model, mode, RunOptions{});
  }
};

}  // namespace neuralcost

/// Exports the plugin API version from a backend plugin; the loader reads it before anything else.
#define NEURALCOST_PLUGIN_API_VERSION                                                     \
  extern "C" __attribute__((visibility("default"))) int neuralcost_plugin_api_version() { \
    return ::neuralcost::kPluginApiVersion;                                               \
  }
