// Human-readable numbers for the table and Markdown views: SI prefixes and fixed precision.
#pragma once

#include <cstdint>
#include <string>

#include "neuralcost/core/number_text.hpp"

namespace neuralcost::report {

/// 3 significant digits with an SI prefix: si(26216960, "FLOP") == "26.2 MFLOP",
/// si(1.2e-5, "s") == "12.0 µs". Zero prints as "0 unit".
/// Seconds (unit "s") only take s, ms, µs and ns: si(16200, "s") == "16,200 s",
/// si(3.06e-10, "s") == "0.31 ns".
std::string si(double value, const std::string& unit);
/// Seconds as si(value, "s").
std::string seconds(double value);
/// An exact count with digit separators (core/number_text.hpp): grouped(25507944) == "25,507,944".
using neuralcost::grouped;
/// "12.3%".
std::string percent(double fraction);
/// Fixed notation with 1 decimal for intensities: "18.1".
std::string fixed1(double value);

}  // namespace neuralcost::report
