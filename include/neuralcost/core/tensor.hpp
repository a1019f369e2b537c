// Tensor descriptions: a name (the edge identity in the op graph), a shape and a dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/dtype.hpp"
#include "neuralcost/core/quantization.hpp"

namespace neuralcost {

using Shape = std::vector<std::int64_t>;

/// Product of the dimensions (1 for a scalar). Throws kInvalidArgument on a negative dimension
/// and kOutOfRange on overflow; `what` names the tensor in the message.
std::uint64_t element_count(const Shape& shape, const std::string& what);
/// "32x128x4" (a scalar prints as "scalar").
std::string shape_string(const Shape& shape);
/// Parses "32x3x224x224": positive integers joined by 'x'. Throws kInvalidArgument naming
/// `what` (e.g. "--input-shape '4x-2'") otherwise.
Shape parse_shape(const std::string& text, const std::string& what);

/// An activation tensor flowing between ops. Two descriptions with the same name are the
/// same tensor: the graph checks that their shapes and dtypes agree.
struct TensorDesc {
  std::string name;
  Shape shape;
  DType dtype = DType::kFp32;

  std::uint64_t elements() const;
  std::uint64_t bytes() const;
};

/// A weight or buffer an op reads. `id` is its identity: a weight shared by two ops carries
/// the same id in both and is counted once in the model's parameter totals.
struct ParameterDesc {
  std::string id;
  Shape shape;
  DType dtype = DType::kFp32;
  bool trainable = true;  ///< false for buffers such as batch-norm running statistics
  /// Stored quantized (weight-only): bytes() is the format's storage; `dtype` stays the dtype the
  /// weight is dequantized to and computes in.
  std::optional<WeightQuantization> quantization = std::nullopt;

  std::uint64_t elements() const;
  std::uint64_t bytes() const;
};

}  // namespace neuralcost
