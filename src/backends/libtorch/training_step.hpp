// A measured training step in LibTorch: forward, loss, backward, optimizer step and zero-grad
// (gradients set to none, as PyTorch 2's optimizers do by default) over a forward function and
// its trainable parameters, with torch::optim's SGD, SGD with momentum, Adam and AdamW. Used by
// the backend for eager torch::nn modules and TorchScript (libtorch_backend.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "neuralcost/backend.hpp"

namespace neuralcost::libtorch {

/// torch.autocast(device_type="cpu", dtype=torch.bfloat16) in C++ while it lives (nothing when
/// `on` is false): enabled with its dtype, nested, and its cache of parameter casts cleared when
/// the outermost scope ends, as Python's __exit__ does. The state it sets is the thread's own.
class CpuAutocast {
 public:
  explicit CpuAutocast(bool on);
  ~CpuAutocast();
  CpuAutocast(const CpuAutocast&) = delete;
  CpuAutocast& operator=(const CpuAutocast&) = delete;

 private:
  bool on_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

class TrainingStep {
 public:
  using Forward = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
  /// Runs `forward` once on `inputs` to find the output's shape, which chooses the loss
  /// (loss_for_output): labels or a target drawn from `train.hyper.labels_seed`. bf16-mixed runs
  /// forward and loss under CpuAutocast (parameters, gradients and optimizer fp32). Throws
  /// kUnimplemented for fp16-mixed and for a checkpoint policy other than none.
  TrainingStep(Forward forward, std::vector<at::Tensor> parameters, std::vector<at::Tensor> inputs,
               const TrainRun& train);

  /// One whole step; returns the loss before the update.
  double step();
  /// The step in three timed phases, `runs` times, each after a plain step: forward (with the
  /// loss), backward, optimizer (with zero-grad).
  LayerTiming time_phases(int runs);
  /// Eager torch::nn networks whose forward opens a RecordFunction user scope per layer: `runs`
  /// steps, each after a plain step, timed per phase of each scope ("forward"/"backward" of
  /// "block0.linear"), the loss and the optimizer (with zero-grad): step_layers.cpp.
  LayerTiming time_layers(int runs);
  /// One step with the counting allocator's peak reset before it.
  StepMemory measure_memory();
  /// The loss, optimizer and hyperparameters as they ran, for the contract.
  std::map<std::string, std::string> describe() const;

  /// The forward pass alone, in the step's precision (what a capture records).
  at::Tensor forward_pass() {
    CpuAutocast autocast(mixed_);
    return forward_(inputs_);
  }
  const std::vector<at::Tensor>& inputs() const { return inputs_; }

 private:
  at::Tensor loss_of(const at::Tensor& output) const;
  at::Tensor forward_loss();  ///< forward and loss in the step's precision
  void zero_grad();

  Forward forward_;
  bool mixed_ = false;  ///< bf16-mixed: forward and loss under CpuAutocast
  std::vector<at::Tensor> parameters_, inputs_;
  TrainRun train_;
  Loss loss_ = Loss::kMse;
  std::int64_t classes_ = 0;
  at::Tensor target_;  ///< class labels (int64 [batch]) or a regression target
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace neuralcost::libtorch
