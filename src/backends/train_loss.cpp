// The loss of a measured training step (backend.hpp): one rule for every backend, so that the
// same network trains on the same loss in LibTorch and in the workers (which are sent the loss
// resolved here, and only check it against their network's output).
#include <algorithm>

#include <fmt/format.h>

#include "importers/reference/reference_importer.hpp"
#include "neuralcost/backend.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {

std::string_view loss_name(Loss loss) {
  switch (loss) {
    case Loss::kCrossEntropy: return "cross_entropy";
    case Loss::kMse: return "mse";
  }
  return "mse";
}

Loss loss_for_output(const std::vector<std::int64_t>& output_shape) {
  // [batch, classes] with at least two classes: a classifier
  return output_shape.size() == 2 && output_shape[1] >= 2 ? Loss::kCrossEntropy : Loss::kMse;
}

Loss loss_for_reference_model(const ModelRequest& request) {
  const std::vector<std::string>& names = reference_model_names();
  if (std::find(names.begin(), names.end(), request.model) == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("training runs the built-in networks only ({}), not '{}'", list, request.model));
  }
  const OpGraph graph = build_reference_model(reference_options_of(request));
  for (const std::string& name : graph.outputs()) {
    const std::optional<std::size_t> producer = graph.producer(name);
    if (!producer) continue;
    for (const TensorDesc& t : graph.op(*producer).outputs) {
      if (t.name == name) return loss_for_output(t.shape);
    }
  }
  throw Error(ErrorCode::kInternal, fmt::format("the built-in network '{}' has no output to train on", request.model));
}

}  // namespace neuralcost
