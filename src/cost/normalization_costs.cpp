// Softmax and the normalisations. Counts per normalised row of n elements (docs/counting.md):
//   softmax     5n - 2           (max, subtract, exp, sum, divide)
//   layer norm  5n + 2, +n per affine weight, +n per affine bias
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

std::int64_t trailing_dims(const OpRecord& op) {
  const std::int64_t fallback =
      op.parameters.empty() ? 1 : static_cast<std::int64_t>(op.parameters[0].shape.size());
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
  const auto [rows, n] = rows_of(input(op, 0, "x"), trailing_dims(op));
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
}

void cost_batch_norm(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x [N, C, ...]");
  require_rank(x.shape, 2, 64, "input");
  if (op.attributes.get_bool("training", false)) {
    return unmodeled(cost, "training-mode batch norm (batch statistics) is not modeled");
  }
  const std::uint64_t channels = dim(x.shape[1]);
  // parameters: [weight, bias,] running_mean, running_var (frozen weights are still affine)
  const bool affine = op.attributes.get_bool("affine", op.parameters.size() >= 4);
  add_flops(cost, product({2, x.elements()}));
  add_flops(cost, product({channels, affine ? 5u : 4u}));
  add_transcendentals(cost, channels);
}

}  // namespace neuralcost::cost
