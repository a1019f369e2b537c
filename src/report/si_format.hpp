// Human-readable numbers for the table and Markdown views: SI prefixes and fixed precision.
#pragma once

#include <string>

namespace neuralcost::report {

/// 3 significant digits with an SI prefix: si(26216960, "FLOP") == "26.2 MFLOP",
/// si(1.2e-5, "s") == "12.0 µs". Zero prints as "0 unit".
std::string si(double value, const std::string& unit);
/// "12.3%".
std::string percent(double fraction);
/// Fixed notation with 1 decimal for intensities: "18.1".
std::string fixed1(double value);

}  // namespace neuralcost::report
