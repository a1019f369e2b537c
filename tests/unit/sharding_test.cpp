// ZeRO sharding against the paper's accounting (Rajbhandari et al., "ZeRO: Memory Optimizations
// Toward Training Trillion Parameter Models", SC'20, Figure 1): mixed-precision Adam keeps
// (2 + 2 + K)·Ψ bytes with K = 12, and each stage divides part of it by the DP degree N_d.
#include "neuralcost/parallel/sharding.hpp"

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

TrainingOptions mixed_adam() {
  TrainingOptions o;
  o.optimizer = Optimizer::kAdam;
  o.precision = Precision::kBf16Mixed;
  return o;
}

/// The ledger of the paper's example: Ψ = 7.5 B parameters in mixed-precision Adam.
MemoryLedger paper_model() {
  MemoryLedger l;
  const std::uint64_t psi = 7'500'000'000;
  l.parameter_count = psi;
  l.parameter_bytes = 2 * psi;
  l.gradient_bytes = 2 * psi;
  l.optimizer_state_bytes = 8 * psi;
  l.master_weight_bytes = 4 * psi;
  return l;
}

TEST(ShardingTest, ThePapersSevenAndAHalfBillionParametersOnSixtyFourDevices) {
  // Figure 1: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device at N_d = 64
  const MemoryLedger l = paper_model();
  EXPECT_EQ(shard_model_states(l, ZeroStage::kNone, 64).model_state_bytes(), 120'000'000'000u);
  EXPECT_EQ(shard_model_states(l, ZeroStage::kOptimizer, 64).model_state_bytes(),
            4 * 7'500'000'000u + 12 * 117'187'500u);  // 31.41 GB
  EXPECT_EQ(shard_model_states(l, ZeroStage::kGradients, 64).model_state_bytes(),
            2 * 7'500'000'000u + 14 * 117'187'500u);                                                    // 16.64 GB
  EXPECT_EQ(shard_model_states(l, ZeroStage::kParameters, 64).model_state_bytes(), 16 * 117'187'500u);  // 1.875 GB
}

TEST(ShardingTest, TheLedgersMixedPrecisionAdamIsSixteenBytesAParameterSharded) {
  for (const std::string name : {"ff", "cnn", "transformer"}) {
    ReferenceOptions o;
    o.model = name;
    o.batch = 4;
    const MemoryLedger l = memory_ledger(build_reference_model(o), mixed_adam());
    const std::uint64_t psi = l.parameter_count;
    for (int n : {1, 2, 3, 8}) {
      const std::uint64_t shard = (psi + n - 1) / n;  // padded to a multiple of the ranks
      EXPECT_EQ(shard_model_states(l, ZeroStage::kNone, n).model_state_bytes(), 16 * psi) << name << n;
      EXPECT_EQ(shard_model_states(l, ZeroStage::kOptimizer, n).model_state_bytes(), 4 * psi + 12 * shard);
      EXPECT_EQ(shard_model_states(l, ZeroStage::kGradients, n).model_state_bytes(), 2 * psi + 14 * shard);
      EXPECT_EQ(shard_model_states(l, ZeroStage::kParameters, n).model_state_bytes(), 16 * shard);
    }
  }
}

TEST(ShardingTest, DdpAndZeroTwoMoveTheSameBytesAndZeroThreeHalfAsMuchAgain) {
  // the paper, section 7: ZeRO-1/2 communicate 2Ψ like DDP, ZeRO-3 3Ψ (here in bytes, bf16)
  const MemoryLedger l = paper_model();
  const LinkRoof link{1e11, 0};
  auto wire = [&](ZeroStage s) {
    double bytes = 0;
    for (const StepCollective& c : step_collectives(l, s, 64)) {
      bytes += collective_cost(c.collective, CollectiveAlgorithm::kRing, 64, c.bytes, c.element_bytes, link)
                   .wire_bytes_per_rank;
    }
    return bytes;
  };
  const double ddp = wire(ZeroStage::kNone);
  EXPECT_DOUBLE_EQ(ddp, 2.0 * 63 / 64 * 2 * 7.5e9);
  EXPECT_DOUBLE_EQ(wire(ZeroStage::kOptimizer), ddp);
  EXPECT_DOUBLE_EQ(wire(ZeroStage::kGradients), ddp);
  EXPECT_DOUBLE_EQ(wire(ZeroStage::kParameters), 1.5 * ddp);
  EXPECT_TRUE(step_collectives(l, ZeroStage::kParameters, 1).empty());
}

TEST(ShardingTest, StageNamesIncludeFsdps) {
  EXPECT_EQ(zero_stage_from_name("full_shard"), ZeroStage::kParameters);
  EXPECT_EQ(zero_stage_from_name("shard_grad_op"), ZeroStage::kGradients);
  EXPECT_EQ(zero_stage_from_name("ddp"), ZeroStage::kNone);
  EXPECT_FALSE(zero_stage_from_name("zero4").has_value());
  EXPECT_THROW(shard_model_states(paper_model(), ZeroStage::kNone, 0), Error);
}

}  // namespace
}  // namespace neuralcost
