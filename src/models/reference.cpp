// The reference networks of docs/reference-networks.md, built with torch::nn's structure and
// names so that captured graphs from the framework backends line up op for op.
#include "neuralcost/models/reference.hpp"

#include <fmt/format.h>

#include "models/graph_builder.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using detail::GraphBuilder;

constexpr std::int64_t kMaxOption = std::int64_t{1} << 40;  // keeps shape arithmetic in int64
constexpr std::int64_t kMaxDepth = 10000;                   // each layer is a handful of op records in memory

void require_range(const char* option, std::int64_t value) {
  if (value < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--{} must be at least 1 (got {})", option, value));
  }
  if (value > kMaxOption) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("--{} {} is too large (at most {})", option, value, kMaxOption));
  }
}

OpGraph build_ff(const ReferenceOptions& o) {
  GraphBuilder b("ff", o.dtype);
  TensorDesc x = b.input("input", {o.batch, 784});
  for (std::int64_t i = 0; i < o.depth; ++i) {
    const std::string n = fmt::format("block{}", i);
    x = b.linear(n + ".linear", x, o.width);
    x = b.activation(n + ".relu", x, "relu");
    x = b.layer_norm(n + ".norm", x);
  }
  return b.finish(b.linear("classifier", x, o.classes));
}

OpGraph build_cnn(const ReferenceOptions& o) {
  if (o.depth > 6) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--depth {} is too deep for 32x32 inputs (cnn allows at most 6 stages)", o.depth));
  }
  const std::int64_t divisor = std::int64_t{1} << (o.depth - 1);
  if (o.width % divisor != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--width {} must be divisible by {} for a {}-stage cnn (channels halve per stage)", o.width,
                            divisor, o.depth));
  }
  GraphBuilder b("cnn", o.dtype);
  TensorDesc x = b.input("input", {o.batch, 3, 32, 32});
  for (std::int64_t s = 0; s < o.depth; ++s) {
    const std::string n = fmt::format("stage{}", s);
    const std::int64_t channels = o.width / (std::int64_t{1} << (o.depth - 1 - s));
    x = b.conv2d(n + ".conv", x, channels, 3, 1);
    x = b.activation(n + ".relu", x, "relu");
    x = b.batch_norm(n + ".bn", x);
    if (s + 1 < o.depth) x = b.max_pool2d(n + ".pool", x, 2);
  }
  x = b.global_avg_pool("global_pool", x);
  x = b.view("flatten", x, {o.batch, o.width});
  return b.finish(b.linear("classifier", x, o.classes));
}

OpGraph build_recurrent(const ReferenceOptions& o, OpKind kind) {
  GraphBuilder b(o.model, o.dtype);
  TensorDesc x = b.input("input", {o.batch, o.seq, o.width});
  x = b.recurrent(o.model, kind, x, o.width, o.depth);
  x = b.select_step("last_step", x, o.seq - 1);
  return b.finish(b.linear("classifier", x, o.classes));
}

OpGraph build_transformer(const ReferenceOptions& o) {
  require_range("heads", o.heads);
  if (o.width % o.heads != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--width {} must be divisible by the {} attention heads", o.width, o.heads));
  }
  GraphBuilder b("transformer", o.dtype);
  TensorDesc x = b.input("input", {o.batch, o.seq, o.width});
  for (std::int64_t l = 0; l < o.depth; ++l) {
    const std::string n = fmt::format("encoder{}", l);
    const TensorDesc qkv = b.linear(n + ".self_attn.in_proj", x, 3 * o.width);
    const auto heads = b.split_heads(n + ".self_attn.split_heads", qkv, o.heads);
    TensorDesc a = b.attention(n + ".self_attn.sdpa", heads[0], heads[1], heads[2]);
    a = b.merge_heads(n + ".self_attn.merge_heads", a);
    a = b.linear(n + ".self_attn.out_proj", a, o.width);
    x = b.layer_norm(n + ".norm1", b.binary(n + ".residual1", x, a, "add"));
    TensorDesc f = b.activation(n + ".relu", b.linear(n + ".linear1", x, 4 * o.width), "relu");
    f = b.linear(n + ".linear2", f, o.width);
    x = b.layer_norm(n + ".norm2", b.binary(n + ".residual2", x, f, "add"));
  }
  x = b.mean("mean_over_time", x, 1);
  return b.finish(b.linear("classifier", x, o.classes));
}

}  // namespace

const std::vector<std::string>& reference_model_names() {
  static const std::vector<std::string> names = {"ff", "cnn", "rnn", "lstm", "transformer"};
  return names;
}

bool reference_model_takes_sequence(const std::string& name) {
  return name == "rnn" || name == "lstm" || name == "transformer";
}

OpGraph build_reference_model(const ReferenceOptions& o) {
  require_range("batch", o.batch);
  require_range("seq", o.seq);
  require_range("width", o.width);
  require_range("depth", o.depth);
  if (o.depth > kMaxDepth) {
    throw Error(ErrorCode::kOutOfRange, fmt::format("--depth {} is too deep (at most {})", o.depth, kMaxDepth));
  }
  require_range("classes", o.classes);
  if (o.model == "ff") return build_ff(o);
  if (o.model == "cnn") return build_cnn(o);
  if (o.model == "rnn") return build_recurrent(o, OpKind::kRnn);
  if (o.model == "lstm") return build_recurrent(o, OpKind::kLstm);
  if (o.model == "transformer") return build_transformer(o);
  throw Error(ErrorCode::kNotFound,
              fmt::format("unknown model '{}'; built-in models: ff, cnn, rnn, lstm, transformer", o.model));
}

}  // namespace neuralcost
