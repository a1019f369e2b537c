// Filling the calibration cache (see calibrate.hpp): measure when the cache has nothing usable,
// one process at a time (the cache's lock), keep only a calibration taken on a quiet machine, and
// turn it into the spec `--hardware host` asked for.
#include <fmt/format.h>

#include "neuralcost/calibrate/calibrate.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

/// How calibrate() begins the reason of rounds that never agreed (calibrate.cpp).
constexpr const char* kRoundsDisagree = "the best rounds do not agree";

std::string joined(const std::vector<std::string>& reasons) {
  std::string out;
  for (const std::string& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

/// Measures a new calibration for the cache while holding its lock; `why` says why the cached one
/// was not used ("" when there was none). Without the lock it measures but does not save.
Calibration measure_for_cache(const HostDescription& host, int threads, bool full, const std::string& why,
                              const CalibrationLock& lock, std::string& status) {
  CalibrationOptions options;
  options.quick = !full;
  options.threads = calibration_threads(host, threads);
  Calibration c = calibrate(host, options);
  // a calibration taken while other work ran would be used until the CPU changes: keep only one
  // of a quiet machine whose rounds agree
  std::string before = why.empty() ? "" : why + "; recalibrating. ";
  if (lock.held() && lock.waited_seconds() > 0) {
    before +=
        fmt::format("Waited {:.1f} s for another calibration of this CPU, which saved none. ", lock.waited_seconds());
  }
  const std::vector<std::string> doubts = why_not_cacheable(c);
  if (!doubts.empty()) {
    status = fmt::format(
        "{}{} calibration ({} thread{}) measured now ({:.1f} s) but not saved: {}; the next run "
        "calibrates again",
        before, full ? "full" : "quick", c.threads, c.threads == 1 ? "" : "s", c.seconds, joined(doubts));
    c.warnings.push_back(status);
    return c;
  }
  // a cache we cannot write (a shared or foreign folder, a full disk) or whose lock another
  // calibration kept costs a recalibration next time, not this run
  std::string unsaved = lock.why_not();
  if (lock.held()) {
    try {
      save_calibration(c);
    } catch (const Error& e) {
      unsaved = e.what();
    }
  }
  if (!unsaved.empty()) {
    status = fmt::format("{}{} calibration ({} thread{}) measured now ({:.1f} s) but not saved: {}", before,
                         full ? "full" : "quick", c.threads, c.threads == 1 ? "" : "s", c.seconds, unsaved);
    c.warnings.push_back(status);
    return c;
  }
  status = fmt::format("{}{} calibration ({} thread{}) measured now ({:.1f} s) and saved to {}", before,
                       full ? "full" : "quick", c.threads, c.threads == 1 ? "" : "s", c.seconds,
                       calibration_cache_path(c.threads));
  if (const std::string spread = rounds_disagreement(c); !spread.empty()) {
    status += fmt::format(
        " with its spread ({}; each figure's spread is in the file, and later runs use it rather "
        "than calibrate again)",
        spread);
  }
  return c;
}

/// A calibration for the cache, one process at a time: another process measuring the same
/// thread count is waited for, and what it saved is used instead of measuring again.
Calibration fill_cache(const HostDescription& host, int threads, bool full, const std::string& why,
                       std::string& status) {
  const CalibrationLock lock(calibration_threads(host, threads), kCalibrationLockSeconds);
  if (lock.held()) {
    CachedCalibration cached = load_cached_calibration(host, threads, full);
    if (cached.calibration) {
      status = lock.waited_seconds() > 0 ? fmt::format("waited {:.1f} s for another calibration of this CPU; {}",
                                                       lock.waited_seconds(), cached.status)
                                         : cached.status;
      return *cached.calibration;
    }
  }
  return measure_for_cache(host, threads, full, why, lock, status);
}

}  // namespace

std::string rounds_disagreement(const Calibration& c) {
  for (const std::string& b : c.busy) {
    if (b.rfind(kRoundsDisagree, 0) == 0) return b;
  }
  return "";
}

std::vector<std::string> why_not_cacheable(const Calibration& c) {
  std::vector<std::string> reasons;
  for (const std::string& b : c.busy) {
    if (b.rfind(kRoundsDisagree, 0) != 0) reasons.push_back(b);
  }
  const auto fma = c.fma.find("fp32");
  const auto theory = c.theoretical_flops.find("fp32");
  if (fma != c.fma.end() && theory != c.theoretical_flops.end() && theory->second > 0 &&
      fma->second.best < kMinFmaOfTheory * theory->second) {
    reasons.push_back(
        fmt::format("FP32 FMA reached only {:.0f}% of the theoretical peak (under {:.0f}%: other work "
                    "took the cores, or the CPU table's row is wrong for this CPU)",
                    100 * fma->second.best / theory->second, 100 * kMinFmaOfTheory));
  }
  if (c.clock_ghz > kMaxPlausibleClockGhz) {
    reasons.push_back(
        fmt::format("the clock measured {:.2f} GHz, above any CPU's (the add chain did not run one "
                    "add per cycle)",
                    c.clock_ghz));
  }
  return reasons;
}

Calibration cached_calibration(const HostDescription& host, int threads, bool full, std::string& status) {
  CachedCalibration cached = load_cached_calibration(host, threads, full);
  if (cached.calibration) {
    status = cached.status;
    return *cached.calibration;
  }
  return fill_cache(host, threads, full, cached.stale ? cached.status : "", status);
}

HardwareSpec calibrate_if_needed(const ResolvedHardware& resolved, std::string& status) {
  if (resolved.source != HardwareSource::kNeedsCalibration) {
    if (!resolved.spec)
      throw Error(ErrorCode::kInternal, fmt::format("hardware '{}' resolved to no spec", resolved.request));
    status = resolved.status;
    return *resolved.spec;
  }
  const HostDescription host = describe_host();
  const Calibration c =
      fill_cache(host, resolved.threads, false, resolved.stale_calibration ? resolved.status : "", status);
  return host_spec_from_calibration(resolved.request, host, c, status);
}

}  // namespace neuralcost
