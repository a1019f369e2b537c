// The reference networks in torch::nn and their TorchScript twins (see reference_modules.hpp).
// Structure and defaults follow docs/reference-networks.md; the tests check parameter counts
// and FLOPs against the static model and outputs of eager against compiled.
#include "backends/libtorch/reference_modules.hpp"

#include <ATen/record_function.h>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost::libtorch {
namespace {

namespace nn = torch::nn;

std::string p(const std::string& name) { return "self." + script_name(name); }

/// A module that only groups others under a name ("block0" holding "linear" and "norm"), so
/// that parameter names are the module paths of the static model (block0.linear.weight).
std::shared_ptr<nn::Module> group(nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<nn::Module>());
}

/// Runs `f` inside a RecordFunction user scope named `path`: torch::nn in C++ has no module
/// hooks, so the forward passes name their layers for the op observer (capture.hpp) with the
/// names the static model gives them (docs/reference-networks.md). Free when nothing observes.
template <typename F>
at::Tensor in_scope(const std::string& path, F&& f) {
  RECORD_USER_SCOPE(path);
  return f();
}

class FeedForward : public ReferenceNet {
 public:
  FeedForward(const ModelRequest& r, const DataShape& data) {
    std::int64_t in = data.features;
    for (std::int64_t i = 0; i < r.depth; ++i) {
      auto block = group(*this, fmt::format("block{}", i));
      linears_.push_back(block->register_module("linear", nn::Linear(in, r.width)));
      norms_.push_back(block->register_module("norm", nn::LayerNorm(nn::LayerNormOptions({r.width}))));
      in = r.width;
    }
    classifier_ = register_module("classifier", nn::Linear(r.width, data.classes));
  }
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = input;
    for (std::size_t i = 0; i < linears_.size(); ++i) {
      const std::string b = fmt::format("block{}.", i);
      x = in_scope(b + "linear", [&] { return linears_[i]->forward(x); });
      x = in_scope(b + "relu", [&] { return torch::relu(x); });
      x = in_scope(b + "norm", [&] { return norms_[i]->forward(x); });
    }
    return in_scope("classifier", [&] { return classifier_->forward(x); });
  }
  std::string script_source(bool /*training*/) const override {
    std::string s = "def forward(self, x):\n";
    for (std::size_t i = 0; i < linears_.size(); ++i) {
      s += fmt::format("    x = torch.relu(torch.linear(x, {}, {}))\n", p(fmt::format("block{}.linear.weight", i)),
                       p(fmt::format("block{}.linear.bias", i)));
      s += fmt::format("    x = torch.layer_norm(x, [x.size(-1)], {}, {}, 1e-5, True)\n",
                       p(fmt::format("block{}.norm.weight", i)), p(fmt::format("block{}.norm.bias", i)));
    }
    return s + fmt::format("    return torch.linear(x, {}, {})\n", p("classifier.weight"), p("classifier.bias"));
  }

 private:
  std::vector<nn::Linear> linears_;
  std::vector<nn::LayerNorm> norms_;
  nn::Linear classifier_{nullptr};
};

class Cnn : public ReferenceNet {
 public:
  Cnn(const ModelRequest& r, const DataShape& data) {
    std::int64_t in = data.channels;
    for (std::int64_t s = 0; s < r.depth; ++s) {
      const std::int64_t channels = r.width / (std::int64_t{1} << (r.depth - 1 - s));
      auto stage = group(*this, fmt::format("stage{}", s));
      convs_.push_back(stage->register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, channels, 3).padding(1))));
      norms_.push_back(stage->register_module("bn", nn::BatchNorm2d(channels)));
      in = channels;
    }
    classifier_ = register_module("classifier", nn::Linear(r.width, data.classes));
  }
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = input;
    for (std::size_t s = 0; s < convs_.size(); ++s) {
      const std::string n = fmt::format("stage{}.", s);
      x = in_scope(n + "conv", [&] { return convs_[s]->forward(x); });
      x = in_scope(n + "relu", [&] { return torch::relu(x); });
      x = in_scope(n + "bn", [&] { return norms_[s]->forward(x); });
      if (s + 1 < convs_.size()) x = in_scope(n + "pool", [&] { return torch::max_pool2d(x, 2); });
    }
    x = in_scope("global_pool", [&] { return torch::adaptive_avg_pool2d(x, {1, 1}); });
    x = in_scope("flatten", [&] { return x.flatten(1); });
    return in_scope("classifier", [&] { return classifier_->forward(x); });
  }
  std::string script_source(bool training) const override {
    std::string s = "def forward(self, x):\n";
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      s += fmt::format("    x = torch.relu(torch.conv2d(x, {}, {}, [1, 1], [1, 1], [1, 1], 1))\n",
                       p(fmt::format("stage{}.conv.weight", i)), p(fmt::format("stage{}.conv.bias", i)));
      s += fmt::format("    x = torch.batch_norm(x, {}, {}, {}, {}, {}, 0.1, 1e-5, True)\n",
                       p(fmt::format("stage{}.bn.weight", i)), p(fmt::format("stage{}.bn.bias", i)),
                       p(fmt::format("stage{}.bn.running_mean", i)), p(fmt::format("stage{}.bn.running_var", i)),
                       training ? "True" : "False");
      if (i + 1 < convs_.size()) s += "    x = torch.max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], False)\n";
    }
    s += "    x = torch.mean(x, [2, 3])\n";
    return s + fmt::format("    return torch.linear(x, {}, {})\n", p("classifier.weight"), p("classifier.bias"));
  }

 private:
  std::vector<nn::Conv2d> convs_;
  std::vector<nn::BatchNorm2d> norms_;
  nn::Linear classifier_{nullptr};
};

