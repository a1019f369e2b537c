// The time of one collective among the devices of one node, on the node's link: its measured
// segments when it was calibrated, in-network reduction for an all-reduce where the link has it
// (NCCL picks NVLS by default where it exists), else the ring (docs/distributed.md).
#pragma once

#include <string>

#include "neuralcost/cost/collectives.hpp"
#include "neuralcost/hardware/interconnect.hpp"

namespace neuralcost {

/// `basis`: "measured" (or "measured, interpolated|extrapolated"), "model, in-network" or "model".
CollectiveCost in_node_cost(const InterconnectSpec& link, Collective c, int ranks, double bytes, double element_bytes,
                            std::string& basis);

/// A collective over a group of `per_node` devices in each of `nodes` nodes of `system`: inside
/// one node on `intra` (in_node_cost), across nodes hierarchically (hierarchical_cost, ring
/// inside) with each device's share of its node's NICs on `inter` ("model, hierarchical").
CollectiveCost group_cost(const SystemSpec& system, const InterconnectSpec& intra, const InterconnectSpec& inter,
                          Collective c, int per_node, int nodes, double bytes, double element_bytes,
                          std::string& basis);

}  // namespace neuralcost
