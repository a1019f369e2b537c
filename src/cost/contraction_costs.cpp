// Contractions: matmul, linear, convolution and transposed convolution. A multiply-accumulate
// is 2 FLOPs; a bias adds 1 FLOP per output element (docs/counting.md).
#include <cmath>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

struct ConvGeometry {
  std::size_t spatial_rank;
  std::vector<std::int64_t> stride, dilation, pad_total, kernel;
};

ConvGeometry conv_geometry(const OpRecord& op, const Shape& x, const Shape& w) {
  require_rank(x, 3, 5, "input");
  if (w.size() != x.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("weight rank {} does not match input rank {}", w.size(), x.size()));
  }
  ConvGeometry g;
  g.spatial_rank = x.size() - 2;
  g.stride = op.attributes.get_ints("stride", g.spatial_rank, 1);
  g.dilation = op.attributes.get_ints("dilation", g.spatial_rank, 1);
  g.kernel.assign(w.begin() + 2, w.end());
  g.pad_total = total_padding(op, g.spatial_rank);
  for (std::size_t d = 0; d < g.spatial_rank; ++d) {
    if (g.stride[d] < 1 || g.dilation[d] < 1) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("spatial dim {}: stride ({}) and dilation ({}) must be >= 1",
                                                           d, g.stride[d], g.dilation[d]));
    }
    bounded(g.stride[d], 1, fmt::format("attribute 'stride' in spatial dim {}", d));
    bounded(g.dilation[d], 1, fmt::format("attribute 'dilation' in spatial dim {}", d));
    bounded(g.kernel[d], 1, fmt::format("the weight's kernel size in spatial dim {}", d));
  }
  return g;
}

std::int64_t groups_of(const OpRecord& op) {
  return bounded(op.attributes.get_int("groups", 1), 1, "attribute 'groups'");
}

void check_spatial(const Shape& y, std::size_t d, Wide expected, const char* formula) {
  if (expected < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("spatial dim {}: the kernel does not fit the (padded) input ({})", d, formula));
  }
  if (static_cast<Wide>(y[d + 2]) != expected) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("output spatial dim {} is {}, expected {} ({})", d, y[d + 2],
                                                         static_cast<long long>(expected), formula));
  }
}

void add_bias(const OpRecord& op, OpCost& cost, std::size_t bias_index, std::uint64_t outputs) {
  if (op.parameters.size() > bias_index) add_flops(cost, outputs);
}

/// A convolution's filter: its first parameter, or input #1 when it has none (a filter the
/// program computes); its bias follows the filter (parameter #1, or input #2).
struct Filter {
  const Shape& shape;
  bool bias;
};

Filter filter_of(const OpRecord& op, const char* role) {
  if (op.parameters.empty() && op.inputs.size() > 1) return {input(op, 1, role).shape, op.inputs.size() > 2};
  return {parameter(op, 0, role).shape, op.parameters.size() > 1};
}

}  // namespace

void cost_matmul(const OpRecord& op, OpCost& cost) {
  Shape a = operand_shape(op, 0);
  Shape b = operand_shape(op, 1);
  if (a.empty() || b.empty()) throw Error(ErrorCode::kInvalidArgument, "operands must not be scalars");
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  if (op.attributes.get_bool("transpose_a", false)) std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (op.attributes.get_bool("transpose_b", false)) std::swap(b[b.size() - 1], b[b.size() - 2]);
  const std::int64_t m = a[a.size() - 2], k = a.back(), kb = b[b.size() - 2], n = b.back();
  if (k != kb) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("inner dimensions differ: {} x {}", shape_string(operand_shape(op, 0)),
                            shape_string(operand_shape(op, 1))));
  }
  const Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  const std::uint64_t batches = element_count(batch, "batch");
  const std::uint64_t expected = product({batches, dim(m), dim(n)});
  const TensorDesc& y = output(op, 0, "product");
  if (y.elements() != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output '{}' has {} elements, expected {} from {} x {}", y.name, y.elements(), expected,
                            shape_string(operand_shape(op, 0)), shape_string(operand_shape(op, 1))));
  }
  add_contraction(cost, product({2, batches, dim(m), dim(n), dim(k)}));
  // a third operand is added to the product (addmm's bias, ONNX Gemm's C): 1 FLOP per output
  if (op.inputs.size() + op.parameters.size() > 2) add_flops(cost, expected);
}

