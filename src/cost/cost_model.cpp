// Entry point of the cost model: default compulsory bytes, then the kind's cost rule from the
// op-kind table (op_kinds.cpp), an op's rows_load applied once, and the op name added to every
// error raised while costing.
#include "neuralcost/cost/cost_model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace cost {

std::uint64_t product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t r = 1;
  for (std::uint64_t f : factors) r = checked_mul(r, f, "FLOP count");
  return r;
}

std::uint64_t dim(std::int64_t d) {
  if (d < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("negative dimension {}", d));
  return static_cast<std::uint64_t>(d);
}

void add_flops(OpCost& cost, std::uint64_t flops) { cost.flops = checked_add(cost.flops, flops, "FLOP count"); }

void add_contraction(OpCost& cost, std::uint64_t flops) {
  add_flops(cost, flops);
  cost.contraction_flops = checked_add(cost.contraction_flops, flops, "FLOP count");
}

void add_transcendentals(OpCost& cost, std::uint64_t count) {
  cost.transcendentals = checked_add(cost.transcendentals, count, "transcendental count");
}

const TensorDesc& input(const OpRecord& op, std::size_t i, const char* role) {
  if (i >= op.inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("needs input #{} ({})", i, role));
  }
  return op.inputs[i];
}

const TensorDesc& output(const OpRecord& op, std::size_t i, const char* role) {
  if (i >= op.outputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("needs output #{} ({})", i, role));
  }
  return op.outputs[i];
}

const ParameterDesc& parameter(const OpRecord& op, std::size_t i, const char* role) {
  if (i >= op.parameters.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("needs parameter #{} ({})", i, role));
  }
  return op.parameters[i];
}

Shape operand_shape(const OpRecord& op, std::size_t i) {
  if (i < op.inputs.size()) return op.inputs[i].shape;
  const std::size_t p = i - op.inputs.size();
  if (p < op.parameters.size()) return op.parameters[p].shape;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("needs operand #{}", i));
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape r(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("batch dimensions {} and {} do not broadcast", shape_string(a), shape_string(b)));
    }
    r[i] = da == 1 ? db : da;
  }
  return r;
}

void require_rank(const Shape& shape, std::size_t min_rank, std::size_t max_rank, const std::string& what) {
  if (shape.size() < min_rank || shape.size() > max_rank) {
    const std::string expected =
        min_rank == max_rank ? fmt::format("{}", min_rank) : fmt::format("{} to {}", min_rank, max_rank);
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} must have rank {}, got {} ({})", what, expected, shape.size(), shape_string(shape)));
  }
}

std::int64_t bounded(std::int64_t value, std::int64_t low, const std::string& what) {
  constexpr std::int64_t kHigh = std::int64_t{1} << 40;
  if (value < low || value > kHigh) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is {}, outside {} to 2^40", what, value, low));
  }
  return value;
}

std::vector<std::int64_t> total_padding(const OpRecord& op, std::size_t rank) {
  std::vector<std::int64_t> total;
  const auto it = op.attributes.all().find("padding");
  const auto* list = it == op.attributes.all().end() ? nullptr : std::get_if<std::vector<std::int64_t>>(&it->second);
  const auto side = [](std::int64_t p, std::size_t d) {
    return bounded(p, 0, fmt::format("attribute 'padding' in spatial dim {}", d));
  };
  if (list != nullptr && list->size() == 2 * rank) {
    for (std::size_t d = 0; d < rank; ++d) total.push_back(side((*list)[d], d) + side((*list)[d + rank], d));
  } else {
    const auto each = op.attributes.get_ints("padding", rank, 0);
    for (std::size_t d = 0; d < rank; ++d) total.push_back(2 * side(each[d], d));
  }
  return total;
}

void unmodeled(OpCost& cost, std::string reason) {
  cost.modeled = false;
  cost.unmodeled_reason = std::move(reason);
  cost.flops = cost.contraction_flops = cost.transcendentals = 0;
}

void cost_unknown(const OpRecord& op, OpCost& cost) {
  // an importer may say why (shapes not inferred, an unsupported attribute)
  unmodeled(cost, op.attributes.has("reason") ? op.attributes.get_string("reason", "")
                                              : fmt::format("op type '{}' is not modeled",
                                                            op.source_type.empty() ? "unknown" : op.source_type));
}

