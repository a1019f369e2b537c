// The built-in hardware database (data/hardware/*.json, embedded at build time) and exact
// lookup: an id or alias names one part, never "the closest one".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

class HardwareDatabase {
 public:
  /// Builds a database; throws kInvalidArgument if two specs share an id or alias.
  explicit HardwareDatabase(std::vector<HardwareSpec> specs);

  /// The database built into the library.
  static const HardwareDatabase& builtin();

  const std::vector<HardwareSpec>& specs() const { return specs_; }
  /// Exact, case-insensitive match on id or alias; nullptr when there is none.
  const HardwareSpec* find(std::string_view id_or_alias) const;
  /// Up to `count` ids closest to `name` (ids containing it first, then by edit distance).
  std::vector<std::string> nearest(std::string_view name, std::size_t count) const;
  /// find(), or kNotFound: "unknown hardware 'a100'; nearest ids: a100-sxm-40gb, ...".
  const HardwareSpec& get(std::string_view id_or_alias) const;

 private:
  std::vector<HardwareSpec> specs_;
};

/// Resolves a --hardware argument: "host" is this machine as calibrated (calibration.hpp),
/// "host-spec" its theoretical peaks (host.hpp), a path to an
/// existing file (or anything ending in .json) is loaded as a spec file, otherwise it must be
/// a built-in id or alias.
HardwareSpec resolve_hardware(const std::string& id_or_path);

}  // namespace neuralcost
