// Requests for several models at once: which set options apply to which model.
#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {

std::vector<std::string> options_set(const ModelRequest& request) {
  std::vector<std::string> set;
  for (const char* option : {"batch", "seq", "width", "depth", "dtype", "phase", "prompt", "context", "weights",
                             "kv-cache", "mla", "routing", "activations"}) {
    if (request.given.count(option)) set.emplace_back(option);
  }
  if (!request.named_inputs.empty() || !request.input_shapes.empty()) set.emplace_back("input");
  if (!request.dims.empty()) set.emplace_back("dim");
  if (request.structure_only) set.emplace_back("structure-only");
  return set;
}

namespace {

/// Drops `option` from what `request` says the user set.
void unset(ModelRequest& request, const std::string& option) {
  request.given.erase(option);
  if (option == "input") request.named_inputs.clear(), request.input_shapes.clear();
  if (option == "dim") request.dims.clear();
  if (option == "weights") request.variant.weights.clear();
  if (option == "kv-cache") request.variant.kv_cache.clear();
  if (option == "mla") request.variant.mla.clear();
  if (option == "activations") request.variant.activations.clear();
  if (option == "routing") request.variant.routing.clear();
  if (option == "structure-only") request.structure_only = false;
}

}  // namespace

std::vector<ModelRequest> model_requests(const ModelRequest& base, const std::vector<std::string>& models,
                                         const std::vector<std::int64_t>& batches) {
  std::vector<ModelRequest> per_model;
  std::vector<const Importer*> importer;
  for (const std::string& model : models) {
    ModelRequest r = base;
    r.model = model;
    per_model.push_back(r);
    importer.push_back(&importer_for(r));
  }
  if (models.size() > 1) {
    for (const std::string& option : options_set(base)) {
      bool any = false;
      for (std::size_t i = 0; i < models.size(); ++i) any = any || importer[i]->applies(per_model[i], option);
      if (!any) {
        std::string names;
        for (std::size_t i = 0; i < models.size(); ++i) {
          names += (i == 0 ? "" : i + 1 == models.size() ? " or " : ", ") + models[i];
        }
        throw Error(ErrorCode::kInvalidArgument, fmt::format("--{} does not apply to {}", option, names));
      }
      for (std::size_t i = 0; i < models.size(); ++i) {
        if (!importer[i]->applies(per_model[i], option)) unset(per_model[i], option);
      }
    }
  }
  std::vector<ModelRequest> out;
  for (const ModelRequest& r : per_model) {
    if (batches.empty()) out.push_back(r);
    for (std::int64_t b : batches) {
      ModelRequest one = r;
      one.batch = b;
      out.push_back(one);
    }
  }
  return out;
}

}  // namespace neuralcost
