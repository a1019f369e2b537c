// Collective cost rules against nccl-tests' definitions (doc/PERFORMANCE.md of nccl-tests):
// algbw = S / t, busbw = algbw × factor, and the ideal time of a collective is factor × S / busbw.
#include "neuralcost/cost/collectives.hpp"

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr LinkRoof kNoLatency{1e11, 0.0};

TEST(CollectivesTest, BusBandwidthFactorsAreNcclTests) {
  for (int n : {2, 3, 4, 8, 64, 1024}) {
    const double d = n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, n), 2 * (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, n), (d - 1) / d) << n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, n), 1.0) << n;
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kSendRecv, n), 1.0) << n;
  }
  // the worked values nccl-tests prints for 8 GPUs: all-reduce 1.75, all-gather 0.875
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 8), 0.875);
}

TEST(CollectivesTest, RingTimeAtTheLinksBusBandwidthGivesBackThatBusBandwidth) {
  // a time predicted on a link of busbw B, read back as nccl-tests reads a measured time, is B
  const double S = 1e9;
  for (Collective c : all_collectives()) {
    for (int n : {2, 8, 72}) {
      const CollectiveCost cost = collective_cost(c, CollectiveAlgorithm::kRing, n, S, 2, kNoLatency);
      const double algbw = S / cost.seconds();
      EXPECT_NEAR(algbw * bus_bandwidth_factor(c, n), kNoLatency.bus_bytes_per_second, 1e-3) << collective_name(c);
    }
  }
}

TEST(CollectivesTest, EightGpuAllReduceOfOneGigabyteOnNvlink4) {
  // 8 × H100, 1 GB in bf16 at 370 GB/s busbw and 6 us a step: 1.75 GB / 370 GB/s + 14 × 6 us
  const CollectiveCost c =
      collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 8, 1e9, 2, LinkRoof{3.7e11, 6e-6});
  EXPECT_DOUBLE_EQ(c.wire_bytes_per_rank, 1.75e9);
  EXPECT_EQ(c.latency_steps, 14);
  EXPECT_NEAR(c.seconds(), 1.75e9 / 3.7e11 + 14 * 6e-6, 1e-12);
  // 7 of 8 chunks are added once each: 7/8 × 5e8 elements
  EXPECT_DOUBLE_EQ(c.reduction_flops, 7.0 / 8 * 5e8);
}

TEST(CollectivesTest, RingAllReduceIsAReduceScatterThenAnAllGather) {
  const LinkRoof link{5e10, 3e-6};
  for (int n : {2, 5, 16}) {
    const auto ar = collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, n, 3e8, 4, link);
    const auto rs = collective_cost(Collective::kReduceScatter, CollectiveAlgorithm::kRing, n, 3e8, 4, link);
    const auto ag = collective_cost(Collective::kAllGather, CollectiveAlgorithm::kRing, n, 3e8, 4, link);
    EXPECT_NEAR(ar.seconds(), rs.seconds() + ag.seconds(), 1e-12) << n;
    EXPECT_EQ(ar.latency_steps, rs.latency_steps + ag.latency_steps);
    EXPECT_DOUBLE_EQ(ar.reduction_flops, rs.reduction_flops);
    EXPECT_EQ(ag.reduction_flops, 0.0);
  }
}

TEST(CollectivesTest, TreeTradesLatencyStepsForTheSameBandwidthTerm) {
  const LinkRoof link{1e11, 5e-6};
  const auto ring = collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 64, 4096, 2, link);
  const auto tree = collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kTree, 64, 4096, 2, link);
  EXPECT_EQ(ring.latency_steps, 126);
  EXPECT_EQ(tree.latency_steps, 12);  // up and down a tree of depth 6
  EXPECT_DOUBLE_EQ(tree.link_seconds, ring.link_seconds);
  EXPECT_LT(tree.seconds(), ring.seconds());
  EXPECT_THROW(collective_cost(Collective::kAllGather, CollectiveAlgorithm::kTree, 8, 1, 2, link), Error);
}