class Recurrent : public ReferenceNet {
 public:
  Recurrent(const ModelRequest& r, bool lstm) : lstm_(lstm), layers_(r.depth), hidden_(r.width) {
    if (lstm) {
      lstm_module_ =
          register_module("lstm", nn::LSTM(nn::LSTMOptions(r.width, r.width).num_layers(r.depth).batch_first(true)));
    } else {
      rnn_module_ =
          register_module("rnn", nn::RNN(nn::RNNOptions(r.width, r.width).num_layers(r.depth).batch_first(true)));
    }
    classifier_ = register_module("classifier", nn::Linear(r.width, 10));
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = in_scope(lstm_ ? "lstm" : "rnn", [&] {
      return lstm_ ? std::get<0>(lstm_module_->forward(x)) : std::get<0>(rnn_module_->forward(x));
    });
    out = in_scope("last_step", [&] { return out.select(1, -1); });
    return in_scope("classifier", [&] { return classifier_->forward(out); });
  }
  std::string script_source(bool /*training*/) const override {
    const std::string m = lstm_ ? "lstm" : "rnn";
    std::string params;
    for (std::int64_t l = 0; l < layers_; ++l) {
      for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
        params += (params.empty() ? "" : ", ") + p(fmt::format("{}.{}_l{}", m, w, l));
      }
    }
    std::string s = "def forward(self, x):\n";
    s += fmt::format("    h = torch.zeros([{}, x.size(0), {}], dtype=x.dtype)\n", layers_, hidden_);
    if (lstm_) {
      s += fmt::format("    out, hn, cn = torch.lstm(x, [h, h], [{}], True, {}, 0.0, False, False, True)\n", params,
                       layers_);
    } else {
      s +=
          fmt::format("    out, hn = torch.rnn_tanh(x, h, [{}], True, {}, 0.0, False, False, True)\n", params, layers_);
    }
    return s + fmt::format("    return torch.linear(out.select(1, -1), {}, {})\n", p("classifier.weight"),
                           p("classifier.bias"));
  }

 private:
  bool lstm_;
  std::int64_t layers_, hidden_;
  nn::LSTM lstm_module_{nullptr};
  nn::RNN rnn_module_{nullptr};
  nn::Linear classifier_{nullptr};
};

