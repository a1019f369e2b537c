// Overflow-checked 64-bit counting. FLOP and byte counts of absurd shapes must fail loudly
// (ErrorCode::kOutOfRange) instead of wrapping into a plausible-looking small number.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace neuralcost {

/// a * b, or throws Error(kOutOfRange) naming `what` when the product exceeds 2^64 - 1.
std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what);
/// a + b, or throws Error(kOutOfRange) naming `what` when the sum exceeds 2^64 - 1.
std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what);

/// Exact intermediate arithmetic on int64 dimensions and attributes (shape formulas, counts an
/// importer derives before it knows they fit).
__extension__ using Wide = __int128;
/// Where saturating products stop: far past any 64-bit count, far below Wide's limit.
inline constexpr Wide kWideSaturation = Wide{1} << 100;
/// a * b for counts a, b >= 0, saturating at kWideSaturation (never overflows).
Wide saturating_mul(Wide a, Wide b);
/// The product of `factors`, saturating as saturating_mul.
Wide saturating_product(std::initializer_list<Wide> factors);
/// The element count of a shape, saturating as saturating_mul; a negative dim counts as 0.
Wide saturating_elements(const std::vector<std::int64_t>& shape);
/// True when 0 <= value <= INT64_MAX (a count an attribute can hold).
bool fits_int64(Wide value);

}  // namespace neuralcost
