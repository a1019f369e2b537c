// The one list of importers (importer.hpp) and backends (backend.hpp), and lookup in it
// (src/registry.cpp). A framework may provide both. Adding one means writing the class and
// adding a line to src/registry.cpp; nothing registers itself.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/backend.hpp"
#include "neuralcost/importer.hpp"

namespace neuralcost {

/// Every importer, in the order they are asked whether they accept a model.
const std::vector<const Importer*>& importers();
/// Every backend built into this binary.
const std::vector<const Backend*>& backends();
/// The backend named `name`; kNotFound listing the built-in ones otherwise.
const Backend& backend_named(const std::string& name);
/// The first importer that accepts the request; kNotFound listing what is accepted otherwise.
const Importer& importer_for(const ModelRequest& request);

}  // namespace neuralcost