TEST(CollectivesTest, InNetworkAllReduceSendsTheBufferOnceAndReducesNothingOnTheRank) {
  const auto nvls = collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kInNetwork, 8, 1e9, 2, kNoLatency);
  EXPECT_DOUBLE_EQ(nvls.wire_bytes_per_rank, 1e9);
  // read like nccl-tests: 1.75 × S over the NVLS busbw
  EXPECT_NEAR(nvls.seconds(), 1.75e9 / kNoLatency.bus_bytes_per_second + 2 * kNoLatency.step_latency_seconds, 1e-12);
  EXPECT_EQ(nvls.reduction_flops, 0.0);
  EXPECT_THROW(collective_cost(Collective::kAllToAll, CollectiveAlgorithm::kInNetwork, 8, 1, 2, kNoLatency), Error);
}

TEST(CollectivesTest, HierarchicalAllReduceSendsOnlyAShareAcrossNodes) {
  // 4 nodes of 8: inside, 2 × 7/8 S; across, 2 × 3/4 × S/8 per GPU (each GPU with its own NIC)
  const LinkRoof nvlink{3.7e11, 0}, ib{4.5e10, 0};
  const double S = 8e8;
  const auto h = hierarchical_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 8, 4, S, 2, nvlink, ib);
  EXPECT_NEAR(h.link_seconds, 2 * 7.0 / 8 * S / 3.7e11 + 2 * 3.0 / 4 * S / 8 / 4.5e10, 1e-12);
  EXPECT_EQ(h.latency_steps, 7 + 6 + 7);
  // total additions equal a flat all-reduce's: (n−1)/n of the elements per rank
  EXPECT_NEAR(h.reduction_flops, 31.0 / 32 * S / 2, 1e-3);
  // one node is the flat collective on the node's link; one rank a node, on the NICs
  const auto one_node = hierarchical_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 8, 1, S, 2, nvlink, ib);
  const auto flat = collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 8, S, 2, nvlink);
  EXPECT_DOUBLE_EQ(one_node.seconds(), flat.seconds());
}

TEST(CollectivesTest, HierarchicalAllToAllSendsWhatLeavesTheNodeOnTheNics) {
  const LinkRoof nvlink{1e12, 0}, ib{1e10, 0};
  const auto h = hierarchical_cost(Collective::kAllToAll, CollectiveAlgorithm::kRing, 8, 2, 1.6e9, 2, nvlink, ib);
  // of 16 ranks, 7 share the node and 8 are on the other one
  EXPECT_NEAR(h.wire_bytes_per_rank, 15.0 / 16 * 1.6e9, 1);
  EXPECT_NEAR(h.link_seconds, 7.0 / 16 * 1.6e9 / 1e12 + 8.0 / 16 * 1.6e9 / 1e10, 1e-12);
}

TEST(CollectivesTest, RefusesOneRankNegativeSizesAndDeadLinks) {
  EXPECT_THROW(bus_bandwidth_factor(Collective::kAllReduce, 1), Error);
  EXPECT_THROW(collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 1, 1, 2, kNoLatency), Error);
  EXPECT_THROW(collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 2, -1, 2, kNoLatency), Error);
  EXPECT_THROW(collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 2, 1, 0, kNoLatency), Error);
  EXPECT_THROW(collective_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 2, 1, 2, LinkRoof{0, 0}), Error);
  EXPECT_THROW(
      hierarchical_cost(Collective::kAllReduce, CollectiveAlgorithm::kRing, 1, 1, 1, 2, kNoLatency, kNoLatency), Error);
}

TEST(CollectivesTest, NamesRoundTrip) {
  for (Collective c : all_collectives()) EXPECT_EQ(collective_from_name(collective_name(c)), c);
  EXPECT_FALSE(collective_from_name("allreduce").has_value());
  EXPECT_EQ(algorithm_from_name("tree"), CollectiveAlgorithm::kTree);
}

}  // namespace
}  // namespace neuralcost
