// The LibTorch training step (see training_step.hpp).
#include "backends/libtorch/training_step.hpp"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <chrono>

#include <fmt/format.h>

#include "backends/libtorch/counting_allocator.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::libtorch {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& params, const TrainRun& train) {
  namespace optim = torch::optim;
  const TrainHyperparameters& h = train.hyper;
  const double decay = h.weight_decay_for(train.options.optimizer);
  switch (train.options.optimizer) {
    case Optimizer::kSgd:
      return std::make_unique<optim::SGD>(params, optim::SGDOptions(h.learning_rate).weight_decay(decay));
    case Optimizer::kMomentum:
      return std::make_unique<optim::SGD>(params,
                                          optim::SGDOptions(h.learning_rate).momentum(h.momentum).weight_decay(decay));
    case Optimizer::kAdam:
      return std::make_unique<optim::Adam>(
          params, optim::AdamOptions(h.learning_rate).betas({h.beta1, h.beta2}).eps(h.eps).weight_decay(decay));
    case Optimizer::kAdamW:
      return std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions(h.learning_rate).betas({h.beta1, h.beta2}).eps(h.eps).weight_decay(decay));
  }
  throw Error(ErrorCode::kInternal, "libtorch: unknown optimizer");
}

/// LibTorch 1.13's CPU autocast leaves layer_norm to its input's dtype, and its CPU kernel cannot
/// take a bf16 input with fp32 weights ("expected scalar type BFloat16 but found Float"): run it
/// in fp32, as autocast's fp32 op list does on CUDA (and as PyTorch 2 computes it on the CPU).
at::Tensor layer_norm_in_fp32(const at::Tensor& input, at::IntArrayRef normalized_shape,
                              const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
                              double eps, bool cudnn_enable) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const auto fp32 = [](const c10::optional<at::Tensor>& t) -> c10::optional<at::Tensor> {
    if (!t || !t->defined()) return t;
    return t->to(at::kFloat);
  };
  return at::layer_norm(input.to(at::kFloat), normalized_shape, fp32(weight), fp32(bias), eps, cudnn_enable);
}

TORCH_LIBRARY_IMPL(aten, AutocastCPU, m) { m.impl("layer_norm", TORCH_FN(layer_norm_in_fp32)); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CpuAutocast::CpuAutocast(bool on) : on_(on) {
  if (!on_) return;
  was_enabled_ = at::autocast::is_cpu_enabled();
  was_dtype_ = at::autocast::get_autocast_cpu_dtype();
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::autocast::increment_nesting();
}

CpuAutocast::~CpuAutocast() {
  if (!on_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_cpu_enabled(was_enabled_);
  at::autocast::set_autocast_cpu_dtype(was_dtype_);
}

TrainingStep::TrainingStep(Forward forward, std::vector<at::Tensor> parameters, std::vector<at::Tensor> inputs,
                           const TrainRun& train)
    : forward_(std::move(forward)), parameters_(std::move(parameters)), inputs_(std::move(inputs)), train_(train) {
  if (train.options.precision == Precision::kFp16Mixed) {
    throw Error(ErrorCode::kUnimplemented,
                "libtorch: measured training runs fp32 or bf16-mixed, not --precision fp16-mixed (analyze --train "
                "counts it)");
  }
  mixed_ = train.options.precision == Precision::kBf16Mixed;
  if (train.options.checkpoint.kind != CheckpointKind::kNone) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("libtorch: measured training runs without checkpointing only, not --checkpoint {} "
                            "(analyze --train counts it)",
                            checkpoint_name(train.options.checkpoint)));
  }
  if (parameters_.empty()) throw Error(ErrorCode::kInvalidArgument, "libtorch: the model has no trainable parameters");
  at::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = forward_(inputs_);
  }
  loss_ = loss_for_output(std::vector<std::int64_t>(output.sizes().begin(), output.sizes().end()));
  torch::manual_seed(static_cast<std::uint64_t>(train.hyper.labels_seed));
  if (loss_ == Loss::kCrossEntropy) {
    classes_ = output.size(1);
    target_ = torch::randint(0, classes_, {output.size(0)}, torch::TensorOptions().dtype(torch::kInt64));
  } else {
    target_ = torch::randn(output.sizes(), output.options());
  }
  optimizer_ = make_optimizer(parameters_, train);
}

