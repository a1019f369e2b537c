// The cost rules of collectives (include/neuralcost/cost/collectives.hpp, docs/distributed.md):
// bytes on the wire per rank, latency steps and reduction work, by algorithm.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/collectives.hpp"

namespace neuralcost {
namespace {

struct CollectiveFacts {
  Collective collective;
  std::string_view name;
  bool reduces;
};

constexpr CollectiveFacts kFacts[] = {
    {Collective::kAllReduce, "all_reduce", true},  {Collective::kReduceScatter, "reduce_scatter", true},
    {Collective::kAllGather, "all_gather", false}, {Collective::kAllToAll, "all_to_all", false},
    {Collective::kBroadcast, "broadcast", false},  {Collective::kSendRecv, "send_recv", false},
};

const CollectiveFacts& facts(Collective c) {
  for (const auto& f : kFacts) {
    if (f.collective == c) return f;
  }
  throw Error(ErrorCode::kInternal, "a collective without facts");
}

int ceil_log2(int n) {
  int steps = 0;
  for (int reach = 1; reach < n; reach *= 2) ++steps;
  return steps;
}

void check_ranks(Collective c, int ranks) {
  if (ranks < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} needs at least 2 ranks, not {}", collective_name(c), ranks));
  }
}

/// One phase on one link: `wire` bytes per rank, `steps` latency steps, and a bandwidth term of
/// `bus` bytes at the link's bus bandwidth (the wire bytes, except in-network: see the header).
void add_phase(CollectiveCost& cost, double wire, int steps, const LinkRoof& link, double bus = -1) {
  cost.wire_bytes_per_rank += wire;
  cost.latency_steps += steps;
  cost.link_seconds += (bus < 0 ? wire : bus) / link.bus_bytes_per_second;
  cost.latency_seconds += steps * link.step_latency_seconds;
}

void check_inputs(double bytes, double element_bytes, const LinkRoof& link) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a collective's size must be >= 0 bytes, not {}", bytes));
  }
  if (!(element_bytes > 0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("an element size must be > 0 bytes, not {}", element_bytes));
  }
  if (!(link.bus_bytes_per_second > 0) || !(link.step_latency_seconds >= 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a link needs a bus bandwidth > 0 and a latency >= 0 (got {} B/s, {} s)",
                            link.bus_bytes_per_second, link.step_latency_seconds));
  }
}

}  // namespace

std::string_view collective_name(Collective c) { return facts(c).name; }

std::optional<Collective> collective_from_name(std::string_view name) {
  for (const auto& f : kFacts) {
    if (f.name == name) return f.collective;
  }
  return std::nullopt;
}

std::string_view algorithm_name(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kTree: return "tree";
    case CollectiveAlgorithm::kInNetwork: return "in_network";
  }
  return "?";
}

std::optional<CollectiveAlgorithm> algorithm_from_name(std::string_view name) {
  for (auto a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree, CollectiveAlgorithm::kInNetwork}) {
    if (algorithm_name(a) == name) return a;
  }
  return std::nullopt;
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = [] {
    std::vector<Collective> v;
    for (const auto& f : kFacts) v.push_back(f.collective);
    return v;
  }();
  return all;
}

