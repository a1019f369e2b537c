// Exact numbers as text, shared by every layer's messages (SI-prefixed figures for views are
// report/si_format.hpp's).
#pragma once

#include <cstdint>
#include <string>

namespace neuralcost {

/// An exact count with digit separators: grouped(25507944) == "25,507,944".
std::string grouped(std::uint64_t value);

}  // namespace neuralcost
