// Ops that move data but compute nothing, the embedding gather, and custom ops.
// Views (reshape, or any of these with materializes = false) move no bytes; copies read what
// they copy and write their outputs. A slice reads only the region it keeps.
#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {

void cost_data_movement(const OpRecord& op, OpCost& cost) {
  const bool copies = op.attributes.get_bool("materializes", op.kind != OpKind::kReshape);
  if (!copies) {
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

void cost_custom(const OpRecord& op, OpCost& cost) {
  const std::int64_t flops = op.attributes.get_int("flops");
  const std::int64_t transcendentals = op.attributes.get_int("transcendentals", 0);
  if (flops < 0 || transcendentals < 0 || transcendentals > flops) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attributes 'flops' ({}) and 'transcendentals' ({}) must satisfy "
                            "0 <= transcendentals <= flops", flops, transcendentals));
  }
  // an importer that computed a contraction (e.g. ONNX Einsum) says so, for all of its FLOPs
  // ("contraction") or some ("contraction_flops", e.g. a loop body)
  const std::int64_t contraction = op.attributes.get_bool("contraction", false)
                                       ? flops
                                       : op.attributes.get_int("contraction_flops", 0);
  if (contraction < 0 || contraction > flops) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'contraction_flops' ({}) must be between 0 and 'flops' ({})", contraction, flops));
  }
  add_contraction(cost, static_cast<std::uint64_t>(contraction));
  add_flops(cost, static_cast<std::uint64_t>(flops - contraction));
  add_transcendentals(cost, static_cast<std::uint64_t>(transcendentals));
  // an op that stands for many (a loop body run n times) gives its own traffic
  for (const char* key : {"bytes_read", "bytes_written"}) {
    if (!op.attributes.has(key)) continue;
    const std::int64_t bytes = op.attributes.get_int(key);
    if (bytes < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute '{}' is negative ({})", key, bytes));
    (std::string(key) == "bytes_read" ? cost.bytes_read : cost.bytes_written) = static_cast<std::uint64_t>(bytes);
  }
}

}  // namespace neuralcost::cost
