// The five reference networks of docs/reference-networks.md in torch::nn (eager mode), and
// the same networks as TorchScript sharing the same weights (compiled mode).
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include "neuralcost/backend.hpp"

namespace neuralcost::libtorch {

/// A reference network: a torch::nn module with one input and one output.
class ReferenceNet : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  /// TorchScript source of the same computation; parameters are attributes named by
  /// script_name(parameter name). `training`: batch norm normalises by the batch's statistics
  /// (and updates the running ones), as the module does in train mode.
  virtual std::string script_source(bool training) const = 0;
};

/// What the first and the last layer meet: ff's input features, cnn's input channels, and the
/// classes of both (the defaults are the reference networks'; train-to-target adapts them to its
/// data, as the torch worker's to_target.py does).
struct DataShape {
  std::int64_t features = 784;
  std::int64_t channels = 3;
  std::int64_t classes = 10;
};

/// Builds the network of `request` (model ff|cnn|rnn|lstm|transformer, batch, seq, width,
/// depth) with random weights from a fixed seed, in eval mode. kInvalidArgument for bad sizes.
std::shared_ptr<ReferenceNet> make_reference_net(const ModelRequest& request, const DataShape& data = {});

/// The network's input for `request`: [B,784], [B,3,32,32] or [B,T,width].
at::Tensor reference_input(const ModelRequest& request);

/// "encoder.0.linear1.weight" -> "p_encoder_0_linear1_weight".
std::string script_name(const std::string& parameter_name);

/// The TorchScript twin of `net`: its script_source() compiled with net's parameters and
/// buffers registered under script_name() (the same tensors: training one trains the other).
/// Not frozen: the caller freezes and optimises. `training`: in train mode (script_source).
torch::jit::Module script_reference_net(ReferenceNet& net, bool training = false);

}  // namespace neuralcost::libtorch
