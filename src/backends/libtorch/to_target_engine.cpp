// Train-to-target in LibTorch (to_target_engine.hpp): the loop of the torch worker's
// to_target.py, in C++, so that a seed runs the same training in both.
#include "backends/libtorch/to_target_engine.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "backends/libtorch/reference_modules.hpp"
#include "backends/libtorch/training_step.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::libtorch {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// One split of the request's data: x as [n, features] floats, y as class indices.
struct Split {
  at::Tensor x, y;
};

Split read_split(const json& data, const char* xs, const char* ys, std::int64_t features, std::int64_t classes) {
  const std::vector<float> x = data.at(xs).get<std::vector<float>>();
  const std::vector<std::int64_t> y = data.at(ys).get<std::vector<std::int64_t>>();
  if (y.empty()) bad(fmt::format("the data's {} is empty", ys));
  if (x.size() != y.size() * static_cast<std::size_t>(features)) {
    bad(fmt::format("the data's {} holds {} values, not {} images of {}", xs, x.size(), y.size(), features));
  }
  for (std::int64_t c : y) {
    if (c < 0 || c >= classes) bad(fmt::format("the data's {} holds class {} of {}", ys, c, classes));
  }
  const auto n = static_cast<std::int64_t>(y.size());
  return {torch::from_blob(const_cast<float*>(x.data()), {n, features}, torch::kFloat32).clone(),
          torch::from_blob(const_cast<std::int64_t*>(y.data()), {n}, torch::kInt64).clone()};
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name, const std::vector<at::Tensor>& params,
                                                        double lr) {
  if (name == "sgd") return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr).momentum(0.9));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
}

/// A user's TorchScript file, with the input layout it takes (without the batch) in `layout`:
/// found by a forward of two images, first as images [N, C, H, W], then flattened [N, C*H*W]. Its
/// output must be [N, classes] logits and it must have trainable parameters (to_target.py's
/// load_script, alike).
torch::jit::Module load_script(const std::string& path, const std::vector<std::int64_t>& image, std::int64_t classes,
                               std::vector<std::int64_t>& layout) {
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    bad(fmt::format("--model {}: not ff or cnn, nor a TorchScript file LibTorch can load ({})", path,
                    what.substr(0, what.find('\n'))));
  }
  bool trainable = false;
  for (const at::Tensor& p : m.parameters()) trainable = trainable || p.requires_grad();
  if (!trainable) bad(fmt::format("--model {}: it has no trainable parameters", path));
  const std::int64_t features = image[0] * image[1] * image[2];
  std::string tried;
  m.eval();
  for (const std::vector<std::int64_t>& candidate : {image, std::vector<std::int64_t>{features}}) {
    std::vector<std::int64_t> shape{2};
    shape.insert(shape.end(), candidate.begin(), candidate.end());
    c10::IValue out;
    try {
      torch::NoGradGuard no_grad;
      out = m.forward({torch::zeros(shape)});
    } catch (const std::exception& e) {
      std::string what = e.what();
      what = what.substr(0, what.find('\n'));
      tried += fmt::format("{}[{}]: {}", tried.empty() ? "" : "; ", fmt::join(shape, ", "), what);
      continue;
    }
    if (!out.isTensor() || out.toTensor().sizes() != at::IntArrayRef{2, classes}) {
      bad(fmt::format("--model {}: its output for [{}] is {}, not [2, {}] logits", path, fmt::join(shape, ", "),
                      out.isTensor() ? fmt::format("[{}]", fmt::join(out.toTensor().sizes(), ", ")) : out.tagKind(),
                      classes));
    }
    m.train();
    layout = candidate;
    return m;
  }
  bad(fmt::format("--model {}: takes neither the images nor them flattened ({})", path, tried));
}

/// The parameters and buffers' values, to put back after the compiled mode's warm-up.
std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& state) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : state) out.push_back(t.detach().clone());
  return out;
}

}  // namespace

