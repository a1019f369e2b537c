// The cost model: exact FLOPs and compulsory bytes of one op record, following the counting
// convention in docs/counting.md (a multiply-accumulate is 2 FLOPs; each input and parameter
// is read once and each output written once).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/core/op.hpp"
#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost {

struct OpCost {
  bool modeled = true;                  ///< false: FLOPs unknown, see unmodeled_reason
  std::string unmodeled_reason;         ///< why the op could not be costed
  std::uint64_t flops = 0;              ///< all floating-point (or integer) operations
  std::uint64_t contraction_flops = 0;  ///< the matmul/convolution part of flops
  std::uint64_t transcendentals = 0;    ///< exp/log/tanh/erf/rsqrt/... evaluations (1 FLOP each)
  std::uint64_t bytes_read = 0;         ///< activation inputs + parameter_bytes
  std::uint64_t bytes_written = 0;      ///< outputs
  std::uint64_t parameter_bytes = 0;    ///< parameter traffic of this op (gathered rows for embedding)

  std::uint64_t bytes() const { return bytes_read + bytes_written; }
  /// FLOPs per byte moved; 0 when no bytes move.
  double arithmetic_intensity() const;
};

/// Costs one op. Malformed records (wrong rank, inconsistent shapes, missing attributes) throw
/// Error(kInvalidArgument) naming the op and field; counts that overflow 64 bits throw
/// Error(kOutOfRange). Ops the model does not know come back with modeled = false and their
/// bytes still counted.
OpCost cost_of(const OpRecord& op);

/// For importers building a kEinsum record: the equation with its operand terms in the record's
/// operand order, inputs then parameters (`is_parameter[i]`: operand i became a parameter).
/// Throws kInvalidArgument when the equation has another number of terms.
std::string einsum_inputs_first(const std::string& equation, const std::vector<bool>& is_parameter);
/// The output shape of an einsum over operands of these shapes (numpy's rules: "..." broadcast,
/// implicit output when there is no "->"). Throws kInvalidArgument naming what does not fit.
Shape einsum_output_shape(const std::string& equation, const std::vector<Shape>& operands);

}  // namespace neuralcost
