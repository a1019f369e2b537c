// Pooling, reductions, running (cumulative) reductions and windowed reductions. A window of k
// elements costs k - 1 comparisons (max/min) or k - 1 adds + 1 divide (average); padded positions
// count as window elements, as the kernels compute over them. Adaptive windows are summed
// exactly, dimension by dimension.
#include <numeric>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

bool is_max(OpKind kind) {
  return kind == OpKind::kMaxPool || kind == OpKind::kAdaptiveMaxPool || kind == OpKind::kGlobalMaxPool;
}

/// Sum over the `out` adaptive windows of their length along one dimension, where window i
/// spans [floor(i*in/out), ceil((i+1)*in/out)). In closed form: in + out - gcd(in, out)
/// (the floors and ceilings differ exactly where out does not divide i*in).
std::uint64_t adaptive_window_sum(std::int64_t in, std::int64_t out) {
  return static_cast<std::uint64_t>(in) + static_cast<std::uint64_t>(out) -
         static_cast<std::uint64_t>(std::gcd(in, out));
}

}  // namespace

void cost_pool(const OpRecord& op, OpCost& cost) {
  const Shape& x = input(op, 0, "x [N, C, ...]").shape;
  const Shape& y = output(op, 0, "y").shape;
  require_rank(x, 3, 5, "input");
  const std::size_t rank = x.size() - 2;
  const std::uint64_t planes = product({dim(x[0]), dim(x[1])});
  std::uint64_t outputs = 0, window_elements = 0;
  if (op.kind == OpKind::kGlobalAvgPool || op.kind == OpKind::kGlobalMaxPool) {
    outputs = planes;
    window_elements = element_count(x, "input");
  } else {
    require_rank(y, x.size(), x.size(), "output");
    if (y[0] != x[0] || y[1] != x[1]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("output {} must keep batch and channels of {}", shape_string(y), shape_string(x)));
    }
    outputs = element_count(y, "output");
    if (op.kind == OpKind::kAdaptiveAvgPool || op.kind == OpKind::kAdaptiveMaxPool) {
      window_elements = planes;
      for (std::size_t d = 0; d < rank; ++d) {
        if (y[d + 2] == 0 || y[d + 2] > x[d + 2]) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("adaptive output size {} must be in 1..{}", y[d + 2], x[d + 2]));
        }
        window_elements = product({window_elements, adaptive_window_sum(x[d + 2], y[d + 2])});
      }
    } else {
      const auto kernel = op.attributes.get_ints("kernel", rank, 0);
      const auto stride = op.attributes.get_ints("stride", rank, 0);
      const auto dilation = op.attributes.get_ints("dilation", rank, 1);
      const auto padding = total_padding(op, rank);
      const bool ceil_mode = op.attributes.get_bool("ceil_mode", false);
      std::uint64_t taps = 1;
      for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t s = stride[d] == 0 ? kernel[d] : stride[d];
        if (kernel[d] < 1) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("attribute 'kernel' must be given and >= 1 (spatial dim {})", d));
        }
        if (s < 1 || dilation[d] < 1) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("spatial dim {}: stride ({}) and dilation ({}) must be >= 1", d, s, dilation[d]));
        }
        bounded(kernel[d], 1, fmt::format("attribute 'kernel' in spatial dim {}", d));
        bounded(s, 1, fmt::format("attribute 'stride' in spatial dim {}", d));
        bounded(dilation[d], 1, fmt::format("attribute 'dilation' in spatial dim {}", d));
        const Wide span = static_cast<Wide>(dilation[d]) * (kernel[d] - 1) + 1;
        const Wide room = static_cast<Wide>(x[d + 2]) + padding[d] - span;
        if (room < 0) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("spatial dim {}: the window does not fit the (padded) input", d));
        }
        const Wide expected = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
        if (static_cast<Wide>(y[d + 2]) != expected && !(ceil_mode && static_cast<Wide>(y[d + 2]) == expected - 1)) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("output spatial dim {} is {}, expected {}", d, y[d + 2],
                                                               static_cast<long long>(expected)));
        }
        taps = product({taps, dim(kernel[d])});
      }
      window_elements = product({outputs, taps});
    }
  }
  // max: k-1 comparisons per window; average: k-1 adds + 1 divide = k per window.
  add_flops(cost, is_max(op.kind) ? window_elements - outputs : window_elements);
}

void cost_reduction(const OpRecord& op, OpCost& cost) {
  // the reduced tensor: input #0, or a weight (a reduction the program computes of a parameter)
  const TensorDesc x = op.inputs.empty() && !op.parameters.empty()
                           ? TensorDesc{op.parameters[0].id, op.parameters[0].shape, op.parameters[0].dtype}
                           : input(op, 0, "x");
  const TensorDesc& y = output(op, 0, "y");
  const std::string function = op.attributes.get_string("function", "sum");
  const std::uint64_t in = x.elements(), out = y.elements();
  if (out == 0) return;
  if (in % out != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output {} is not a reduction of input {}", shape_string(y.shape), shape_string(x.shape)));
  }
  const std::uint64_t r = in / out;
  if (function == "sum" || function == "max" || function == "min" || function == "prod") {
    add_flops(cost, product({out, r - (r > 0 ? 1 : 0)}));
  } else if (function == "mean") {
    add_flops(cost, product({out, r}));
  } else if (function == "l1") {
    add_flops(cost, product({out, product({2, r}) - (r > 0 ? 1 : 0)}));  // abs + add
  } else if (function == "log_sum") {
    add_flops(cost, product({out, r}));  // r - 1 adds + 1 log
    add_transcendentals(cost, out);
  } else if (function == "log_sum_exp") {
    add_flops(cost, product({out, product({2, r})}));  // r exps, r - 1 adds, 1 log
    add_transcendentals(cost, checked_add(product({out, r}), out, "transcendental count"));
  } else if (function == "l2" || function == "sum_square") {
    add_flops(cost, product({out, product({2, r}) - (r > 0 ? 1 : 0)}));  // square + add (+ sqrt for l2)
    if (function == "l2") {
      add_flops(cost, out);
      add_transcendentals(cost, out);
    }
  } else {
    unmodeled(cost, "reduction function '" + function + "' is not modeled");
  }
}

void cost_cumulative(const OpRecord& op, OpCost& cost) {
  // a running sum (or product) of n elements along the axis: n - 1 operations per row
  const TensorDesc& x = input(op, 0, "x");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  std::int64_t axis = op.attributes.get_int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'axis' is outside rank {}", rank));
  }
  const std::uint64_t n = x.elements(), len = dim(x.shape[static_cast<std::size_t>(axis)]);
  if (len > 0) add_flops(cost, n - n / len);
}

void cost_window_reduction(const OpRecord& op, OpCost& cost) {
  // every output element reduces one window: window elements - 1 operations (max, min, sum)
  const TensorDesc& x = input(op, 0, "x");
  const TensorDesc& y = output(op, 0, "y");
  const std::vector<std::int64_t> window = op.attributes.get_ints("window", x.shape.size(), 1);
  std::uint64_t taps = 1;
  for (std::size_t d = 0; d < window.size(); ++d)
    taps = product({taps, dim(bounded(window[d], 1, fmt::format("window dim {}", d)))});
  add_flops(cost, product({y.elements(), taps - 1}));
}

}  // namespace neuralcost::cost