json run_to_target(const json& req) {
  const std::string model = req.value("model", "ff"), mode = req.value("mode", "eager");
  const std::string precision = req.value("precision", "fp32"), optimizer = req.value("optimizer", "sgd");
  const std::int64_t batch = req.value("batch", 32);
  const double lr = req.value("lr", 0.05), target = req.at("target").get<double>();
  const std::int64_t eval_every = req.value("eval_every", 20), max_steps = req.value("max_steps", 2000);
  const std::uint64_t seed = req.value("seed", std::uint64_t{1});
  const int threads = req.value("threads", 0);
  const bool reference = model == "ff" || model == "cnn";
  if (!reference && mode == "compiled") {
    bad(fmt::format("--mode compiled: {} is TorchScript, which runs as it is in both modes; give --mode eager", model));
  }
  if (mode != "eager" && mode != "compiled") bad(fmt::format("--mode {}: eager or compiled", mode));
  if (precision != "fp32" && precision != "bf16-mixed") {
    bad(fmt::format("--precision {}: train-to-target runs fp32 or bf16-mixed on a CPU", precision));
  }
  if (optimizer != "sgd" && optimizer != "adam") bad(fmt::format("--optimizer {}: one of sgd, adam", optimizer));
  if (batch < 1 || eval_every < 1 || max_steps < 1) bad("batch, eval_every and max_steps must be at least 1");

  const json& data = req.at("data");
  const std::vector<std::int64_t> image = data.at("image").get<std::vector<std::int64_t>>();
  const std::int64_t classes = data.at("classes").get<std::int64_t>();
  if (image.size() != 3 || classes < 2) bad("the data's image must be [channels, height, width] with 2+ classes");
  const std::int64_t features = image[0] * image[1] * image[2];
  const Split train = read_split(data, "train_x", "train_y", features, classes);
  const Split val = read_split(data, "val_x", "val_y", features, classes);
  const std::int64_t train_n = train.y.size(0);
  if (batch > train_n) bad(fmt::format("--batch {} is larger than the {} training images", batch, train_n));
  if (threads > 0) at::set_num_threads(threads);

  // the network: a reference one adapted to the data, or the user's TorchScript file
  std::shared_ptr<ReferenceNet> net;
  std::shared_ptr<torch::jit::Module> user;
  std::vector<std::int64_t> layout;  // an input's shape without the batch
  if (reference) {
    ModelRequest r;
    r.model = model;
    r.batch = batch;
    r.width = req.value("width", 64);
    r.depth = req.value("depth", 2);
    if (model == "cnn" && (image[1] >> (r.depth - 1)) < 1) {
      bad(fmt::format("cnn of depth {} pools {} x {} images below one pixel", r.depth, image[1], image[2]));
    }
    net = make_reference_net(r, DataShape{features, image[0], classes});
    net->train();
    layout = model == "cnn" ? image : std::vector<std::int64_t>{features};
  } else {
    user = std::make_shared<torch::jit::Module>(load_script(model, image, classes, layout));
  }
  std::vector<at::Tensor> params;
  if (net) {
    params = net->parameters();
  } else {
    for (const at::Tensor& p : user->parameters()) {
      if (p.requires_grad()) params.push_back(p);
    }
  }
  torch::manual_seed(seed);  // the run's own initial weights, drawn as to_target.py draws them
  {
    torch::NoGradGuard no_grad;
    for (at::Tensor p : params) {
      if (p.dim() > 1) {
        torch::nn::init::kaiming_uniform_(p, std::sqrt(5.0));
      } else {
        p.uniform_(-0.05, 0.05);
      }
    }
  }
  std::vector<std::int64_t> shape{-1};
  shape.insert(shape.end(), layout.begin(), layout.end());
  const at::Tensor xt = train.x.reshape(shape), xv = val.x.reshape(shape);
  auto opt = make_optimizer(optimizer, params, lr);
  const bool mixed = precision == "bf16-mixed";

  // compiled: the TorchScript twins (train mode to train, eval mode to evaluate: batch norm's
  // statistics), sharing the module's tensors
  std::shared_ptr<torch::jit::Module> script_train, script_eval;
  if (mode == "compiled") {
    script_train = std::make_shared<torch::jit::Module>(script_reference_net(*net, true));
    script_eval = std::make_shared<torch::jit::Module>(script_reference_net(*net, false));
  }
  const auto forward = [&](const at::Tensor& x, bool training) {
    if (user) return user->forward({x}).toTensor();
    if (!script_train) return net->forward(x);
    return (training ? script_train : script_eval)->forward({x}).toTensor();
  };
  const auto set_training = [&](bool on) {
    if (user) {
      user->train(on);
    } else {
      net->train(on);
    }
  };
  const auto zero_grad = [&] {
    for (at::Tensor p : params) p.mutable_grad() = at::Tensor();  // set to none, as to_target.py
  };
  const auto step = [&](const at::Tensor& x, const at::Tensor& y) {
    zero_grad();
    at::Tensor loss;
    {
      CpuAutocast autocast(mixed);
      loss = torch::nn::functional::cross_entropy(forward(x, true), y);
    }
    loss.backward();
    opt->step();
    return loss;
  };
  const auto evaluate = [&] {
    set_training(false);
    torch::NoGradGuard no_grad;
    at::Tensor out;
    {
      CpuAutocast autocast(mixed);
      out = forward(xv, false);
    }
    set_training(true);
    return out.argmax(1).eq(val.y).to(torch::kFloat64).mean().item<double>();
  };

  double compile_seconds = 0;
  if (script_train) {
    // the profiling executor specialises and optimises each graph after its first runs: three
    // training passes (forward and backward, no update) and two evaluations before the clock
    // starts (MLPerf's initialisation), then the initial weights, buffers and optimizer put back
    const Clock::time_point t0 = Clock::now();
    std::vector<at::Tensor> state = params;
    for (const at::Tensor& b : net->buffers()) state.push_back(b);  // compiled: reference networks only
    const std::vector<at::Tensor> kept = snapshot(state);
    const at::Tensor x0 = xt.narrow(0, 0, batch), y0 = train.y.narrow(0, 0, batch);
    for (int i = 0; i < 3; ++i) {
      zero_grad();
      CpuAutocast autocast(mixed);
      torch::nn::functional::cross_entropy(forward(x0, true), y0).backward();
    }
    for (int i = 0; i < 2; ++i) evaluate();
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < state.size(); ++i) state[i].copy_(kept[i]);
    }
    zero_grad();
    opt = make_optimizer(optimizer, params, lr);
    compile_seconds = since(t0);
  }

  at::Generator order_gen = at::detail::createCPUGenerator(seed);
  const auto permutation = [&] { return torch::randperm(train_n, order_gen, torch::TensorOptions(torch::kInt64)); };
  at::Tensor order = permutation();
  std::int64_t next = 0, steps = 0;
  json curve = json::array(), reached = nullptr, first_loss = nullptr;
  double train_seconds = 0, last_loss = 0;
  bool diverged = false;
  const Clock::time_point start = Clock::now();
  while (steps < max_steps) {
    if (next + batch > train_n) {  // a new epoch: a fresh permutation, the last partial batch dropped
      order = permutation();
      next = 0;
    }
    const at::Tensor idx = order.narrow(0, next, batch);
    next += batch;
    const Clock::time_point t0 = Clock::now();
    const at::Tensor loss = step(xt.index_select(0, idx), train.y.index_select(0, idx));
    train_seconds += since(t0);
    ++steps;
    if (steps == 1) first_loss = loss.item<double>();
    if (steps % eval_every != 0 && steps != max_steps) continue;
    last_loss = loss.item<double>();
    const double accuracy = evaluate();
    curve.push_back({{"step", steps},
                     {"samples", steps * batch},
                     {"seconds", since(start)},
                     {"train_seconds", train_seconds},
                     {"accuracy", accuracy},
                     {"loss", std::isfinite(last_loss) ? json(last_loss) : json(nullptr)}});
    if (!std::isfinite(last_loss)) {
      diverged = true;
      break;
    }
    if (accuracy >= target) {
      reached = curve.back();
      break;
    }
  }
  std::int64_t parameters = 0;
  for (const at::Tensor& p : params) parameters += p.numel();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {{"ok", true},
          {"reached", !reached.is_null()},
          {"curve", curve},
          {"steps", steps},
          {"train_images", train_n},
          {"val_images", val.y.size(0)},
          {"classes", classes},
          {"compile_seconds", compile_seconds},
          {"parameters", parameters},
          {"torch", fmt::format("LibTorch {}", TORCH_VERSION)},
          {"diverged", diverged},
          {"first_loss", first_loss},
          // this process's high-water resident memory: LibTorch, the data and the training
          {"peak_rss_bytes", static_cast<std::int64_t>(usage.ru_maxrss) * 1024}};
}

}  // namespace neuralcost::libtorch