double bus_bandwidth_factor(Collective c, int ranks) {
  if (c == Collective::kSendRecv) {
    if (ranks < 1) throw Error(ErrorCode::kInvalidArgument, "send_recv needs at least 1 rank");
    return 1.0;
  }
  check_ranks(c, ranks);
  const double n = ranks;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

CollectiveCost collective_cost(Collective c, CollectiveAlgorithm algorithm, int ranks, double bytes,
                               double element_bytes, const LinkRoof& link) {
  check_ranks(c, ranks);
  check_inputs(bytes, element_bytes, link);
  const double n = ranks;
  CollectiveCost cost;
  if (facts(c).reduces && algorithm != CollectiveAlgorithm::kInNetwork) {
    // n−1 of every n chunks are added to a received one on the way (ring); a tree does the same
    // additions in total, spread over the ranks
    cost.reduction_flops = (n - 1) / n * bytes / element_bytes;
  }
  if (algorithm == CollectiveAlgorithm::kTree) {
    if (c != Collective::kAllReduce && c != Collective::kBroadcast) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the tree algorithm runs all_reduce and broadcast, not {}", collective_name(c)));
    }
    const int depth = ceil_log2(ranks);
    add_phase(cost, bus_bandwidth_factor(c, ranks) * bytes, c == Collective::kAllReduce ? 2 * depth : depth, link);
    return cost;
  }
  if (algorithm == CollectiveAlgorithm::kInNetwork) {
    if (c != Collective::kAllReduce) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("in-network reduction (NVLS, SHARP) runs all_reduce, not {}", collective_name(c)));
    }
    // each rank sends its S to the switch once and receives the reduced S once; the figure
    // nccl-tests prints for NVLS/SHARP is still busbw = factor × S / t, so time is read the same way
    add_phase(cost, bytes, 2, link, bus_bandwidth_factor(c, ranks) * bytes);
    return cost;
  }
  const int steps = c == Collective::kAllReduce ? 2 * (ranks - 1) : c == Collective::kSendRecv ? 1 : ranks - 1;
  add_phase(cost, bus_bandwidth_factor(c, ranks) * bytes, steps, link);
  return cost;
}

CollectiveCost hierarchical_cost(Collective c, CollectiveAlgorithm intra_algorithm, int per_node, int nodes,
                                 double bytes, double element_bytes, const LinkRoof& intra, const LinkRoof& inter) {
  if (per_node < 1 || nodes < 1 || per_node * static_cast<long long>(nodes) < 2) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} over {} node(s) of {} rank(s): needs at least 2 ranks",
                                                         collective_name(c), nodes, per_node));
  }
  if (nodes == 1) return collective_cost(c, intra_algorithm, per_node, bytes, element_bytes, intra);
  if (per_node == 1) return collective_cost(c, CollectiveAlgorithm::kRing, nodes, bytes, element_bytes, inter);
  check_inputs(bytes, element_bytes, intra);
  check_inputs(bytes, element_bytes, inter);
  const double g = per_node, m = nodes, n = g * m;
  CollectiveCost cost;
  switch (c) {
    case Collective::kAllReduce:
      add_phase(cost, (g - 1) / g * bytes, per_node - 1, intra);             // reduce-scatter in the node
      add_phase(cost, 2 * (m - 1) / m * bytes / g, 2 * (nodes - 1), inter);  // all-reduce of S/g across
      add_phase(cost, (g - 1) / g * bytes, per_node - 1, intra);             // all-gather in the node
      cost.reduction_flops = ((g - 1) / g + (m - 1) / m / g) * bytes / element_bytes;
      break;
    case Collective::kReduceScatter:
      add_phase(cost, (g - 1) / g * bytes, per_node - 1, intra);
      add_phase(cost, (m - 1) / m * bytes / g, nodes - 1, inter);
      cost.reduction_flops = ((g - 1) / g + (m - 1) / m / g) * bytes / element_bytes;
      break;
    case Collective::kAllGather:
      add_phase(cost, (m - 1) / m * bytes / g, nodes - 1, inter);
      add_phase(cost, (g - 1) / g * bytes, per_node - 1, intra);
      break;
    case Collective::kAllToAll:
      // of a rank's S, a share (g−1)/n stays in its node and (n−g)/n leaves it
      add_phase(cost, (g - 1) / n * bytes, per_node - 1, intra);
      add_phase(cost, (n - g) / n * bytes, nodes - 1, inter);
      break;
    case Collective::kBroadcast:
      add_phase(cost, bytes, nodes - 1, inter);
      add_phase(cost, bytes, per_node - 1, intra);
      break;
    case Collective::kSendRecv: add_phase(cost, bytes, 1, inter); break;
  }
  if (intra_algorithm == CollectiveAlgorithm::kInNetwork && c == Collective::kAllReduce) {
    // the node's reduce-scatter and all-gather become one in-switch pass each way
    const double across = 2 * (m - 1) / m * bytes / g;
    cost = CollectiveCost{};
    add_phase(cost, bytes, 2, intra, 2 * (g - 1) / g * bytes);
    add_phase(cost, across, 2 * (nodes - 1), inter);
    cost.reduction_flops = (m - 1) / m / g * bytes / element_bytes;
  }
  return cost;
}

}  // namespace neuralcost
