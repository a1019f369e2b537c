// Overflow-checked counting (see checked_math.hpp).
#include "neuralcost/core/checked_math.hpp"

#include <string>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw Error(ErrorCode::kOutOfRange, std::string(what) + " overflows 64 bits");
  }
  return r;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw Error(ErrorCode::kOutOfRange, std::string(what) + " overflows 64 bits");
  }
  return r;
}

}  // namespace neuralcost
