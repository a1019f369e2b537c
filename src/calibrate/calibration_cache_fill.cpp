// Filling the calibration cache (see calibrate.hpp): measure when the cache has nothing usable,
// keep only a believable result, and turn it into the spec `--hardware host` asked for.
#include <fmt/format.h>

#include "neuralcost/calibrate/calibrate.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

/// Measures a new calibration for the cache; `why` says why the cached one was not used ("" when
/// there was none).
Calibration measure_for_cache(const HostDescription& host, bool full, const std::string& why, std::string& status) {
  CalibrationOptions options;
  options.quick = !full;
  Calibration c = calibrate(host, options);
  // a calibration taken while other work ran would be used until the CPU changes: keep only a
  // believable one (its FP32 FMA within 15% of the theoretical peak at the measured clock)
  const auto fma = c.fma.find("fp32");
  const auto theory = c.theoretical_flops.find("fp32");
  const double ratio = fma != c.fma.end() && theory != c.theoretical_flops.end() ? fma->second.best / theory->second : 1;
  const std::string before = why.empty() ? "" : why + "; recalibrating. ";
  if (ratio < 0.85) {
    status = fmt::format("{}{} calibration measured now ({:.1f} s) but not saved: FP32 FMA reached only {:.0f}% of the "
                         "theoretical peak (was the machine busy?); the next run calibrates again",
                         before, full ? "full" : "quick", c.seconds, ratio * 100);
    c.warnings.push_back(status);
    return c;
  }
  save_calibration(c);
  status = fmt::format("{}{} calibration measured now ({:.1f} s) and saved to {}", before, full ? "full" : "quick",
                       c.seconds, calibration_cache_path());
  return c;
}

}  // namespace

Calibration cached_calibration(const HostDescription& host, bool full, std::string& status) {
  CachedCalibration cached = load_cached_calibration(host, full);
  if (cached.calibration) {
    status = cached.status;
    return *cached.calibration;
  }
  return measure_for_cache(host, full, cached.stale ? cached.status : "", status);
}

HardwareSpec calibrate_if_needed(const ResolvedHardware& resolved, std::string& status) {
  if (resolved.source != HardwareSource::kNeedsCalibration) {
    if (!resolved.spec) throw Error(ErrorCode::kInternal, fmt::format("hardware '{}' resolved to no spec", resolved.request));
    status = resolved.status;
    return *resolved.spec;
  }
  const HostDescription host = describe_host();
  const Calibration c = measure_for_cache(host, false, resolved.stale_calibration ? resolved.status : "", status);
  return host_spec_from_calibration(resolved.request, host, c, status);
}

}  // namespace neuralcost
