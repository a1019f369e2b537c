// Exact numbers as text (number_text.hpp).
#include "neuralcost/core/number_text.hpp"

namespace neuralcost {

std::string grouped(std::uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace neuralcost
