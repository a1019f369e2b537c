// The LibTorch backend (see libtorch_backend.hpp): eager torch::nn modules, TorchScript
// (frozen and optimized for inference), and users' TorchScript files.
#include "backends/libtorch/libtorch_backend.hpp"

#include <dlfcn.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>
#include <torch/version.h>

#include <filesystem>

#include <fmt/format.h>

#include "backends/libtorch/capture.hpp"
#include "backends/libtorch/counting_allocator.hpp"
#include "backends/libtorch/reference_modules.hpp"
#include "backends/libtorch/training_step.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/zip_directory.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

using libtorch::ParameterNames;

/// The first line of `s` with text on it (torch 2.x's loader begins its message with a newline).
std::string first_line(const std::string& s) {
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t end = std::min(s.find('\n', start), s.size());
    const std::string line = s.substr(start, end - start);
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) return line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    start = end + 1;
  }
  return "";
}

/// The line of a forward error that says what went wrong: the first, except for TorchScript's
/// interpreter, which puts its tracebacks first and the error ("RuntimeError: ...") last.
std::string reason_of(const std::string& what) {
  if (what.rfind("The following operation failed in the TorchScript interpreter", 0) != 0) return first_line(what);
  std::string last;
  std::size_t start = 0;
  while (start < what.size()) {
    const std::size_t end = std::min(what.find('\n', start), what.size());
    if (end > start) last = what.substr(start, end - start);
    start = end + 1;
  }
  return last;
}

/// The contract facts of LibTorch itself: version, thread pools, BLAS, the CPU kernels' level.
std::map<std::string, std::string> framework_environment() {
  std::map<std::string, std::string> env;
  env["libtorch_version"] = TORCH_VERSION;
  env["intra_op_threads"] = std::to_string(at::get_num_threads());
  env["inter_op_threads"] = std::to_string(at::get_num_interop_threads());
  env["mkldnn"] = at::hasMKLDNN() ? "yes" : "no";
  using GetInt = int (*)();
  using GetText = char* (*)();
  if (auto f = reinterpret_cast<GetInt>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) {
    env["openblas_threads"] = std::to_string(f());
  }
  if (auto f = reinterpret_cast<GetText>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) env["openblas_config"] = f();
  // the kernel set OpenBLAS chose (OPENBLAS_CORETYPE overrides it)
  if (auto f = reinterpret_cast<GetText>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) env["openblas_core"] = f();
  // LibTorch's intra-op pool is OpenMP's
  if (auto f = reinterpret_cast<GetInt>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"))) {
    env["openmp_threads"] = std::to_string(f());
  }
  const std::string config = at::show_config();
  const auto cap = config.find("CPU capability usage: ");
  if (cap != std::string::npos) env["cpu_capability"] = first_line(config.substr(cap + 22));
  return env;
}

/// A model ready to run: a forward function over fixed inputs.
class TorchModel final : public PreparedModel {
 public:
  TorchModel(std::string name, std::function<at::Tensor(const std::vector<at::Tensor>&)> forward,
             std::vector<at::Tensor> inputs, ParameterNames names, std::string origin, bool compiled,
             std::int64_t parameters)
      : name_(std::move(name)),
        forward_(std::move(forward)),
        inputs_(std::move(inputs)),
        names_(std::move(names)),
        origin_(std::move(origin)),
        compiled_(compiled),
        parameters_(parameters) {}

  void run() override {
    torch::NoGradGuard no_grad;
    output_ = forward_(inputs_);
  }

  OpGraph captured_graph() override {
    torch::NoGradGuard no_grad;
    warm_up();
    const auto calls = libtorch::capture_calls([this] { output_ = forward_(inputs_); }, inputs_, names_);
    event_modules_.clear();
    for (const auto& call : calls) event_modules_.push_back(call.module);
    return capture::graph_from_captured(calls, name_);
  }

  LayerTiming profile_layers(int runs) override {
    LayerTiming timing = time_layers(runs);
    // the captured pass's module scopes, for ops that became no record (aten::t of a Linear)
    if (timing.event_names.size() == event_modules_.size()) timing.event_modules = event_modules_;
    return timing;
  }

