// Ops that move data but compute nothing (copies, views, fills, gathers, scatters), the
// embedding gather, and custom ops.
// Views (reshape, or any of these with materializes = false) move no bytes; copies read what
// they copy and write their outputs. A slice reads only the region it keeps.
#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {

void cost_data_movement(const OpRecord& op, OpCost& cost) {
  if (is_view(op)) {
    cost.bytes_read = cost.bytes_written = cost.parameter_bytes = 0;
    return;
  }
  if (op.kind == OpKind::kSlice) {
    cost.bytes_read = cost.bytes_written;  // only the kept region is read
  }
}

void cost_embedding(const OpRecord& op, OpCost& cost) {
  const TensorDesc& y = output(op, 0, "y");
  if (op.parameters.empty()) {
    // gather from an activation: reads the gathered rows (at most the whole data tensor)
    const TensorDesc& data = input(op, 0, "data");
    const TensorDesc& indices = input(op, 1, "indices");
    cost.bytes_read = checked_add(std::min(y.bytes(), data.bytes()), indices.bytes(), "bytes read");
    return;
  }
  const TensorDesc& indices = input(op, 0, "indices");
  const ParameterDesc& table = parameter(op, 0, "table [rows, width]");
  require_rank(table.shape, 2, 2, "table");
  const std::uint64_t lookups = indices.elements();
  const std::uint64_t rows = std::min<std::uint64_t>(lookups, dim(table.shape[0]));
  // min(lookups, rows) rows: the most distinct rows the lookups can touch. Repeated indices
  // touch fewer, which no static count can know (docs/counting.md names this).
  cost.parameter_bytes = product({rows, dim(table.shape[1]), dtype_bytes(table.dtype)});
  cost.bytes_read = checked_add(indices.bytes(), cost.parameter_bytes, "bytes read");
}

void cost_fill(const OpRecord& op, OpCost& cost) {
  // a constant, or a range start + i·delta (a multiply-add per element); its inputs are sizes
  // or scalars, not tensor data
  cost.bytes_read = cost.parameter_bytes = 0;
  const std::string function = op.attributes.get_string("function", "constant");
  if (function == "range") {
    add_flops(cost, product({2, output(op, 0, "y").elements()}));
  } else if (function != "constant") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'function' must be constant or range, got '{}'", function));
  }
}

void cost_gather(const OpRecord&, OpCost&) {
  // reads its inputs (data and indices) and writes its output; no arithmetic. A lookup that
  // touches part of a weight table is kEmbedding, which counts only the rows it reads.
}

void cost_scatter(const OpRecord& op, OpCost& cost) {
  // scatter(data, indices..., updates): a copy of data with the updates written in; in place,
  // only the updates are read and written (and the indices read)
  if (op.inputs.size() < 2) throw Error(ErrorCode::kInvalidArgument, "needs data and updates inputs");
  const TensorDesc& updates = op.inputs.back();
  const std::string reduction = op.attributes.get_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'reduction' must be none, add, mul, max or min, got '{}'", reduction));
  }
  if (reduction != "none") add_flops(cost, updates.elements());  // one operation per update
  if (op.attributes.get_bool("in_place", false)) {
    std::uint64_t read = updates.bytes();
    for (std::size_t i = 1; i + 1 < op.inputs.size(); ++i) read = checked_add(read, op.inputs[i].bytes(), "bytes read");
    cost.bytes_read = checked_add(read, cost.parameter_bytes, "bytes read");
    cost.bytes_written = updates.bytes();
  }
}

void cost_resize(const OpRecord& op, OpCost& cost) {
  // separable interpolation: along the k-th dim whose size changes, every output element needs
  // 2^k (linear) or 4^k (cubic) 1-D interpolations of 3 FLOPs (a + t(b - a)) or 7 (4 multiplies,
  // 3 adds); the interpolation weights, computed once per output coordinate, are not counted
  const Shape& x = input(op, 0, "x").shape;
  const TensorDesc& y = output(op, 0, "y");
  require_rank(y.shape, x.size(), x.size(), "output");
  const std::string mode = op.attributes.get_string("mode", "linear");
  if (mode != "linear" && mode != "cubic") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'mode' must be linear or cubic, got '{}'", mode));
  }
  const std::uint64_t taps = mode == "linear" ? 2 : 4, per_tap = mode == "linear" ? 3 : 7;
  std::uint64_t per_element = 0, interpolations = 1;
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (x[d] == y.shape[d]) continue;
    per_element = checked_add(per_element, product({interpolations, per_tap}), "FLOP count");
    interpolations = product({interpolations, taps});
  }
  add_flops(cost, product({y.elements(), per_element}));
}

void cost_custom(const OpRecord& op, OpCost& cost) {
  const std::int64_t flops = op.attributes.get_int("flops");
  const std::int64_t transcendentals = op.attributes.get_int("transcendentals", 0);
  if (flops < 0 || transcendentals < 0 || transcendentals > flops) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attributes 'flops' ({}) and 'transcendentals' ({}) must satisfy "
                            "0 <= transcendentals <= flops",
                            flops, transcendentals));
  }
  // an importer that computed a contraction (a convolution with a computed filter) says so
  const std::uint64_t contraction =
      op.attributes.get_bool("contraction", false) ? static_cast<std::uint64_t>(flops) : 0;
  add_contraction(cost, contraction);
  add_flops(cost, static_cast<std::uint64_t>(flops) - contraction);
  add_transcendentals(cost, static_cast<std::uint64_t>(transcendentals));
}

}  // namespace neuralcost::cost
