// Model kinds and the backends that run them (see model_files.hpp). Which backend loads which
// kind of file is each backend's own answer (Backend::accepts, given in src/registry.cpp).
#include "neuralcost/measure/model_files.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/suggest.hpp"
#include "neuralcost/core/zip_directory.hpp"
#include "neuralcost/models/decoder.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

namespace fs = std::filesystem;

/// Per kind: how messages name it. Which backend loads it is the backends' to say (Backend::accepts).
struct KindFacts {
  ModelKind kind;
  std::string_view description;
};

constexpr KindFacts kKinds[] = {
    {ModelKind::kBuiltIn, "a built-in network"},
    {ModelKind::kTorchScript, "a TorchScript file (.pt, .ts)"},
    {ModelKind::kTorchExport, "a torch.export program (.pt2)"},
    {ModelKind::kSavedModel, "a SavedModel directory"},
    {ModelKind::kOnnx, "an ONNX file (.onnx)"},
    {ModelKind::kDecoderConfig, "a decoder LLM's config.json"},
    {ModelKind::kOtherFile, "a file of no known type"},
};
static_assert(std::size(kKinds) == static_cast<std::size_t>(ModelKind::kOtherFile) + 1, "one row per kind");

const KindFacts& facts(ModelKind kind) { return kKinds[static_cast<std::size_t>(kind)]; }

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

/// The backends of this build that load files of `kind`, in registry order.
std::vector<const Backend*> backends_accepting(ModelKind kind) {
  std::vector<const Backend*> out;
  for (const Backend* b : backends()) {
    if (b->accepts(kind)) out.push_back(b);
  }
  return out;
}

std::string names(const std::vector<const Backend*>& list) {
  std::vector<std::string_view> out;
  for (const Backend* b : list) out.push_back(b->name());
  return fmt::format("{}", fmt::join(out, " or "));
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
  if (decoder_config_file(model)) return ModelKind::kDecoderConfig;
  const auto& presets = decoder_preset_names();
  if (std::find(presets.begin(), presets.end(), model) != presets.end()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} is a decoder preset, counted by `neural-cost analyze {}`; profile runs a decoder from "
                            "its config.json (random weights, built by transformers in the torch worker): give a "
                            "config small enough for this machine",
                            model, model));
  }
  if (fs::exists(model, ec)) return ModelKind::kOtherFile;
  if (const auto near = closest_name(model, builtin)) {
    throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}'; did you mean {}?", model, *near));
  }
  throw Error(ErrorCode::kNotFound, fmt::format("unknown model '{}': neither a built-in network ({}) nor a file", model,
                                                fmt::join(builtin, ", ")));
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
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: profile cannot run an ONNX file; analyze counts it (neural-cost analyze {})", model, model));
    }
    ModelBackends entry{model, named, "--backend"};
    if (named.empty()) {
      if (kind == ModelKind::kOtherFile) {
        std::vector<std::string> runs;
        for (const KindFacts& k : kKinds) {
          if (k.kind == ModelKind::kBuiltIn) continue;
          if (const auto runners = backends_accepting(k.kind); !runners.empty()) {
            runs.push_back(fmt::format("{}: {}", k.description, names(runners)));
          }
        }
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: cannot tell from its name which backend runs it ({}); give --backend", model,
                                fmt::join(runs, "; ")));
      }
      if (kind == ModelKind::kBuiltIn) {
        entry.backends = {&backend_named(default_backend())};
        entry.chosen_by = "the default for built-in networks";
      } else {
        entry.backends = backends_accepting(kind);
        if (entry.backends.empty()) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: no backend of this build runs {}", model, f.description));
        }
        entry.backends.resize(1);
        entry.chosen_by = fmt::format("the model file: {}", f.description);
      }
    } else if (kind != ModelKind::kBuiltIn && kind != ModelKind::kOtherFile) {
      for (const Backend* b : named) {
        if (!b->accepts(kind)) {
          const auto runners = backends_accepting(kind);
          throw Error(ErrorCode::kInvalidArgument,
                      runners.empty()
                          ? fmt::format("--backend {} cannot run {}, {}; no backend of this build does", b->name(),
                                        model, f.description)
                          : fmt::format("--backend {} cannot run {}, {}; the {} backend runs it (or leave out "
                                        "--backend)",
                                        b->name(), model, f.description, names(runners)));
        }
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace neuralcost