class Transformer : public ReferenceNet {
 public:
  explicit Transformer(const ModelRequest& r) : width_(r.width) {
    for (std::int64_t l = 0; l < r.depth; ++l) {
      layers_.push_back(register_module(
          fmt::format("encoder{}", l),
          nn::TransformerEncoderLayer(
              nn::TransformerEncoderLayerOptions(r.width, kHeads).dim_feedforward(4 * r.width).dropout(0.0))));
    }
    classifier_ = register_module("classifier", nn::Linear(r.width, 10));
  }
  at::Tensor forward(const at::Tensor& x) override {
    // torch::nn's encoder layer is sequence-first: [B,T,d] -> [T,B,d] and back by a view
    at::Tensor h = x.transpose(0, 1);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      h = in_scope(fmt::format("encoder{}", l), [&] { return layers_[l]->forward(h); });
    }
    h = in_scope("mean_over_time", [&] { return h.mean(0); });
    return in_scope("classifier", [&] { return classifier_->forward(h); });
  }
  std::string script_source(bool /*training*/) const override {
    const std::int64_t dh = width_ / kHeads;
    std::string s = "def forward(self, x):\n    b = x.size(0)\n    t = x.size(1)\n";
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const std::string e = fmt::format("encoder{}.", l);
      s += fmt::format("    q, k, v = torch.linear(x, {}, {}).chunk(3, -1)\n", p(e + "self_attn.in_proj_weight"),
                       p(e + "self_attn.in_proj_bias"));
      for (const char* n : {"q", "k", "v"}) {
        s += fmt::format("    {0} = {0}.reshape(b, t, {1}, {2}).transpose(1, 2)\n", n, kHeads, dh);
      }
      s += fmt::format("    a = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * {}, -1)\n",
                       1.0 / std::sqrt(static_cast<double>(dh)));
      s += fmt::format("    a = torch.matmul(a, v).transpose(1, 2).reshape(b, t, {})\n", width_);
      s += fmt::format("    a = torch.linear(a, {}, {})\n", p(e + "self_attn.out_proj.weight"),
                       p(e + "self_attn.out_proj.bias"));
      s += fmt::format("    x = torch.layer_norm(x + a, [{}], {}, {}, 1e-5, True)\n", width_, p(e + "norm1.weight"),
                       p(e + "norm1.bias"));
      s += fmt::format("    f = torch.linear(torch.relu(torch.linear(x, {}, {})), {}, {})\n", p(e + "linear1.weight"),
                       p(e + "linear1.bias"), p(e + "linear2.weight"), p(e + "linear2.bias"));
      s += fmt::format("    x = torch.layer_norm(x + f, [{}], {}, {}, 1e-5, True)\n", width_, p(e + "norm2.weight"),
                       p(e + "norm2.bias"));
    }
    return s +
           fmt::format("    return torch.linear(x.mean(1), {}, {})\n", p("classifier.weight"), p("classifier.bias"));
  }

 private:
  static constexpr std::int64_t kHeads = 4;
  std::int64_t width_;
  std::vector<nn::TransformerEncoderLayer> layers_;
  nn::Linear classifier_{nullptr};
};

}  // namespace

std::string script_name(const std::string& parameter_name) {
  std::string s = "p_" + parameter_name;
  for (char& c : s) {
    if (c == '.') c = '_';
  }
  return s;
}

std::shared_ptr<ReferenceNet> make_reference_net(const ModelRequest& r, const DataShape& data) {
  for (const auto& [name, value] : {std::pair<const char*, std::int64_t>{"batch", r.batch},
                                    {"seq", r.seq},
                                    {"width", r.width},
                                    {"depth", r.depth}}) {
    if (value < 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--{} must be at least 1 (got {})", name, value));
    }
  }
  torch::manual_seed(0);
  std::shared_ptr<ReferenceNet> net;
  if (r.model == "ff") net = std::make_shared<FeedForward>(r, data);
  if (r.model == "cnn") {
    if (r.depth > 6 || r.width % (std::int64_t{1} << (r.depth - 1)) != 0) {
      throw Error(ErrorCode::kInvalidArgument, "cnn: --depth must be at most 6 and divide --width into halves");
    }
    net = std::make_shared<Cnn>(r, data);
  }
  if (r.model == "rnn" || r.model == "lstm") net = std::make_shared<Recurrent>(r, r.model == "lstm");
  if (r.model == "transformer") {
    if (r.width % 4 != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--width {} must be divisible by the 4 attention heads", r.width));
    }
    net = std::make_shared<Transformer>(r);
  }
  if (!net) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("unknown model '{}'; built-in models: ff, cnn, rnn, lstm, transformer", r.model));
  }
  net->eval();
  if (r.dtype == DType::kFp64) net->to(torch::kFloat64);
  return net;
}

at::Tensor reference_input(const ModelRequest& r) {
  const auto options = torch::TensorOptions().dtype(r.dtype == DType::kFp64 ? torch::kFloat64 : torch::kFloat32);
  torch::manual_seed(1);
  if (r.model == "ff") return torch::randn({r.batch, 784}, options);
  if (r.model == "cnn") return torch::randn({r.batch, 3, 32, 32}, options);
  return torch::randn({r.batch, r.seq, r.width}, options);
}

torch::jit::Module script_reference_net(ReferenceNet& net, bool training) {
  torch::jit::Module m("ReferenceNet");
  for (const auto& item : net.named_parameters()) m.register_parameter(script_name(item.key()), item.value(), false);
  for (const auto& item : net.named_buffers()) m.register_buffer(script_name(item.key()), item.value());
  m.define(net.script_source(training));
  if (training) {
    m.train();
  } else {
    m.eval();
  }
  return m;
}

}  // namespace neuralcost::libtorch
