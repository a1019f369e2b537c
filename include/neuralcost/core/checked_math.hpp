// Overflow-checked 64-bit counting. FLOP and byte counts of absurd shapes must fail loudly
// (ErrorCode::kOutOfRange) instead of wrapping into a plausible-looking small number.
#pragma once

#include <cstdint>
#include <string_view>

namespace neuralcost {

/// a * b, or throws Error(kOutOfRange) naming `what` when the product exceeds 2^64 - 1.
std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what);
/// a + b, or throws Error(kOutOfRange) naming `what` when the sum exceeds 2^64 - 1.
std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what);

}  // namespace neuralcost
