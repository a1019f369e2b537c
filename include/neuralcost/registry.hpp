// The two extension points and the one list of their implementations (src/registry.cpp).
//  - An Importer turns a model (a built-in network, a file) into an op graph.
//  - A Backend runs and times a model in a framework; it is where measurements come from.
// A framework may provide both. Adding one means writing the class and adding a line to
// src/registry.cpp; nothing registers itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/graph.hpp"

namespace neuralcost {

/// What the user asked for: a model name or file, and the sizes to build it at.
struct ModelRequest {
  std::string model;  ///< "transformer", "model.onnx", ...
  std::int64_t batch = 1;
  std::int64_t seq = 32;
  std::int64_t width = 128;
  std::int64_t depth = 2;
  DType dtype = DType::kFp32;
  std::vector<Shape> input_shapes;  ///< for model files: one shape per input
  std::map<std::string, Shape> named_inputs;    ///< for model files: input name -> shape
  std::map<std::string, std::int64_t> dims;     ///< symbolic dimension name -> value
  bool structure_only = false;      ///< do not touch weight payloads (external data files)
  int threads = 0;                  ///< intra-op threads for backends; 0 = the library's default
  double worker_timeout_seconds = 300;  ///< a worker process's deadline per request
};

/// Per-layer times from a backend's profiler over several runs of one model.
struct LayerTiming {
  std::vector<std::string> event_names;        ///< top-level framework ops, in execution order
  std::vector<std::vector<double>> seconds;    ///< [event][run]
  std::vector<double> wall_seconds;            ///< [run]: the whole profiled forward pass
  /// [run]: a plain pass run right before each profiled one, so that the profiler's overhead
  /// is measured against passes taken at the same moment (empty if the backend cannot)
  std::vector<double> plain_wall_seconds;
};

class Importer {
 public:
  virtual ~Importer() = default;
  virtual std::string_view name() const = 0;         ///< "reference", "onnx", ...
  virtual std::string_view description() const = 0;  ///< one line for --help and listings
  /// True when this importer is the one for `request.model` (a name it knows, a file type).
  virtual bool accepts(const ModelRequest& request) const = 0;
  /// Builds the op graph. Throws neuralcost::Error naming file, node and field on bad input.
  virtual OpGraph import(const ModelRequest& request) const = 0;
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
  /// it came from, as counted in profile_layers().
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
  /// Page faults (minor + major) per run() in the process that runs the model, over
  /// `iterations` runs. By default this process; a worker counts its own.
  virtual double page_faults_per_run(int iterations);
  /// (optional) How the run's time is synchronised, for the contract.
  virtual std::string synchronisation() const {
    return "none needed: CPU ops return when their results are written";
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;         ///< "libtorch", "jax", ...
  virtual std::string_view description() const = 0;
  /// Empty when the backend can run on this machine, otherwise why it cannot.
  virtual std::optional<std::string> unavailable_reason() const = 0;
  /// The modes prepare() accepts, the default first ("eager", "compiled", ...).
  virtual std::vector<std::string> modes() const = 0;
  /// Loads or builds the model in `mode`. Throws neuralcost::Error naming the file or option.
  virtual std::unique_ptr<PreparedModel> prepare(const ModelRequest& request,
                                                 const std::string& mode) const = 0;
};

/// Every importer, in the order they are asked whether they accept a model.
const std::vector<const Importer*>& importers();
/// Every backend built into this binary.
const std::vector<const Backend*>& backends();
/// The backend named `name`; kNotFound listing the built-in ones otherwise.
const Backend& backend_named(const std::string& name);
/// The first importer that accepts the request; kNotFound listing what is accepted otherwise.
const Importer& importer_for(const ModelRequest& request);

}  // namespace neuralcost