  LayerTiming time_layers(int runs) {
    torch::NoGradGuard no_grad;
    warm_up();
    if (legacy_profiler()) {
      std::set<std::string> names;  // the legacy profiler's ranges include non-operators
      for (const auto& call : libtorch::capture_calls([this] { output_ = forward_(inputs_); }, inputs_, names_)) {
        names.insert(call.name);
      }
      return libtorch::profile_calls([this] { output_ = forward_(inputs_); }, runs, names);
    }
    return libtorch::time_calls([this] { output_ = forward_(inputs_); }, runs);
  }

  std::map<std::string, std::string> environment() const override {
    std::map<std::string, std::string> env = framework_environment();
    env["model_origin"] = origin_;
    if (!input_values_.empty()) env["input_values"] = input_values_;
    // the module's own count, before freezing: constant pooling merges identical frozen weights
    // (zero biases, unit norm scales), so the compiled graph may read fewer distinct tensors
    env["framework_parameters"] = std::to_string(parameters_);
    env["layer_timer"] = legacy_profiler() ? "legacy autograd profiler (NEURALCOST_LEGACY_PROFILER=1)"
                                           : "RecordFunction timestamps on top-level operators";
    if (compiled_) {
      env["compile_pipeline"] =
          "torch::jit::freeze + OptimizeFrozenGraph (optimize_for_inference without MKLDNN layout conversion)";
    }
    return env;
  }

  const at::Tensor& output() const { return output_; }
  /// What the inputs were filled with (describe_input per input), for the contract.
  void set_input_values(std::string text) { input_values_ = std::move(text); }

 private:
  /// TorchScript's profiling executor records and re-optimises the graph during the first
  /// runs (running extra ops such as aten::equal); capture and profile the settled graph.
  void warm_up() {
    for (int i = 0; i < kSettleRuns; ++i) output_ = forward_(inputs_);
  }
  static constexpr int kSettleRuns = 3;
  static bool legacy_profiler() {
    const char* v = std::getenv("NEURALCOST_LEGACY_PROFILER");
    return v != nullptr && std::string(v) == "1";
  }

  std::string name_;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> forward_;
  std::vector<at::Tensor> inputs_;
  ParameterNames names_;
  std::string origin_;
  bool compiled_;
  std::int64_t parameters_;
  std::string input_values_;
  at::Tensor output_;
  std::vector<std::string> event_modules_;  ///< [event] of the captured pass: its module scope
};

/// A training step ready to run: run() is forward, loss, backward, optimizer step, zero-grad.
class TrainModel final : public PreparedModel {
 public:
  /// `per_layer`: the forward opens a user scope per layer (eager torch::nn), so profile_layers
  /// times each layer's forward and backward; else the step's three phases.
  TrainModel(std::string name, std::shared_ptr<void> keep_alive, libtorch::TrainingStep step, ParameterNames names,
             std::string origin, std::int64_t parameters, bool per_layer)
      : name_(std::move(name)),
        keep_alive_(std::move(keep_alive)),
        step_(std::move(step)),
        names_(std::move(names)),
        origin_(std::move(origin)),
        parameters_(parameters),
        per_layer_(per_layer) {}

  void run() override { note_loss(step_.step()); }

  /// The forward ops of a step, recorded with autograd on as the step runs them (after a few
  /// steps: TorchScript's profiling executor settles its differentiable graphs first).
  OpGraph captured_graph() override {
    for (int i = 0; i < kSettleSteps; ++i) note_loss(step_.step());
    const auto calls = libtorch::capture_calls([this] { step_.forward_pass(); }, step_.inputs(), names_);
    return capture::graph_from_captured(calls, name_);
  }

  LayerTiming profile_layers(int runs) override {
    return per_layer_ ? step_.time_layers(runs) : step_.time_phases(runs);
  }

  std::optional<StepMemory> step_memory() override { return step_.measure_memory(); }

  std::map<std::string, std::string> environment() const override {
    std::map<std::string, std::string> env = framework_environment();
    for (const auto& [k, v] : step_.describe()) env[k] = v;
    env["model_origin"] = origin_;
    env["framework_parameters"] = std::to_string(parameters_);
    env["layer_timer"] =
        per_layer_ ? "each layer's forward (RecordFunction user scopes) and backward (pre- and post-hooks on each "
                     "autograd node), the loss and the optimizer with zero-grad, by steady_clock"
                   : "the step's phases (forward with the loss, backward, optimizer with zero-grad) by steady_clock";
    if (steps_ > 0) {
      env["train_steps_run"] = std::to_string(steps_);
      env["train_loss_first"] = fmt::format("{:.6g}", first_loss_);
      env["train_loss_last"] = fmt::format("{:.6g}", last_loss_);
    }
    return env;
  }