/// A quantized weight's extra work on a call of `rows` rows: weight-only, each stored value
/// dequantized once (times `share`: the experts reached); W8A8 (attr activation_dtype: the operands
/// multiplied in their 8-bit type), each of the rows × out sums scaled by its token's and its
/// weight's scale, once per block of inputs when the weight's scales are per block.
void add_weight_scaling(const OpRecord& op, const ParameterDesc& w, std::uint64_t rows, std::int64_t in,
                        std::int64_t out, double share, OpCost& cost) {
  if (!w.quantization) return;
  if (op.attributes.has("activation_dtype")) {
    const std::int64_t group = w.quantization->group_size;
    const std::uint64_t blocks = group > 0 ? dim((in + group - 1) / group) : 1;
    return add_flops(cost, product({2, rows, dim(out), blocks}));
  }
  const auto flops = static_cast<double>(w.quantization->dequantization_flops(w.shape));
  add_flops(cost, static_cast<std::uint64_t>(std::llround(flops * share)));
}

void cost_linear(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x");
  const ParameterDesc& w = parameter(op, 0, "weight [out, in]");
  require_rank(x.shape, 1, 64, "input");
  require_rank(w.shape, 2, 2, "weight");
  const std::int64_t in = x.shape.back(), out = w.shape[0];
  if (w.shape[1] != in) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("weight {} does not take inputs of width {}", shape_string(w.shape), in));
  }
  const TensorDesc& y = output(op, 0, "y");
  if (y.shape.empty() || y.shape.back() != out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output '{}' {} must end in {}", y.name, shape_string(y.shape), out));
  }
  const std::uint64_t rows = in == 0 ? 0 : x.elements() / dim(in);
  if (y.elements() != product({rows, dim(out)})) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("output '{}' {} does not hold the {} rows of input {}", y.name,
                                                         shape_string(y.shape), rows, shape_string(x.shape)));
  }
  add_contraction(cost, product({2, rows, dim(in), dim(out)}));
  add_bias(op, cost, 1, product({rows, dim(out)}));
  // a quantized weight is dequantized once per call, value by value, as weight-only kernels do
  add_weight_scaling(op, w, rows, in, out, 1.0, cost);
}

/// An expert_linear whose routing was measured (attr expert_rows: the rows each expert took, as
/// torch's _grouped_mm offsets give them): every input row through its expert, the weights of
/// the experts that took rows read.
void cost_routed_expert_linear(const OpRecord& op, OpCost& cost, std::int64_t in, std::int64_t out) {
  const TensorDesc& x = input(op, 0, "x");
  const ParameterDesc& w = parameter(op, 0, "weight");
  const std::vector<std::int64_t> rows = op.attributes.get_list("expert_rows");
  const std::int64_t experts = w.shape[0];
  if (static_cast<std::int64_t>(rows.size()) != experts) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'expert_rows' has {} entries for {} experts", rows.size(), experts));
  }
  std::uint64_t routed = 0;
  std::int64_t reached = 0;
  for (const std::int64_t r : rows) {
    if (r < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'expert_rows' has {} rows", r));
    routed = checked_add(routed, static_cast<std::uint64_t>(r), "expert rows");
    reached += r > 0 ? 1 : 0;
  }
  const std::uint64_t in_rows = x.elements() / dim(in);
  const TensorDesc& y = output(op, 0, "y");
  if (y.shape.empty() || y.shape.back() != out || y.elements() / dim(out) != in_rows || routed > in_rows) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output '{}' {} must hold one row of {} per input row of {}, and the {} routed rows fit "
                            "in them",
                            y.name, shape_string(y.shape), out, shape_string(x.shape), routed));
  }
  add_contraction(cost, product({2, routed, dim(in), dim(out)}));
  std::uint64_t all = 0;
  for (const ParameterDesc& p : op.parameters) all = checked_add(all, p.bytes(), "parameter bytes");
  cost.parameter_bytes = all / static_cast<std::uint64_t>(experts) * static_cast<std::uint64_t>(reached);
  cost.bytes_read = checked_add(x.bytes(), cost.parameter_bytes, "bytes read");
  if (op.parameters.size() > 1) add_flops(cost, routed * dim(out));  // a bias [E, out] per row
}

