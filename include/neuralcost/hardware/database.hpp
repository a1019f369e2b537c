// The built-in hardware database (data/hardware/*.json, embedded at build time) and exact
// lookup: an id or alias names one part, never "the closest one".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

class HardwareDatabase {
 public:
  /// Builds a database; throws kInvalidArgument if two specs share an id or alias, or a device name.
  explicit HardwareDatabase(std::vector<HardwareSpec> specs);

  /// The database built into the library.
  static const HardwareDatabase& builtin();

  const std::vector<HardwareSpec>& specs() const { return specs_; }
  /// Exact, case-insensitive match on id or alias; nullptr when there is none.
  const HardwareSpec* find(std::string_view id_or_alias) const;
  /// Exact, case-insensitive match on a spec's device_names (a GPU as its framework names it);
  /// nullptr when there is none.
  const HardwareSpec* find_device_name(std::string_view device_name) const;
  /// Up to `count` ids closest to `name` (ids containing it first, then by edit distance).
  std::vector<std::string> nearest(std::string_view name, std::size_t count) const;
  /// find(), or kNotFound: "unknown hardware 'a100'; nearest ids: a100-sxm-40gb, ...".
  const HardwareSpec& get(std::string_view id_or_alias) const;

 private:
  std::vector<HardwareSpec> specs_;
};

/// Where a resolved --hardware spec comes from.
enum class HardwareSource {
  kDatabase,           ///< a built-in id or alias
  kFile,               ///< a spec JSON file
  kCachedCalibration,  ///< host / host-spec, from this machine's cached calibration
  kNeedsCalibration,   ///< host / host-spec with no usable calibration: measure one (calibrate/)
};
std::string_view hardware_source_name(HardwareSource source);

struct ResolvedHardware {
  std::string request;  ///< what was asked for: "host", "h100-sxm", "spec.json"
  HardwareSource source = HardwareSource::kDatabase;
  std::optional<HardwareSpec> spec;  ///< empty only for kNeedsCalibration
  /// host / host-spec: the calibration used ("calibration of <date> from <path>"), or why none
  /// is usable (no file, another CPU, other threads, corrupt). Empty otherwise.
  std::string status;
  bool stale_calibration = false;  ///< kNeedsCalibration: a cached file exists but cannot be used
  int threads = 0;                 ///< host / host-spec: the threads the roof is for (0: one per CPU)
};

/// Resolves a --hardware argument without measuring anything: "host" is this machine as
/// calibrated (calibration.hpp), "host-spec" its theoretical peaks (host.hpp) with the measured
/// DRAM bandwidth; both need a cached calibration, else the result is kNeedsCalibration and
/// calibrate_if_needed (calibrate/calibrate.hpp) measures one. A path to an existing file (or
/// anything ending in .json) is loaded as a spec file; otherwise it must be a built-in id or
/// alias (kNotFound with the nearest ids). `threads` chooses the calibration of host and
/// host-spec: the ceilings of the cores a run of that many threads uses (0: one per CPU); it
/// does not matter for any other spec.
ResolvedHardware resolve_hardware(const std::string& id_or_path, int threads = 0);
/// Whether `id_or_path` names this machine ("host" or "host-spec").
bool names_host(const std::string& id_or_path);

}  // namespace neuralcost