 private:
  static constexpr int kSettleSteps = 3;
  void note_loss(double loss) {
    if (steps_++ == 0) first_loss_ = loss;
    last_loss_ = loss;
  }

  std::string name_;
  std::shared_ptr<void> keep_alive_;  ///< the module the step's forward and parameters belong to
  libtorch::TrainingStep step_;
  ParameterNames names_;
  std::string origin_;
  std::int64_t parameters_;
  bool per_layer_;
  std::int64_t steps_ = 0;
  double first_loss_ = 0, last_loss_ = 0;
};

std::vector<at::Tensor> trainable(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

std::int64_t trainable_count(const std::vector<at::Tensor>& params) {
  std::int64_t n = 0;
  for (const at::Tensor& p : params) n += p.requires_grad() ? p.numel() : 0;
  return n;
}

ParameterNames names_of(const torch::nn::Module& net) {
  ParameterNames names;
  for (const auto& item : net.named_parameters()) names[item.value().data_ptr()] = item.key();
  for (const auto& item : net.named_buffers()) names[item.value().data_ptr()] = item.key();
  return names;
}

/// names_of() for the frozen graph: freezing's constant pooling makes equal weights one constant
/// (block0.norm.weight and block1.norm.weight, both ones), which then carries one of their names
/// into the other layer's row; a weight equal to one of another module is left unnamed instead
/// (stage0.bn's unit weight and running variance pool within their module, and keep their names).
ParameterNames frozen_names_of(const torch::nn::Module& net) {
  std::vector<std::pair<std::string, at::Tensor>> all;
  for (const auto& item : net.named_parameters()) all.emplace_back(item.key(), item.value());
  for (const auto& item : net.named_buffers()) all.emplace_back(item.key(), item.value());
  const auto module = [](const std::string& name) { return name.substr(0, name.rfind('.')); };
  ParameterNames names;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const at::Tensor& t = all[i].second;
    bool pooled = false;
    for (std::size_t j = 0; j < all.size() && !pooled; ++j) {
      const at::Tensor& u = all[j].second;
      pooled = module(all[j].first) != module(all[i].first) && u.scalar_type() == t.scalar_type() &&
               u.sizes() == t.sizes() && torch::equal(u, t);
    }
    if (!pooled) names[t.data_ptr()] = all[i].first;
  }
  return names;
}

/// Compiled mode: freeze (weights become constants, attributes inlined), then the frozen-graph
/// optimisations of optimize_for_inference (conv/batch-norm and linear folding, dropout
/// removal, constant propagation). optimize_for_inference's last step, the MKLDNN layout
/// conversion, is left out: its prim::mkldnn_* ops run outside the RecordFunction observer,
/// so the ops that ran could not be counted.
torch::jit::Module compile(const torch::jit::Module& scripted) {
  torch::jit::Module frozen = torch::jit::freeze(scripted);
  for (const torch::jit::Method& method : frozen.get_methods()) {
    std::shared_ptr<torch::jit::Graph> graph = method.graph();
    torch::jit::OptimizeFrozenGraph(graph, true);
  }
  return frozen;
}

at::Tensor run_script(torch::jit::Module& m, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  c10::IValue out = m.forward(args);
  if (out.isTensor()) return out.toTensor();
  if (out.isTuple() && !out.toTupleRef().elements().empty() && out.toTupleRef().elements()[0].isTensor()) {
    return out.toTupleRef().elements()[0].toTensor();
  }
  return at::Tensor();
}

/// A training step of a reference network in train mode: eager (the torch::nn module) or compiled
/// (its TorchScript twin, not frozen: freezing makes the weights constants, which cannot train).
std::unique_ptr<PreparedModel> prepare_reference_training(const ModelRequest& request, const std::string& mode,
                                                          const TrainRun& train) {
  auto net = libtorch::make_reference_net(request);
  net->train();
  std::vector<at::Tensor> inputs = {libtorch::reference_input(request)};
  const std::string name = fmt::format("{} ({}, libtorch, train)", request.model, mode);
  std::vector<at::Tensor> params = trainable(net->parameters());
  const std::int64_t count = trainable_count(params);
  if (mode == "eager") {
    libtorch::TrainingStep step([net](const std::vector<at::Tensor>& in) { return net->forward(in[0]); }, params,
                                std::move(inputs), train);
    return std::make_unique<TrainModel>(name, net, std::move(step), names_of(*net), "torch::nn module, train mode",
                                        count, true);
  }
  auto scripted = std::make_shared<torch::jit::Module>(libtorch::script_reference_net(*net, true));
  libtorch::TrainingStep step([scripted](const std::vector<at::Tensor>& in) { return run_script(*scripted, in); },
                              params, std::move(inputs), train);
  auto both = std::make_shared<std::pair<decltype(net), decltype(scripted)>>(net, scripted);
  return std::make_unique<TrainModel>(
      name, both, std::move(step), names_of(*net),
      "TorchScript (scripted from the torch::nn module, train mode, not frozen: its profiling executor differentiates "
      "the graph); the optimizer is torch::optim, eager",
      count, false);
}

