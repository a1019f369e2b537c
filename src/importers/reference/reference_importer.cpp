// Maps a ModelRequest onto the reference-network builder.
#include "importers/reference/reference_importer.hpp"

#include <algorithm>

#include "neuralcost/models/reference.hpp"

namespace neuralcost {

bool ReferenceImporter::accepts(const ModelRequest& request) const {
  const auto& names = reference_model_names();
  return std::find(names.begin(), names.end(), request.model) != names.end();
}

OpGraph ReferenceImporter::import(const ModelRequest& request) const {
  ReferenceOptions o;
  o.model = request.model;
  o.batch = request.batch;
  o.seq = request.seq;
  o.width = request.width;
  o.depth = request.depth;
  o.dtype = request.dtype;
  return build_reference_model(o);
}

}  // namespace neuralcost
