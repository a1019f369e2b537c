// The one list of importers and backends. Add new ones here (behind their build flag); a backend's
// line says which model files it loads besides the built-in networks (Backend::accepts).
#include "neuralcost/registry.hpp"

#include <fmt/format.h>

#include "backends/plugin_backend.hpp"
#include "backends/python_worker/worker_backend.hpp"
#include "importers/decoder/decoder_importer.hpp"
#include "importers/reference/reference_importer.hpp"
#ifdef NEURALCOST_WITH_ONNX
#include "importers/onnx/onnx_importer.hpp"
#endif
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/suggest.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {

const std::vector<const Importer*>& importers() {
  static const ReferenceImporter reference;
  static const DecoderImporter decoder;
#ifdef NEURALCOST_WITH_ONNX
  static const OnnxImporter onnx;
#endif
  static const std::vector<const Importer*> all = {
      &reference,
      &decoder,
#ifdef NEURALCOST_WITH_ONNX
      &onnx,
#endif
  };
  return all;
}

const std::vector<const Backend*>& backends() {
  // backends in plugins are loaded when first used (src/backends/plugin_backend.hpp)
#ifdef NEURALCOST_WITH_LIBTORCH
  static const PluginBackend libtorch("libtorch", "LibTorch: torch::nn (eager) and frozen TorchScript (compiled)",
                                      "neuralcost_libtorch.so", "neuralcost_libtorch_backend",
                                      {ModelKind::kTorchScript});
#endif
  // Python frameworks run in worker processes (docs/worker-protocol.md)
  static const worker::WorkerBackend jax("jax", "jax", "JAX in a Python worker: eager (op by op) and jax.jit",
                                         {"eager", "jit"}, "jit", /*files=*/{});
  static const worker::WorkerBackend tensorflow(
      "tensorflow", "tensorflow", "TensorFlow in a Python worker: eager, tf.function, tf.function(jit_compile=True)",
      {"eager", "function", "xla"}, "function", {ModelKind::kSavedModel});
  static const worker::WorkerBackend torch("torch", "torch",
                                           "PyTorch 2 in a Python worker: eager and torch.compile, on the CPU or a "
                                           "CUDA GPU",
                                           {"eager", "compile"}, "compile",
                                           {ModelKind::kTorchExport, ModelKind::kDecoderConfig}, /*cuda=*/true);
  static const std::vector<const Backend*> all = {
#ifdef NEURALCOST_WITH_LIBTORCH
      &libtorch,
#endif
      &jax,
      &tensorflow,
      &torch,
  };
  return all;
}

const Backend& backend_named(const std::string& name) {
  std::string known;
  for (const Backend* b : backends()) {
    if (b->name() == name) return *b;
    known += (known.empty() ? "" : ", ") + std::string(b->name());
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("unknown backend '{}'; built in: {}", name, known.empty() ? "none" : known));
}

const Importer& importer_for(const ModelRequest& request) {
  for (const Importer* importer : importers()) {
    if (importer->accepts(request)) return *importer;
  }
  std::string known;
  for (const Importer* importer : importers()) {
    known += fmt::format("{}{} ({})", known.empty() ? "" : "; ", importer->name(), importer->description());
  }
  if (const auto near = closest_name(request.model, reference_model_names())) {
    throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}'; did you mean {}?", request.model, *near));
  }
  throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}'; accepted: {}", request.model, known));
}

}  // namespace neuralcost
