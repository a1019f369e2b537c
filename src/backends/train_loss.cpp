// The loss of a measured training step (backend.hpp): one rule for every backend, so that the
// same network trains on the same loss in LibTorch and in the workers
// (python/neuralcost_worker/training.py implements the same rule).
#include "neuralcost/backend.hpp"

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

}  // namespace neuralcost
