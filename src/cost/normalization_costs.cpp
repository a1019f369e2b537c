// Softmax and the normalisations. Counts per normalised row of n elements (docs/counting.md):
//   softmax     5n - 2           (max, subtract, exp, sum, divide)
//   layer norm  5n + 2, +n per affine weight, +n per affine bias; over the trailing
//               normalized_dims, or over any attribute axes
//   RMS norm    3n + 2, +n per weight / bias
//   batch norm  (inference) 2 per element (scale, shift) + 4 per channel, +1 with affine
//               (affine unless attribute affine = false or fewer than 4 parameters)
#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

std::size_t normalized_axis(const OpRecord& op, std::size_t rank) {
  const std::int64_t axis = op.attributes.get_int("axis", -1);
  const std::int64_t r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'axis' = {} is out of range for rank {}", axis, rank));
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

/// Number of rows and their length when the trailing `dims` dimensions are normalised.
std::pair<std::uint64_t, std::uint64_t> rows_of(const TensorDesc& x, std::int64_t dims) {
  if (dims < 1 || static_cast<std::size_t>(dims) > x.shape.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot normalise the last {} dims of {}", dims, shape_string(x.shape)));
  }
  std::uint64_t n = 1;
  for (std::size_t i = x.shape.size() - static_cast<std::size_t>(dims); i < x.shape.size(); ++i) {
    n = product({n, dim(x.shape[i])});
  }
  return {n == 0 ? 0 : x.elements() / n, n};
}

/// Rows and their length when the dims at attribute `axes` are normalised (any dims, not only
/// trailing ones: ONNX MeanVarianceNormalization).
std::pair<std::uint64_t, std::uint64_t> rows_over_axes(const TensorDesc& x, const std::vector<std::int64_t>& axes) {
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<bool> seen(x.shape.size(), false);
  std::uint64_t n = 1;
  for (std::int64_t a : axes) {
    const std::int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank || seen[static_cast<std::size_t>(axis)]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("attribute 'axes' has {} outside rank {} or twice", a, rank));
    }
    seen[static_cast<std::size_t>(axis)] = true;
    n = product({n, dim(x.shape[static_cast<std::size_t>(axis)])});
  }
  return {n == 0 ? 0 : x.elements() / n, n};
}

std::int64_t trailing_dims(const OpRecord& op) {
  const std::int64_t fallback = op.parameters.empty() ? 1 : static_cast<std::int64_t>(op.parameters[0].shape.size());
  return op.attributes.get_int("normalized_dims", fallback);
}

}  // namespace

void cost_softmax(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x");
  require_rank(x.shape, 1, 64, "input");
  const std::size_t axis = normalized_axis(op, x.shape.size());
  std::uint64_t n = dim(x.shape[axis]);
  if (op.attributes.get_bool("coerce_2d", false)) {
    // ONNX before opset 13: one row per index of the dims before axis, over all dims from it
    for (std::size_t d = axis + 1; d < x.shape.size(); ++d) n = product({n, dim(x.shape[d])});
  }
  if (n == 0) return;
  const std::uint64_t rows = x.elements() / n;
  add_flops(cost, product({rows, product({5, n}) - 2}));
  add_transcendentals(cost, x.elements());
  if (op.attributes.get_bool("log", false)) {
    // log-softmax: x - max - log(sum): its n subtractions replace the n divides, plus one log per row
    add_flops(cost, rows);
    add_transcendentals(cost, rows);
  }
}

void cost_layer_norm(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x");
  const auto [rows, n] =
      op.attributes.has("axes") ? rows_over_axes(x, op.attributes.get_list("axes")) : rows_of(x, trailing_dims(op));
  if (n == 0) return;
  const std::uint64_t affine = std::min<std::size_t>(op.parameters.size(), 2);
  add_flops(cost, product({rows, checked_add(product({5 + affine, n}), 2, "FLOP count")}));
  add_transcendentals(cost, rows);
}

void cost_rms_norm(const OpRecord& op, OpCost& cost) {
  const auto [rows, n] = rows_of(input(op, 0, "x"), trailing_dims(op));
  if (n == 0) return;
  const std::uint64_t affine = std::min<std::size_t>(op.parameters.size(), 2);  // weight[, bias]
  add_flops(cost, product({rows, checked_add(product({3 + affine, n}), 2, "FLOP count")}));
  add_transcendentals(cost, rows);
  // Gemma's scale is (1 + weight): n additions, once per call (not per row)
  if (affine > 0 && op.attributes.get_bool("weight_offset", false)) add_flops(cost, n);
}

void cost_batch_norm(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x [N, C, ...]");
  require_rank(x.shape, 2, 64, "input");
  const std::uint64_t channels = dim(x.shape[1]);
  // parameters: [weight, bias,] running_mean, running_var (frozen weights are still affine)
  const bool affine = op.attributes.get_bool("affine", op.parameters.size() >= 4);
  if (op.attributes.get_bool("training", false)) {
    // batch statistics: mean (1 add per element, 1 divide per channel), variance (subtract,
    // square, add per element, 1 divide), then the normalisation below; the running statistics
    // are blended (2 FLOPs each for mean and variance per channel)
    add_flops(cost, product({4, x.elements()}));
    add_flops(cost, product({channels, 6}));
  }
  add_flops(cost, product({2, x.elements()}));
  add_flops(cost, product({channels, affine ? 5u : 4u}));
  add_transcendentals(cost, channels);
}

void cost_local_response_norm(const OpRecord& op, OpCost& cost) {
  // each element is divided by (bias + alpha/size * the sum of squares over a window of `size`
  // channels, clipped at the edges)^beta: per element 2w - 1 (squares, adds) + 3 (scale, bias,
  // divide) + 1 pow, w the clipped window of its channel
  const TensorDesc& x = input(op, 0, "x [N, C, ...]");
  require_rank(x.shape, 2, 64, "input");
  const std::int64_t size = bounded(op.attributes.get_int("size"), 1, "attribute 'size'");
  const std::int64_t channels = x.shape[1], below = (size - 1) / 2, above = size - 1 - below;
  if (channels == 0) return;
  // windows summed in closed form: sum over c of min(C, c + above + 1) - max(0, c - below)
  const Wide C = channels, k = std::max<Wide>(0, C - above);  // channels whose window is not clipped above
  const Wide m = std::max<Wide>(0, C - 1 - below);            // sum of max(0, c - below) = 1 + ... + m
  const Wide windows = k * (above + 1) + k * (k - 1) / 2 + (C - k) * C - m * (m + 1) / 2;
  const std::uint64_t positions = x.elements() / dim(channels);
  const Wide per_position = 2 * windows + 3 * Wide{channels};  // (2w - 1 + 3 + 1) summed over channels
  if (per_position > static_cast<Wide>(UINT64_MAX)) throw Error(ErrorCode::kOutOfRange, "FLOP count overflows 64 bits");
  add_flops(cost, product({positions, static_cast<std::uint64_t>(per_position)}));
  add_transcendentals(cost, x.elements());
}

}  // namespace neuralcost::cost
