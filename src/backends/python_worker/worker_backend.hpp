// Backends that run a Python framework in a worker process (docs/worker-protocol.md): JAX,
// TensorFlow and PyTorch 2. The worker builds, runs and traces the model; the C++ core counts
// what it traced and times it under the same contract as LibTorch, with each sample timed
// inside the worker.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/registry.hpp"

namespace neuralcost::worker {

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
/// for about 25 ms per request (1 to 1000). A worker that waited for a request runs its next
/// pass slower (woken threads, caches the other process used); asking for passes in batches
/// keeps that to one pass in a batch, and the samples are still single passes timed inside
/// the worker. bench/worker_protocol_bench measures the result.
int passes_per_request(double last_seconds);

class WorkerBackend final : public Backend {
 public:
  /// `framework`: the worker's name for it (jax, tensorflow, torch); `modes`: the framework's
  /// own, eager first; "compiled" is accepted as another name for `compiled_mode`.
  WorkerBackend(std::string name, std::string framework, std::string description, std::vector<std::string> modes,
                std::string compiled_mode);

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  std::optional<std::string> unavailable_reason() const override;
  std::vector<std::string> modes() const override;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& request, const std::string& mode) const override;

 private:
  std::string name_, framework_, description_;
  std::vector<std::string> modes_;
  std::string compiled_mode_;
};

}  // namespace neuralcost::worker