namespace {

/// Distinct experts of `experts` that N = `tokens` tokens reach under a measured routing: Σ_e 1 −
/// (1 − count_e / routing_tokens)^N (attrs routing_counts, one per expert, and routing_tokens; the
/// counts of one token's top_k distinct experts add up to at most top_k · routing_tokens).
double experts_reached(const OpRecord& op, std::int64_t experts, std::int64_t top_k, std::int64_t tokens) {
  const std::vector<std::int64_t> counts = op.attributes.get_list("routing_counts");
  const std::int64_t seen = op.attributes.get_int("routing_tokens");
  if (counts.size() != static_cast<std::size_t>(experts) || seen < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'routing_counts' must hold one count per expert ({}, got {}) of a positive "
                            "'routing_tokens' (got {})",
                            experts, counts.size(), seen));
  }
  double reached = 0;
  std::uint64_t sum = 0;
  for (const std::int64_t n : counts) {
    if (n < 0 || n > seen) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("attribute 'routing_counts' holds {}: each expert takes 0 to the {} tokens", n, seen));
    }
    sum += static_cast<std::uint64_t>(n);
    reached += 1 - std::pow(1 - static_cast<double>(n) / static_cast<double>(seen), static_cast<double>(tokens));
  }
  if (sum > product({dim(top_k), dim(seen)})) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'routing_counts' adds up to {}, more than top_k ({}) x routing_tokens ({})", sum,
                            top_k, seen));
  }
  return reached;
}

}  // namespace

void cost_expert_linear(const OpRecord& op, OpCost& cost) {
  const TensorDesc& x = input(op, 0, "x");
  const ParameterDesc& w = parameter(op, 0, "weight [experts, out, in]");
  require_rank(w.shape, 3, 3, "weight");
  // weight_layout "in_out": W [E, in, out], as torch's _grouped_mm takes it (a transposed view)
  const bool in_out = op.attributes.get_string("weight_layout", "out_in") == "in_out";
  const std::int64_t experts = w.shape[0], out = w.shape[in_out ? 2 : 1], in = w.shape[in_out ? 1 : 2];
  if (x.shape.empty() || x.shape.back() != in) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("weight {} does not take inputs {}", shape_string(w.shape), shape_string(x.shape)));
  }
  if (op.attributes.has("expert_rows")) return cost_routed_expert_linear(op, cost, in, out);
  const std::int64_t top_k = op.attributes.get_int("top_k");
  // expert parallelism: the router picks among routed_experts, of which this op holds `experts`
  const std::int64_t routed = op.attributes.get_int("routed_experts", experts);
  if (routed < experts) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'routed_experts' {} must be at least the {} experts held", routed, experts));
  }
  if (top_k < 1 || top_k > routed) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'top_k' {} must be from 1 to the {} experts", top_k, routed));
  }
  const TensorDesc& y = output(op, 0, "y");
  if (y.shape.empty() || y.shape.back() != out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output '{}' {} must end in {}", y.name, shape_string(y.shape), out));
  }
  // every output row is one (token, expert) pair: its input row through that expert's weight
  const std::uint64_t in_rows = x.elements() / dim(in), out_rows = y.elements() / dim(out);
  if (out_rows != in_rows && out_rows != product({in_rows, dim(top_k)})) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output '{}' {} must hold one row per input row or top_k ({}) per input row of {}", y.name,
                            shape_string(y.shape), top_k, shape_string(x.shape)));
  }
  // Expert parallelism under a measured routing (routed_experts > the experts held, with
  // routing_counts for the held ones): the device takes the rows its experts are routed, N·Σ n_e/T
  // of the N = tokens tokens of all devices, not the average device's out_rows; its input is
  // read and its output written as many times over (load = rows / out_rows).
  const std::int64_t tokens = op.attributes.get_int("tokens");
  if (tokens < 1)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'tokens' {} must be positive", tokens));
  double load = 1;
  if (routed > experts && op.attributes.has("routing_counts")) {
    experts_reached(op, experts, top_k, tokens);  // checks the counts first
    double share = 0;
    for (const std::int64_t n : op.attributes.get_list("routing_counts")) share += static_cast<double>(n);
    share /= static_cast<double>(op.attributes.get_int("routing_tokens"));
    load = out_rows > 0 ? static_cast<double>(tokens) * share / static_cast<double>(out_rows) : 1.0;
  }
  // an expectation: the rows and what scales with them are not whole numbers, their totals are rounded
  const auto scaled = [&](std::uint64_t n) {
    return load == 1 ? n : static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * load));
  };
  const std::uint64_t rows = scaled(out_rows);
  add_contraction(cost, scaled(product({2, out_rows, dim(in), dim(out)})));
  // the weights of the experts the step's tokens reach: with N tokens each routed to top_k of E
  // experts uniformly, E·(1 − (1 − k/E)^N) distinct experts are expected (attr tokens: N); of
  // routed_experts R, the `experts` held here are each reached with probability 1 − (1 − k/R)^N.
  // A measured routing (attrs routing_counts, one per expert held, of routing_tokens tokens):
  // expert e is reached with probability 1 − (1 − count_e / routing_tokens)^N.
  const double e = static_cast<double>(experts);
  const double reached = op.attributes.has("routing_counts")
                             ? experts_reached(op, experts, top_k, tokens)
                             : e * (1 - std::pow(1 - static_cast<double>(top_k) / static_cast<double>(routed),
                                                 static_cast<double>(tokens)));
  std::uint64_t all = 0;
  for (const ParameterDesc& p : op.parameters) all = checked_add(all, p.bytes(), "parameter bytes");
  cost.parameter_bytes = static_cast<std::uint64_t>(std::llround(static_cast<double>(all) * reached / e));
  cost.bytes_read = checked_add(scaled(x.bytes()), cost.parameter_bytes, "bytes read");
  cost.bytes_written = scaled(cost.bytes_written);
  if (op.parameters.size() > 1) add_flops(cost, scaled(out_rows * dim(out)));  // a bias [E, out] per pair
  add_weight_scaling(op, w, rows, in, out, reached / e, cost);  // the experts reached, dequantized once each
}