std::unique_ptr<PreparedModel> prepare_reference(const ModelRequest& request, const std::string& mode) {
  auto net = libtorch::make_reference_net(request);
  std::vector<at::Tensor> inputs = {libtorch::reference_input(request)};
  const std::string name = fmt::format("{} ({}, libtorch)", request.model, mode);
  if (mode == "eager") {
    return std::make_unique<TorchModel>(
        name, [net](const std::vector<at::Tensor>& in) { return net->forward(in[0]); }, std::move(inputs),
        names_of(*net), "torch::nn module", false, trainable_count(net->parameters()));
  }
  auto compiled = std::make_shared<torch::jit::Module>(compile(libtorch::script_reference_net(*net)));
  return std::make_unique<TorchModel>(
      name, [compiled, net](const std::vector<at::Tensor>& in) { return run_script(*compiled, in); }, std::move(inputs),
      frozen_names_of(*net), "TorchScript (scripted from the torch::nn module), frozen and optimized", true,
      trainable_count(net->parameters()));
}

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::kFp64: return torch::kFloat64;
    case DType::kFp16: return torch::kFloat16;
    case DType::kBf16: return torch::kBFloat16;
    case DType::kInt64: return torch::kInt64;
    case DType::kInt32: return torch::kInt32;
    case DType::kInt8: return torch::kInt8;
    case DType::kBool: return torch::kBool;
    case DType::kFp32:
    case DType::kTf32:
    case DType::kFp8: break;
  }
  return torch::kFloat32;
}

/// An input's values (model_inputs.hpp): floats standard normal or uniform in the range, integers
/// uniform in the range, bools 0 or 1. The caller seeds the generator.
at::Tensor input_values(const InputSpec& spec, DType dtype, const std::string& path) {
  const auto options = torch::TensorOptions().dtype(scalar_type(dtype));
  if (dtype == DType::kBool)
    return torch::randint(0, 2, spec.shape, torch::TensorOptions().dtype(torch::kInt64)).to(torch::kBool);
  if (is_integer(dtype)) {
    if (!spec.range) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: input '{}' is {}: give its value range, e.g. --input {}={}:{}:0..30522 (HIGH "
                      "excluded)",
                      path, spec.name, dtype_name(dtype), spec.name, shape_string(spec.shape), dtype_name(dtype)));
    }
    return torch::randint(static_cast<std::int64_t>(spec.range->low), static_cast<std::int64_t>(spec.range->high),
                          spec.shape, options);
  }
  if (spec.range) return torch::rand(spec.shape, options) * (spec.range->high - spec.range->low) + spec.range->low;
  return torch::randn(spec.shape, options);
}

