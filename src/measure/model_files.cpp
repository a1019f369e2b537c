// Model kinds and the backends that run them (see model_files.hpp). The one table of which
// backend loads which kind of file is kLoaders below.
#include "neuralcost/measure/model_files.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/suggest.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/zip_directory.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

namespace fs = std::filesystem;

// a TorchScript file's entries may expand to this many times the file, plus the allowance
// (pickled code is deflated; tensors are stored)

/// Per kind: how messages name it, and the backend that loads it (empty: none, or any that is named).
struct KindFacts {
  ModelKind kind;
  std::string_view description;
  std::string_view backend;
};

constexpr KindFacts kLoaders[] = {
    {ModelKind::kBuiltIn, "a built-in network", "libtorch"},
    {ModelKind::kTorchScript, "a TorchScript file (.pt, .ts)", "libtorch"},
    {ModelKind::kTorchExport, "a torch.export program (.pt2)", "torch"},
    {ModelKind::kSavedModel, "a SavedModel directory", "tensorflow"},
    {ModelKind::kOnnx, "an ONNX file (.onnx)", ""},
    {ModelKind::kOtherFile, "a file of no known type", ""},
};
static_assert(std::size(kLoaders) == static_cast<std::size_t>(ModelKind::kOtherFile) + 1, "one row per kind");

const KindFacts& facts(ModelKind kind) { return kLoaders[static_cast<std::size_t>(kind)]; }

std::string extension(const std::string& model) {
  std::string ext = fs::path(model).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

/// The backend for built-in networks when none is named: LibTorch, or torch in a build without it.
std::string default_backend() {
  for (const Backend* b : backends()) {
    if (b->name() == "libtorch") return "libtorch";
  }
  return "torch";
}

}  // namespace

std::string_view model_kind_description(ModelKind kind) { return facts(kind).description; }

ModelKind model_kind(const std::string& model) {
  const auto& builtin = reference_model_names();
  if (std::find(builtin.begin(), builtin.end(), model) != builtin.end()) return ModelKind::kBuiltIn;
  std::error_code ec;
  if (fs::is_directory(model, ec)) {
    if (fs::exists(fs::path(model) / "saved_model.pb", ec)) return ModelKind::kSavedModel;
    throw Error(ErrorCode::kNotFound,
                fmt::format("{}: a directory, but not a SavedModel (no saved_model.pb in it)", model));
  }
  const std::string ext = extension(model);
  if (ext == ".pt" || ext == ".ts") return ModelKind::kTorchScript;
  if (ext == ".pt2") return ModelKind::kTorchExport;
  if (ext == ".onnx") return ModelKind::kOnnx;
  if (fs::exists(model, ec)) return ModelKind::kOtherFile;
  if (const auto near = closest_name(model, builtin)) {
    throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}'; did you mean {}?", model, *near));
  }
  throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}': neither a built-in network ({}) nor a file",
                                                model, fmt::join(builtin, ", ")));
}

std::vector<ModelBackends> choose_backends(const std::vector<std::string>& models,
                                           const std::vector<std::string>& backend_names) {
  std::vector<const Backend*> named;
  for (const std::string& n : backend_names) named.push_back(&backend_named(n));
  std::vector<ModelBackends> out;
  for (const std::string& model : models) {
    const ModelKind kind = model_kind(model);
    const KindFacts& f = facts(kind);
    if (kind == ModelKind::kOnnx) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: profile cannot run an ONNX file; analyze counts it (neural-cost analyze {})", model,
                              model));
    }
    ModelBackends entry{model, named, "--backend"};
    if (named.empty()) {
      if (kind == ModelKind::kOtherFile) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: cannot tell from its name which backend runs it (TorchScript .pt/.ts: libtorch; "
                                "torch.export .pt2: torch; a SavedModel directory: tensorflow); give --backend",
                                model));
      }
      const std::string backend = kind == ModelKind::kBuiltIn ? default_backend() : std::string(f.backend);
      entry.backends = {&backend_named(backend)};
      entry.chosen_by = kind == ModelKind::kBuiltIn ? std::string("the default for built-in networks")
                                                    : fmt::format("the model file: {}", f.description);
    } else if (kind != ModelKind::kBuiltIn && kind != ModelKind::kOtherFile) {
      for (const Backend* b : named) {
        if (b->name() != f.backend) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("--backend {} cannot run {}, {}; the {} backend runs it (or leave out --backend)",
                                  b->name(), model, f.description, f.backend));
        }
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace neuralcost
