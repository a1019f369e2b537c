// Links between devices and the systems built from them, as data beside the hardware database
// (data/interconnects/*.json, data/systems/*.json, embedded at build time; docs/distributed.md).
// Every figure has its source. A link is its line rate and what collectives achieve on it (the
// bus bandwidth nccl-tests reports, a step latency); a calibrated link (`hardware calibrate
// --collectives`) also carries fitted segments per collective and rank count, which then decide
// its times.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/cost/collectives.hpp"

namespace neuralcost {

/// A fitted piece of a measured collective: over [min_bytes, max_bytes],
/// t(S) = latency_seconds + bus_bandwidth_factor(c, ranks) × S / bus_bytes_per_second.
struct CollectiveSegment {
  double min_bytes = 0;
  double max_bytes = 0;
  double latency_seconds = 0;
  double bus_bytes_per_second = 0;
};

struct MeasuredCollective {
  Collective collective = Collective::kAllReduce;
  int ranks = 2;
  std::vector<CollectiveSegment> segments;  ///< by size, not overlapping
  /// The fit's check on sizes it was not fitted to (largest relative error), when made.
  std::optional<double> held_back_max_error;
};

struct InterconnectSpec {
  std::string id;  ///< "nvlink4-nvswitch"
  std::string name;
  std::string kind;                                  ///< nvlink, pcie, infiniband, roce, loopback
  std::string scope;                                 ///< intra-node or inter-node
  std::optional<double> line_rate_bytes_per_second;  ///< per device or NIC port, one direction
  double bus_bandwidth_bytes_per_second = 0;         ///< achieved (nccl-tests' busbw, large messages)
  double latency_seconds = 0;                        ///< per algorithm step
  bool in_network_reduction = false;                 ///< NVLS / SHARP
  std::optional<double> in_network_bus_bandwidth_bytes_per_second;
  std::vector<MeasuredCollective> measured;
  std::map<std::string, std::string> sources;
  std::vector<std::string> notes;
  std::string origin;  ///< "built-in" or a file's path

  LinkRoof roof() const { return {bus_bandwidth_bytes_per_second, latency_seconds}; }
  /// The measured fit for `c` over `ranks`, if the link has one.
  const MeasuredCollective* measured_for(Collective c, int ranks) const;
};

/// The time of one collective on `link`: from its measured segments when it has them for (c,
/// ranks): the segment holding `bytes` ("measured"), log-log between two segments' ends
/// ("measured, interpolated"), or the first or last segment beyond them ("measured,
/// extrapolated"); else collective_cost() by ring ("model"). Throws like collective_cost().
double collective_seconds(const InterconnectSpec& link, Collective c, int ranks, double bytes, double element_bytes,
                          std::string* basis = nullptr);

struct SystemSpec {
  std::string id;  ///< "dgx-h100"
  std::string name;
  std::string device;  ///< a hardware id
  int devices_per_node = 1;
  std::string intra_node;  ///< an interconnect id
  std::string inter_node;  ///< an interconnect id
  int nics_per_node = 0;
  std::map<std::string, std::string> sources;
  std::vector<std::string> notes;
  std::string origin;
};

/// Parse and check one file's text; errors name `origin` and the field, kInvalidArgument.
InterconnectSpec parse_interconnect_spec(std::string_view json_text, const std::string& origin);
SystemSpec parse_system_spec(std::string_view json_text, const std::string& origin);
/// The JSON of a spec, in the format parse_interconnect_spec reads.
std::string interconnect_spec_json(const InterconnectSpec& spec);

/// The built-in links and systems, sorted by id. Every system's device and links exist.
const std::vector<InterconnectSpec>& builtin_interconnects();
const std::vector<SystemSpec>& builtin_systems();
/// A built-in by id, or (for an interconnect) a JSON file's path; kNotFound naming the nearest ids.
InterconnectSpec find_interconnect(const std::string& id_or_path);
const SystemSpec& find_system(const std::string& id);

}  // namespace neuralcost