at::Tensor TrainingStep::loss_of(const at::Tensor& output) const {
  namespace F = torch::nn::functional;
  return loss_ == Loss::kCrossEntropy ? F::cross_entropy(output, target_) : F::mse_loss(output, target_);
}

void TrainingStep::zero_grad() {
  // set to none (PyTorch 2's default): gradients are allocated by each backward, not kept between steps
  for (at::Tensor& p : parameters_) p.mutable_grad() = at::Tensor();
}

at::Tensor TrainingStep::forward_loss() {
  CpuAutocast autocast(mixed_);
  return loss_of(forward_(inputs_));
}

double TrainingStep::step() {
  at::Tensor loss = forward_loss();
  loss.backward();
  optimizer_->step();
  zero_grad();
  return loss.item<double>();
}

LayerTiming TrainingStep::time_phases(int runs) {
  LayerTiming t;
  t.step_phases = true;
  t.event_names = {"forward", "backward", "optimizer"};
  t.seconds.resize(3);
  for (int run = 0; run < runs; ++run) {
    const auto p0 = std::chrono::steady_clock::now();
    step();
    t.plain_wall_seconds.push_back(seconds_since(p0));
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor loss = forward_loss();
    const auto t1 = std::chrono::steady_clock::now();
    loss.backward();
    const auto t2 = std::chrono::steady_clock::now();
    optimizer_->step();
    zero_grad();
    const auto t3 = std::chrono::steady_clock::now();
    loss.item<double>();
    t.wall_seconds.push_back(seconds_since(t0));
    t.seconds[0].push_back(std::chrono::duration<double>(t1 - t0).count());
    t.seconds[1].push_back(std::chrono::duration<double>(t2 - t1).count());
    t.seconds[2].push_back(std::chrono::duration<double>(t3 - t2).count());
  }
  return t;
}

StepMemory TrainingStep::measure_memory() {
  if (!counting_allocator_installed()) {
    throw Error(ErrorCode::kUnimplemented,
                "libtorch: the counting CPU allocator is not c10's CPU allocator (another "
                "allocator replaced it): no memory telemetry");
  }
  step();  // the optimizer's state exists after a first step
  reset_allocator_peak();
  const AllocatorCount before = allocator_count();
  step();
  const AllocatorCount after = allocator_count();
  StepMemory m;
  m.peak_bytes = after.peak_bytes;
  m.start_bytes = before.current_bytes;
  m.source = "counting CPU allocator in front of c10's CPU allocator (live and peak bytes of tensor storages)";
  m.includes = fmt::format(
      "every CPU tensor storage ATen allocated since the model was built and still alive: parameters, buffers, "
      "optimizer state, inputs, labels (live at the step's start: the start bytes), then the step's activations, "
      "gradients and temporaries ({} allocations in the step); not the allocator's free lists (none: blocks go back to "
      "malloc), nor memory that oneDNN, OpenBLAS or OpenMP allocate themselves",
      after.allocations);
  return m;
}

std::map<std::string, std::string> TrainingStep::describe() const {
  return {{"train_loss", std::string(loss_name(loss_))},
          {"train_labels",
           loss_ == Loss::kCrossEntropy
               ? fmt::format("int64 class labels uniform in [0, {}), seed {}", classes_, train_.hyper.labels_seed)
               : fmt::format("standard normal target of the output's shape, seed {}", train_.hyper.labels_seed)},
          {"train_zero_grad", "gradients set to none after each step"},
          {"train_optimizer_implementation", "torch::optim (LibTorch C++), one parameter group"}};
}

}  // namespace neuralcost::libtorch
