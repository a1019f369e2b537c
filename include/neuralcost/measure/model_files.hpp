// What a model named to `profile` is (a built-in network, or a file of some type) and which
// backends run it: chosen from the file when no backend is named, checked against the file when
// one is. Decided before anything runs, so that a wrong backend or a typo is one error, not a
// framework's complaint after minutes of loading.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/backend.hpp"

namespace neuralcost {

/// "a torch.export program (.pt2)", ...: the kind as a message names it.
std::string_view model_kind_description(ModelKind kind);

/// The kind of `model`, from its name: a built-in network; a directory with saved_model.pb; by
/// extension .pt/.ts, .pt2, .onnx (whether or not the file exists: opening it is the backend's
/// error); any other existing file. kNotFound otherwise: "unknown model 'tranformer'; did you
/// mean transformer?" when a built-in name is close, a directory without saved_model.pb, or a name
/// that is neither a built-in network nor a file.
ModelKind model_kind(const std::string& model);

/// One model of a profile and the backends it runs in.
struct ModelBackends {
  std::string model;
  std::vector<const Backend*> backends;
  /// how they were chosen, for the run's contract: "--backend", "the file type (...)", ...
  std::string chosen_by;
};

/// The backends of each of `models`. With `backend_names` (--backend), those, after checking that
/// each runs the model's kind (Backend::accepts): kInvalidArgument "--backend libtorch cannot run
/// m.pt2, a torch.export program (.pt2); the torch backend runs it" otherwise. Without: for a
/// built-in network the default (libtorch, or torch in a build without it); for a file the
/// backends that accept its kind (TorchScript: libtorch; .pt2: torch; SavedModel: tensorflow),
/// kInvalidArgument when none in this build does, and asking for --backend for a file of no
/// known type. An ONNX file is always
/// kInvalidArgument "profile cannot run an ONNX file; analyze counts it (neural-cost analyze FILE)".
/// Unknown backend names are kNotFound (registry.hpp, backend_named).
std::vector<ModelBackends> choose_backends(const std::vector<std::string>& models,
                                           const std::vector<std::string>& backend_names);

}  // namespace neuralcost