std::unique_ptr<PreparedModel> prepare_file(const ModelRequest& request, const std::string& mode) {
  const std::string& path = request.model;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open TorchScript file '{}'", path));
  }
  const std::vector<InputSpec> given = inputs_of(request);
  if (given.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a TorchScript file needs its inputs: --input NAME=SHAPE[:DTYPE[:LOW..HIGH]] or "
                            "--input-shape SHAPE (e.g. 32x3x32x32), once per input",
                            path));
  }
  check_torchscript_archive(path);  // our reader first: LibTorch allocates what the entries declare
  auto module = std::make_shared<torch::jit::Module>();
  try {
    *module = torch::jit::load(path);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kDataLoss,
                fmt::format("{}: not a loadable TorchScript file: {}", path, first_line(e.what())));
  }
  module->eval();
  // the inputs of forward by name (the schema's first argument is the module itself)
  std::vector<std::string> input_names;
  std::size_t required = 0;
  if (const auto forward = module->find_method("forward")) {
    const auto& arguments = forward->function().getSchema().arguments();
    for (std::size_t i = 1; i < arguments.size(); ++i) {
      input_names.push_back(arguments[i].name());
      if (!arguments[i].default_value()) required = input_names.size();
    }
  } else {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the TorchScript module has no forward method", path));
  }
  const std::vector<InputSpec> specs = match_inputs(given, input_names, required, path);
  ParameterNames names;
  std::int64_t parameters = 0;
  for (const auto& item : module->named_parameters()) {
    names[item.value.data_ptr()] = item.name;
    parameters += item.value.numel();
  }
  for (const auto& item : module->named_buffers()) names[item.value.data_ptr()] = item.name;
  if (mode == "compiled") {
    try {
      *module = compile(*module);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("{}: cannot freeze and optimize: {}", path, first_line(e.what())));
    }
  }
  std::vector<at::Tensor> inputs;
  std::string described, shapes;
  torch::manual_seed(1);
  for (const InputSpec& spec : specs) {
    // TorchScript declares no input dtypes: an input without its own has the model's
    const DType dtype = spec.dtype.value_or(request.dtype);
    inputs.push_back(input_values(spec, dtype, path));
    described += (described.empty() ? "" : "; ") + describe_input(spec, dtype);
    shapes += (shapes.empty() ? "" : ", ") + shape_string(spec.shape);
  }
  auto model = std::make_unique<TorchModel>(
      fmt::format("{} ({}, libtorch)", std::filesystem::path(path).filename().string(), mode),
      [module](const std::vector<at::Tensor>& in) { return run_script(*module, in); }, std::move(inputs),
      std::move(names), fmt::format("TorchScript file {}", path), mode == "compiled", parameters);
  model->set_input_values(described);
  try {
    model->run();  // fails here, with the framework's reason, when the input shapes are wrong
  } catch (const std::exception& e) {
    std::string why = reason_of(e.what());
    if (why.find("scalar type") != std::string::npos) {
      why += " (an integer input such as token ids needs its dtype and range, e.g. --input ids=8x128:int64:0..30522)";
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: forward failed for input shape(s) {}: {}", path, shapes, why));
  }
  return model;
}

class LibTorchBackend final : public Backend {
 public:
  std::string_view name() const override { return "libtorch"; }
  std::string_view description() const override {
    return "PyTorch's C++ runtime (LibTorch " TORCH_VERSION "): eager torch::nn, compiled TorchScript";
  }
  std::optional<std::string> unavailable_reason() const override { return std::nullopt; }
  std::vector<std::string> modes() const override { return {"eager", "compiled"}; }

  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& request, const std::string& mode,
                                         const RunOptions& run) const override {
    if (!run.device.is_cpu()) {
      throw Error(ErrorCode::kNotFound, fmt::format("libtorch: no device '{}' (devices: cpu)", run.device.name()));
    }
    if (mode != "eager" && mode != "compiled") {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("libtorch: unknown mode '{}' (modes: eager, compiled)", mode));
    }
    if (request.dtype != DType::kFp32 && request.dtype != DType::kFp64) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("libtorch: dtype {} is not supported (fp32, fp64)", dtype_name(request.dtype)));
    }
    if (run.threads > 0) at::set_num_threads(run.threads);
    const auto& names = reference_model_names();
    const bool reference = std::find(names.begin(), names.end(), request.model) != names.end();
    if (run.train) {
      if (!reference) {
        throw Error(ErrorCode::kUnimplemented,
                    fmt::format("libtorch: {}: training runs the built-in networks only (ff, cnn, rnn, lstm, "
                                "transformer), not model files",
                                request.model));
      }
      // before the model is built: its parameters and everything after are counted
      libtorch::install_counting_allocator();
      try {
        return prepare_reference_training(request, mode, *run.train);
      } catch (const c10::Error& e) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("libtorch: {}: {}", request.model, first_line(e.what_without_backtrace())));
      }
    }
    try {
      if (std::find(names.begin(), names.end(), request.model) != names.end()) {
        return prepare_reference(request, mode);
      }
      return prepare_file(request, mode);
    } catch (const c10::Error& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("libtorch: {}: {}", request.model, first_line(e.what_without_backtrace())));
    }
  }
};

}  // namespace

const Backend& libtorch_backend() {
  static const LibTorchBackend backend;
  return backend;
}

}  // namespace neuralcost
