// The cost of a collective: what one rank sends on the wire, how many latency steps the algorithm
// takes, how much reduction work it does, and the ideal time on a link (docs/distributed.md).
//
// Sizes follow nccl-tests (doc/PERFORMANCE.md there): `bytes` is the size S of the whole
// buffer (all-reduce: the buffer; reduce-scatter: its input, n chunks; all-gather: its output,
// n chunks; all-to-all: one rank's send buffer; broadcast, send/recv: the message). The bus
// bandwidth of a measured time t is S / t × bus_bandwidth_factor(); a link's bus bandwidth is
// therefore the figure nccl-tests prints as busbw, and ideal time = factor × S / busbw.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuralcost {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kSendRecv };
/// ring: a ring over the ranks (n−1 steps a phase); tree: NCCL's double binary tree (2·⌈log2 n⌉
/// steps for an all-reduce); in_network: reduction in the switch (NVLS, SHARP: each rank sends S
/// and receives S, two steps).
enum class CollectiveAlgorithm { kRing, kTree, kInNetwork };

/// "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv"
std::string_view collective_name(Collective c);
std::optional<Collective> collective_from_name(std::string_view name);
std::string_view algorithm_name(CollectiveAlgorithm a);
std::optional<CollectiveAlgorithm> algorithm_from_name(std::string_view name);
/// Every collective, in the order above.
const std::vector<Collective>& all_collectives();

/// nccl-tests' bus-bandwidth factor for n ranks: all-reduce 2(n−1)/n; reduce-scatter, all-gather,
/// all-to-all (n−1)/n; broadcast and send/recv 1. Throws kInvalidArgument for n < 2 (1 for send/recv).
double bus_bandwidth_factor(Collective c, int ranks);

/// A link as the cost rule sees it: the bus bandwidth a rank achieves (bytes/s, one direction)
/// and the latency of one algorithm step (s).
struct LinkRoof {
  double bus_bytes_per_second = 0;
  double step_latency_seconds = 0;
};

struct CollectiveCost {
  double wire_bytes_per_rank = 0;  ///< what one rank sends (and receives) on the link
  int latency_steps = 0;           ///< sequential steps of the algorithm, each paying the link's latency
  double reduction_flops = 0;      ///< additions one rank does (reducing collectives)
  double link_seconds = 0;         ///< wire_bytes_per_rank / bus bandwidth, the bandwidth term
  double latency_seconds = 0;      ///< latency_steps × step latency
  double seconds() const { return link_seconds + latency_seconds; }
};

/// The cost of one collective of `bytes` (see the top of this file) over `ranks` ranks, with
/// elements of `element_bytes`, by `algorithm`, on `link`. The bandwidth term is always
/// factor × S / busbw, nccl-tests' definition: for in-network all-reduce pass the busbw nccl-tests
/// reports with NVLS/SHARP (higher than the ring's, as each rank sends S once instead of about
/// 2S: wire_bytes_per_rank says S). Tree runs all-reduce and broadcast, in-network all-reduce
/// only; other pairs are kInvalidArgument, as are ranks < 2, negative bytes, a non-positive
/// element size or bandwidth.
CollectiveCost collective_cost(Collective c, CollectiveAlgorithm algorithm, int ranks, double bytes,
                               double element_bytes, const LinkRoof& link);

/// A collective over nodes × per_node ranks, hierarchically (NCCL across nodes): all-reduce as a
/// reduce-scatter inside each node, an all-reduce of S/per_node across nodes (one rank of each
/// node per chunk, on `inter`), an all-gather inside the node; the other collectives as their
/// inside-node phase plus their across-node phase on S/per_node. The phases add (no overlap).
/// With nodes == 1 it is collective_cost on `intra`; with per_node == 1 on `inter`.
CollectiveCost hierarchical_cost(Collective c, CollectiveAlgorithm intra_algorithm, int per_node, int nodes,
                                 double bytes, double element_bytes, const LinkRoof& intra, const LinkRoof& inter);

}  // namespace neuralcost
