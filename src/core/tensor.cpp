// Shape arithmetic with checked counts.
#include "neuralcost/core/tensor.hpp"

#include <fmt/format.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {

std::uint64_t element_count(const Shape& shape, const std::string& what) {
  std::uint64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: dimension {} is negative ({})", what, i, shape[i]));
    }
    n = checked_mul(n, static_cast<std::uint64_t>(shape[i]), what + " element count");
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  if (shape.empty()) return "scalar";
  return fmt::format("{}", fmt::join(shape, "x"));
}

std::uint64_t TensorDesc::bytes() const {
  return checked_mul(elements(), dtype_bytes(dtype), "tensor '" + name + "' byte size");
}

std::uint64_t ParameterDesc::bytes() const {
  return checked_mul(elements(), dtype_bytes(dtype), "parameter '" + id + "' byte size");
}

}  // namespace neuralcost
