// Maps a ModelRequest onto the reference-network builder.
#include "importers/reference/reference_importer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {

bool ReferenceImporter::accepts(const ModelRequest& request) const {
  const auto& names = reference_model_names();
  return std::find(names.begin(), names.end(), request.model) != names.end();
}

ReferenceOptions reference_options_of(const ModelRequest& request) {
  ReferenceOptions o;
  o.model = request.model;
  o.batch = request.batch;
  o.seq = request.seq;
  o.width = request.width;
  o.depth = request.depth;
  o.dtype = request.dtype;
  return o;
}

bool ReferenceImporter::applies(const ModelRequest& request, std::string_view option) const {
  if (option == "batch" || option == "width" || option == "depth" || option == "dtype") return true;
  if (option == "seq") return request.model != "ff" && request.model != "cnn";
  return false;  // --input, --dim, --structure-only are for model files
}

OpGraph ReferenceImporter::import(const ModelRequest& request) const {
  for (const std::string& option : options_set(request)) {
    if (!applies(request, option)) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("--{} does not apply to the built-in network '{}'{}", option, request.model,
                      option == "seq" ? " (it has no sequence)"
                      : option == "phase" || option == "prompt" || option == "context" || option == "weights" ||
                              option == "kv-cache" || option == "mla" || option == "routing" || option == "activations"
                          ? " (it is for decoder LLMs)"
                          : " (it is for model files)"));
    }
  }
  OpGraph graph = build_reference_model(reference_options_of(request));
  graph.set_batch(request.batch);
  return graph;
}

}  // namespace neuralcost
