// Backends that run a Python framework in a worker process (docs/worker-protocol.md): JAX,
// TensorFlow and PyTorch 2. The worker builds, runs and traces the model; the C++ core counts
// what it traced and times it under the same contract as LibTorch, with each sample timed
// inside the worker.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/backend.hpp"

namespace neuralcost::worker {

/// The protocol version this tool speaks (docs/worker-protocol.md); 2: devices in hello, a
/// device in build; 3: models in slots (a process shared by several), drop; 4: build's `train`
/// carries every value resolved, the loss included (the worker checks, decides none). The
/// worker's PROTOCOL (python/neuralcost_worker/__init__.py) must match.
inline constexpr int kProtocol = 4;

/// The folder of libneuralcost.so: <prefix>/lib when installed, build/src in the build tree.
/// Its "neuralcost" folder holds the worker package (python/) and, optionally, the workers'
/// environment (python-env/); the build tree links them to the source tree's python/ and .venv.
std::string library_directory();
/// The workers' Python, decided at run time: $NEURALCOST_PYTHON; else
/// <library_directory>/neuralcost/python-env/bin/python3 when it exists; else the interpreter
/// configured at build time (-DNEURALCOST_PYTHON_DEFAULT, default python3), found on $PATH.
std::string python_interpreter();
/// The folder holding the neuralcost_worker package: $NEURALCOST_WORKER_DIR, else
/// <library_directory>/neuralcost/python (installed with the library; python/ in the build tree).
std::string worker_directory();

/// How many forward passes one `run` request asks for, after a pass of `last_seconds`: enough
/// for about 2 ms per request (1 to 1000), an interleaved round's visit (measure/cell_session.hpp:
/// cells measured within milliseconds of each other see the same machine). A worker that waited
/// for a request runs its next pass slower (woken threads, caches the other process used);
/// asking for passes in batches keeps that to one pass in a batch, and the samples are still
/// single passes timed inside the worker. bench/worker_protocol_bench measures the result.
int passes_per_request(double last_seconds);

class WorkerBackend final : public Backend {
 public:
  /// `framework`: the worker's name for it (jax, tensorflow, torch); `modes`: the framework's
  /// own, eager first; "compiled" is accepted as another name for `compiled_mode`. `cuda`: the
  /// worker can run on CUDA GPUs (then devices() lists the ones this machine shows, and the
  /// worker confirms the one asked for in its hello). `files`: the kinds of model file the worker
  /// loads besides the built-in networks.
  WorkerBackend(std::string name, std::string framework, std::string description, std::vector<std::string> modes,
                std::string compiled_mode, std::vector<ModelKind> files, bool cuda = false);

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  std::optional<std::string> unavailable_reason() const override;
  std::vector<std::string> modes() const override;
  bool accepts(ModelKind kind) const override;
  /// cpu, and with `cuda` a cuda:N for each NVIDIA GPU this machine shows (visible_cuda_gpus).
  std::vector<Device> devices() const override;
  /// The framework's name for `device`, from a worker's hello (started once, on first use).
  std::optional<std::string> device_name(const Device& device, double timeout_seconds) const override;
  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& request, const std::string& mode,
                                         const RunOptions& run) const override;

 private:
  std::string name_, framework_, description_;
  std::vector<std::string> modes_;
  std::string compiled_mode_;
  std::vector<ModelKind> files_;
  bool cuda_ = false;
  mutable std::mutex names_mutex_;
  mutable std::optional<std::map<std::string, std::string>> names_;  ///< device id -> name, from hello
};

/// NVIDIA GPUs the driver lists under `root`/proc/driver/nvidia/gpus (or, where that is not
/// mounted, the /dev/nvidiaN nodes), capped by the entries of $CUDA_VISIBLE_DEVICES when set.
int visible_cuda_gpus(const std::string& root = "");

}  // namespace neuralcost::worker
