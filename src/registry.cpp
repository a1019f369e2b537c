// The one list of importers and backends. Add new ones here (behind their build flag).
#include "neuralcost/registry.hpp"

#include <fmt/format.h>

#include "importers/reference/reference_importer.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {

const std::vector<const Importer*>& importers() {
  static const ReferenceImporter reference;
  static const std::vector<const Importer*> all = {&reference};
  return all;
}

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> all = {};
  return all;
}

const Importer& importer_for(const ModelRequest& request) {
  for (const Importer* importer : importers()) {
    if (importer->accepts(request)) return *importer;
  }
  std::string known;
  for (const Importer* importer : importers()) {
    known += fmt::format("{}{} ({})", known.empty() ? "" : "; ", importer->name(), importer->description());
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("unknown model '{}'; accepted: {}", request.model, known));
}

}  // namespace neuralcost