namespace {

/// True when `name` already occurs among the first `count` entries of `list` (ops have a
/// handful of operands, so a scan beats building a set).
template <typename List, typename Key>
bool seen_before(const List& list, std::size_t count, Key key, const std::string& name) {
  for (std::size_t i = 0; i < count; ++i) {
    if (list[i].*key == name) return true;
  }
  return false;
}

void default_bytes(const OpRecord& op, OpCost& cost) {
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    if (!seen_before(op.inputs, i, &TensorDesc::name, op.inputs[i].name)) {
      cost.bytes_read = checked_add(cost.bytes_read, op.inputs[i].bytes(), "bytes read");
    }
  }
  for (std::size_t i = 0; i < op.parameters.size(); ++i) {
    if (!seen_before(op.parameters, i, &ParameterDesc::id, op.parameters[i].id)) {
      cost.parameter_bytes = checked_add(cost.parameter_bytes, op.parameters[i].bytes(), "parameter bytes");
    }
  }
  cost.bytes_read = checked_add(cost.bytes_read, cost.parameter_bytes, "bytes read");
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    if (!seen_before(op.outputs, i, &TensorDesc::name, op.outputs[i].name)) {
      cost.bytes_written = checked_add(cost.bytes_written, op.outputs[i].bytes(), "bytes written");
    }
  }
}

}  // namespace
}  // namespace cost

double OpCost::arithmetic_intensity() const {
  const std::uint64_t b = bytes();
  return b == 0 ? 0.0 : static_cast<double>(flops) / static_cast<double>(b);
}

namespace {

/// Attr rows_load of `op`, or of the forward op it differentiates: the op runs on that many times
/// the rows its shapes hold, an expectation (the busiest expert-parallel device's share of the
/// rows routed to it under a measured routing, decoder.cpp). 1 when absent.
double rows_load(const OpRecord& op) {
  const OpRecord* holder = op.attributes.has("rows_load") ? &op
                           : op.differentiates && op.differentiates->attributes.has("rows_load")
                               ? op.differentiates.get()
                               : nullptr;
  if (holder == nullptr) return 1;
  const double load = holder->attributes.get_double("rows_load", 1);
  if (!std::isfinite(load) || load <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'rows_load' {} must be a positive number", load));
  }
  if (holder->kind == OpKind::kExpertLinear || holder->kind == OpKind::kLoop) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute 'rows_load' does not apply to a {} (an expert linear takes its rows from "
                            "routing_counts, a loop from its body)",
                            op_kind_name(holder->kind)));
  }
  return load;
}

OpCost cost_without_load(const OpRecord& op) {
  if (op.kind != OpKind::kLinear && op.kind != OpKind::kExpertLinear) {
    for (const ParameterDesc& p : op.parameters) {
      if (p.quantization) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("parameter '{}' is quantized ({}): only linear weights are modeled quantized", p.id,
                                p.quantization->name));
      }
    }
  }
  OpCost c;
  cost::default_bytes(op, c);
  traits_of(op.kind).cost(op, c);
  return c;
}

/// `op`'s cost at `load` times its rows: its work and the activations it reads and writes scale,
/// its parameters are read once (rounded: the rows are an expectation).
OpCost cost_with_load(const OpRecord& op, double load) {
  OpRecord plain = op;  // the rule costs the shapes' rows, then scales them once
  plain.attributes.set("rows_load", 1.0);
  if (op.differentiates && op.differentiates->attributes.has("rows_load")) {
    auto forward = std::make_shared<OpRecord>(*op.differentiates);
    forward->attributes.set("rows_load", 1.0);
    plain.differentiates = std::move(forward);
  }
  OpCost c = cost_without_load(plain);
  const auto scaled = [load](std::uint64_t n) {
    const double x = static_cast<double>(n) * load;
    if (x >= 9.2e18) throw Error(ErrorCode::kOutOfRange, "counts scaled by attribute 'rows_load' exceed 64 bits");
    return static_cast<std::uint64_t>(std::llround(x));
  };
  c.flops = scaled(c.flops);
  c.contraction_flops = scaled(c.contraction_flops);
  c.transcendentals = scaled(c.transcendentals);
  c.bytes_read = scaled(c.bytes_read - c.parameter_bytes) + c.parameter_bytes;
  c.bytes_written = scaled(c.bytes_written);
  return c;
}

}  // namespace

OpCost cost_of(const OpRecord& op) {
  try {
    const double load = rows_load(op);
    if (load != 1) return cost_with_load(op, load);
    return cost_without_load(op);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("op '{}' ({}): {}", op.name, op_kind_name(op.kind), e.what()));
  }
}

}  // namespace neuralcost
