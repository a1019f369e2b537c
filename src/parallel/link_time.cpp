// One collective inside a node (include/neuralcost/parallel/link_time.hpp).
#include "neuralcost/parallel/link_time.hpp"

namespace neuralcost {

CollectiveCost in_node_cost(const InterconnectSpec& link, Collective c, int ranks, double bytes, double element_bytes,
                            std::string& basis) {
  if (c == Collective::kAllReduce && link.in_network_reduction && link.in_network_bus_bandwidth_bytes_per_second &&
      link.measured_for(c, ranks) == nullptr) {
    basis = "model, in-network";
    const LinkRoof nvls{*link.in_network_bus_bandwidth_bytes_per_second, link.latency_seconds};
    return collective_cost(c, CollectiveAlgorithm::kInNetwork, ranks, bytes, element_bytes, nvls);
  }
  CollectiveCost ring = collective_cost(c, CollectiveAlgorithm::kRing, ranks, bytes, element_bytes, link.roof());
  if (link.measured_for(c, ranks) != nullptr) {
    // the calibrated time in place of the model's
    ring.latency_seconds = 0;
    ring.link_seconds = collective_seconds(link, c, ranks, bytes, element_bytes, &basis);
  } else {
    basis = "model";
  }
  return ring;
}

CollectiveCost group_cost(const SystemSpec& system, const InterconnectSpec& intra, const InterconnectSpec& inter,
                          Collective c, int per_node, int nodes, double bytes, double element_bytes,
                          std::string& basis) {
  if (nodes <= 1) return in_node_cost(intra, c, per_node, bytes, element_bytes, basis);
  LinkRoof across = inter.roof();  // a device's share of its node's NICs
  const double nics = system.nics_per_node, devices = system.devices_per_node;
  if (nics < devices) across.bus_bytes_per_second *= nics / devices;
  basis = "model, hierarchical";
  return hierarchical_cost(c, CollectiveAlgorithm::kRing, per_node, nodes, bytes, element_bytes, intra.roof(), across);
}

}  // namespace neuralcost
