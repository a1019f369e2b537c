// SI-prefixed formatting (see si_format.hpp).
#include "report/si_format.hpp"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace neuralcost::report {

std::string seconds(double value) {
  if (value == 0) return "0 s";
  const double mag = std::fabs(value);
  const auto three = [](double v, const char* unit) {
    const int decimals = std::fabs(v) >= 99.95 ? 0 : std::fabs(v) >= 9.995 ? 1 : 2;
    return fmt::format("{:.{}f} {}", v, decimals, unit);
  };
  if (mag >= 999.5) return (value < 0 ? "-" : "") + grouped(static_cast<std::uint64_t>(std::llround(mag))) + " s";
  if (mag >= 0.9995) return three(value, "s");
  if (mag >= 0.9995e-3) return three(value * 1e3, "ms");
  if (mag >= 0.9995e-6) return three(value * 1e6, "µs");
  return three(value * 1e9, "ns");
}

std::string si(double value, const std::string& unit) {
  if (unit == "s") return seconds(value);
  if (value == 0) return fmt::format("0 {}", unit);
  static const std::array<std::pair<double, const char*>, 11> prefixes = {{{1e18, "E"},
                                                                           {1e15, "P"},
                                                                           {1e12, "T"},
                                                                           {1e9, "G"},
                                                                           {1e6, "M"},
                                                                           {1e3, "k"},
                                                                           {1, ""},
                                                                           {1e-3, "m"},
                                                                           {1e-6, "µ"},
                                                                           {1e-9, "n"},
                                                                           {1e-12, "p"}}};
  const double mag = std::fabs(value);
  for (const auto& [scale, prefix] : prefixes) {
    if (mag >= scale * 0.9995) {
      const double v = value / scale;
      const int decimals = std::fabs(v) >= 99.95 ? 0 : std::fabs(v) >= 9.995 ? 1 : 2;
      return fmt::format("{:.{}f} {}{}", v, decimals, prefix, unit);
    }
  }
  return fmt::format("{:.2e} {}", value, unit);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

std::string fixed1(double value) { return fmt::format("{:.1f}", value); }

}  // namespace neuralcost::report
