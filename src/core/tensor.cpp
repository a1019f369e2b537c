// Shape arithmetic with checked counts.
#include "neuralcost/core/tensor.hpp"

#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

/// Element count, or empty on a negative dimension or overflow. The hot path: no strings.
std::optional<std::uint64_t> try_count(const Shape& shape, std::uint64_t element_bytes) {
  std::uint64_t n = element_bytes;
  for (std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

}  // namespace

std::uint64_t element_count(const Shape& shape, const std::string& what) {
  std::uint64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: dimension {} is negative ({})", what, i, shape[i]));
    }
    n = checked_mul(n, static_cast<std::uint64_t>(shape[i]), what + " element count");
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  if (shape.empty()) return "scalar";
  return fmt::format("{}", fmt::join(shape, "x"));
}

Shape parse_shape(const std::string& text, const std::string& what) {
  Shape shape;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    std::size_t used = 0;
    long long d = -1;
    try {
      d = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || d < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: dimensions must be positive integers joined by 'x' (e.g. 32x3x32x32)", what));
    }
    shape.push_back(d);
    start = end + 1;
  }
  return shape;
}

std::uint64_t TensorDesc::elements() const {
  if (auto n = try_count(shape, 1)) return *n;
  return element_count(shape, "tensor '" + name + "'");  // throws the detailed error
}

std::uint64_t TensorDesc::bytes() const {
  if (auto n = try_count(shape, dtype_bytes(dtype))) return *n;
  return checked_mul(elements(), dtype_bytes(dtype), "tensor '" + name + "' byte size");
}

std::uint64_t ParameterDesc::elements() const {
  if (auto n = try_count(shape, 1)) return *n;
  return element_count(shape, "parameter '" + id + "'");
}

std::uint64_t ParameterDesc::bytes() const {
  if (quantization) return quantization->bytes(shape);
  if (auto n = try_count(shape, dtype_bytes(dtype))) return *n;
  return checked_mul(elements(), dtype_bytes(dtype), "parameter '" + id + "' byte size");
}

}  // namespace neuralcost