void cost_conv(const OpRecord& op, OpCost& cost) {
  const Shape& x = input(op, 0, "x").shape;
  const Filter filter = filter_of(op, "weight");
  const Shape& w = filter.shape;
  const ConvGeometry g = conv_geometry(op, x, w);
  const std::int64_t groups = groups_of(op);
  if (static_cast<Wide>(w[1]) * groups != x[1] || w[0] % groups != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("weight {} with {} groups does not fit {} input channels", shape_string(w), groups, x[1]));
  }
  const Shape& y = output(op, 0, "y").shape;
  require_rank(y, x.size(), x.size(), "output");
  if (y[0] != x[0] || y[1] != w[0]) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("output {} must be {}x{}x...", shape_string(y), x[0], w[0]));
  }
  std::uint64_t out_positions = 1, taps = 1;
  for (std::size_t d = 0; d < g.spatial_rank; ++d) {
    const Wide span = static_cast<Wide>(g.dilation[d]) * (g.kernel[d] - 1) + 1;
    const Wide room = static_cast<Wide>(x[d + 2]) + g.pad_total[d] - span;
    check_spatial(y, d, room < 0 ? 0 : room / g.stride[d] + 1,
                  "floor((in + padding - dilation*(kernel-1) - 1) / stride) + 1");
    out_positions = product({out_positions, dim(y[d + 2])});
    taps = product({taps, dim(g.kernel[d])});
  }
  add_contraction(cost, product({2, dim(x[0]), dim(w[0]), out_positions, dim(w[1]), taps}));
  if (filter.bias) add_flops(cost, product({dim(x[0]), dim(w[0]), out_positions}));
}

void cost_conv_transpose(const OpRecord& op, OpCost& cost) {
  const Shape& x = input(op, 0, "x").shape;
  const Filter filter = filter_of(op, "weight [in, out/groups, k...]");
  const Shape& w = filter.shape;
  const ConvGeometry g = conv_geometry(op, x, w);
  const std::int64_t groups = groups_of(op);
  if (w[0] != x[1] || x[1] % groups != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("weight {} with {} groups does not fit {} input channels", shape_string(w), groups, x[1]));
  }
  const auto output_padding = op.attributes.get_ints("output_padding", g.spatial_rank, 0);
  for (std::size_t d = 0; d < g.spatial_rank; ++d) {
    bounded(output_padding[d], 0, fmt::format("attribute 'output_padding' in spatial dim {}", d));
  }
  const Shape& y = output(op, 0, "y").shape;
  require_rank(y, x.size(), x.size(), "output");
  if (y[0] != x[0] || static_cast<Wide>(y[1]) != static_cast<Wide>(w[1]) * groups) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output {} must have {} x {} channels", shape_string(y), w[1], groups));
  }
  std::uint64_t in_positions = 1, out_positions = 1, taps = 1;
  for (std::size_t d = 0; d < g.spatial_rank; ++d) {
    check_spatial(y, d,
                  static_cast<Wide>(x[d + 2] - 1) * g.stride[d] - g.pad_total[d] +
                      static_cast<Wide>(g.dilation[d]) * (g.kernel[d] - 1) + output_padding[d] + 1,
                  "(in-1)*stride - padding + dilation*(kernel-1) + output_padding + 1");
    in_positions = product({in_positions, dim(x[d + 2])});
    out_positions = product({out_positions, dim(y[d + 2])});
    taps = product({taps, dim(g.kernel[d])});
  }
  // Every input element is multiplied into (out_channels/groups) x kernel taps.
  add_contraction(cost, product({2, dim(x[0]), dim(x[1]), in_positions, dim(w[1]), taps}));
  if (filter.bias) add_flops(cost, product({dim(y[0]), dim(y[1]), out_positions}));
}

}  // namespace neuralcost::cost
