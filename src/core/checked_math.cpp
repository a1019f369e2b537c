// Overflow-checked counting (see checked_math.hpp).
#include "neuralcost/core/checked_math.hpp"

#include <algorithm>
#include <limits>
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

Wide saturating_mul(Wide a, Wide b) {
  if (a <= 0 || b <= 0) return 0;
  return a > kWideSaturation / b ? kWideSaturation : std::min(a * b, kWideSaturation);
}

Wide saturating_product(std::initializer_list<Wide> factors) {
  Wide n = 1;
  for (Wide f : factors) n = saturating_mul(n, f);
  return n;
}

Wide saturating_elements(const std::vector<std::int64_t>& shape) {
  Wide n = 1;
  for (std::int64_t d : shape) n = saturating_mul(n, d);
  return n;
}

bool fits_int64(Wide value) { return value >= 0 && value <= std::numeric_limits<std::int64_t>::max(); }

}  // namespace neuralcost
