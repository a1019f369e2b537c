// A data-parallel step: DDP's buckets on the link's timeline, ZeRO's collectives and shards, and
// the layouts that cannot be.
#include "neuralcost/parallel/data_parallel.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/calibrate/data_parallel_check.hpp"
#include "neuralcost/calibrate/pipeline_parallel_check.hpp"
#include "neuralcost/calibrate/tensor_parallel_check.hpp"

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/parallel/link_time.hpp"
#include "neuralcost/parallel/model_parallel.hpp"

namespace neuralcost {
namespace {

TrainingReport transformer_step(std::int64_t batch = 8) {
  ReferenceOptions o;
  o.model = "transformer";
  o.batch = batch;
  TrainingOptions t;
  t.precision = Precision::kBf16Mixed;
  o.dtype = DType::kBf16;
  OpGraph forward = build_reference_model(o);
  forward.set_batch(batch);  // as the reference importer does
  return training_report(forward, HardwareDatabase::builtin().get("h100-sxm"), t);
}

/// `ring`: NCCL without NVLS (the ring's bytes on the wire)
DataParallelRequest on(const std::string& system, int ranks, ZeroStage stage = ZeroStage::kNone, bool ring = false) {
  DataParallelRequest r;
  r.ranks = ranks;
  r.stage = stage;
  r.system = find_system(system);
  r.intra = find_interconnect(r.system.intra_node);
  r.inter = find_interconnect(r.system.inter_node);
  if (ring) {
    r.intra.in_network_reduction = false;
    r.intra.in_network_bus_bandwidth_bytes_per_second.reset();
  }
  return r;
}

TEST(DataParallelTest, OneDeviceIsTheStepItself) {
  const TrainingReport report = transformer_step();
  const DataParallelStep s = data_parallel_step(report, on("dgx-h100", 1));
  EXPECT_TRUE(s.communication.empty());
  EXPECT_EQ(s.exposed_seconds, 0.0);
  EXPECT_NEAR(s.step_seconds, report.step.totals.fused_lower_bound_seconds, 1e-12);
  EXPECT_GT(s.forward_seconds, 0.0);
  EXPECT_GT(s.backward_seconds, s.forward_seconds);
  // one device: the ledger's own interval
  EXPECT_EQ(s.memory_lower_bytes, report.memory.total_bytes(MemoryBound::kLower));
  EXPECT_EQ(s.memory_upper_bytes, report.memory.total_bytes(MemoryBound::kUpper));
}

TEST(DataParallelTest, ASearchRanksWhatFitsBySamplesPerSecond) {
  std::vector<TrainingReport> reports = {transformer_step(4), transformer_step(64)};
  const auto ranked = rank_data_parallel(reports, on("dgx-h100", 8));
  ASSERT_EQ(ranked.size(), 8u);  // 4 stages × 2 batches
  for (std::size_t i = 1; i < ranked.size(); ++i) {
    if (ranked[i].step.fit() == ranked[i - 1].step.fit()) {
      EXPECT_LE(ranked[i].step.samples_per_second(), ranked[i - 1].step.samples_per_second());
    }
  }
  EXPECT_EQ(ranked.front().step.fit(), "fits");
}

TEST(DataParallelTest, DdpAllReducesEveryGradientOnceInBuckets) {
  const TrainingReport report = transformer_step();
  DataParallelRequest r = on("dgx-h100", 8, ZeroStage::kNone, true);
  r.first_bucket_bytes = r.bucket_bytes = 64 * 1024;  // a small model: several buckets
  const DataParallelStep s = data_parallel_step(report, r);
  ASSERT_EQ(s.communication.size(), 1u);
  const StepCommunication& c = s.communication[0];
  EXPECT_EQ(c.collective.collective, Collective::kAllReduce);
  EXPECT_GT(c.calls, 3);
  // every gradient byte once: 2 (n − 1) / n of the bf16 gradients on the wire
  EXPECT_NEAR(c.wire_bytes_per_rank, 1.75 * report.memory.gradient_bytes, 1e-6 * report.memory.gradient_bytes);
  EXPECT_EQ(report.memory.gradient_bytes, 2 * report.memory.parameter_count);
  EXPECT_LE(c.exposed_seconds, c.seconds + 1e-15);
  EXPECT_GT(c.exposed_seconds, 0.0);  // at least the last bucket waits
  EXPECT_NEAR(s.step_seconds, s.compute_seconds + s.exposed_seconds, 1e-15);
  EXPECT_EQ(s.bucket_copy_bytes, report.memory.gradient_bytes);
  // with NVLS each device sends its gradients once
  const DataParallelStep nvls = data_parallel_step(report, on("dgx-h100", 8));
  EXPECT_EQ(nvls.communication[0].basis, "model, in-network");
  EXPECT_NEAR(nvls.communication[0].wire_bytes_per_rank, report.memory.gradient_bytes, 1);
}

// The step's precision, not the graph's dtype, sets what the gradients weigh: an fp32 step of a
// bf16 graph keeps 4-byte gradients, and its buckets reduce those 4 bytes (not the graph's 2).
TEST(DataParallelTest, TheGradientsOnTheWireAreTheLedgersGradients) {
  ReferenceOptions o;
  o.model = "transformer";
  o.batch = 8;
  o.dtype = DType::kBf16;
  OpGraph forward = build_reference_model(o);
  forward.set_batch(8);
  TrainingOptions fp32;
  fp32.precision = Precision::kFp32;
  const TrainingReport report = training_report(forward, HardwareDatabase::builtin().get("h100-sxm"), fp32);
  ASSERT_EQ(report.memory.gradient_bytes, 4 * report.memory.parameter_count);
  const DataParallelStep s = data_parallel_step(report, on("dgx-h100", 8, ZeroStage::kNone, true));
  ASSERT_EQ(s.communication.size(), 1u);
  EXPECT_NEAR(s.communication[0].wire_bytes_per_rank, 1.75 * report.memory.gradient_bytes,
              1e-6 * report.memory.gradient_bytes);
}

TEST(DataParallelTest, OneBucketAtTheEndExposesAllOfItsTime) {
  const TrainingReport report = transformer_step();
  DataParallelRequest r = on("dgx-h100", 8);
  r.first_bucket_bytes = r.bucket_bytes = 1e12;
  const DataParallelStep s = data_parallel_step(report, r);
  ASSERT_EQ(s.communication[0].calls, 1);
  // its last gradient is written by the backward pass's last weight-gradient op: nothing overlaps
  EXPECT_GT(s.communication[0].exposed_seconds, 0.5 * s.communication[0].seconds);
  // smaller buckets start sooner: on a link without latency they expose less; with NVLink's
  // latency per call, this small model's 16 KiB buckets pay more in latency than they hide
  DataParallelRequest small = on("dgx-h100", 8);
  small.first_bucket_bytes = small.bucket_bytes = 16 * 1024;
  DataParallelRequest big = on("dgx-h100", 8);
  big.first_bucket_bytes = big.bucket_bytes = 1e12;
  for (DataParallelRequest* q : {&small, &big}) {
    q->intra.latency_seconds = 0;
    q->intra.in_network_reduction = false;
    q->intra.in_network_bus_bandwidth_bytes_per_second.reset();
  }
  EXPECT_LT(data_parallel_step(report, small).exposed_seconds, data_parallel_step(report, big).exposed_seconds);
  EXPECT_GT(data_parallel_step(report, on("dgx-h100", 8)).communication_seconds, 0.0);
  DataParallelRequest latency = on("dgx-h100", 8);
  latency.first_bucket_bytes = latency.bucket_bytes = 16 * 1024;
  EXPECT_GT(data_parallel_step(report, latency).communication_seconds, s.communication_seconds);
}

TEST(DataParallelTest, ZeroStagesShrinkMemoryAndZeroThreeMovesMore) {
  const TrainingReport report = transformer_step();
  double previous = 1e300;
  double ddp_wire = 0;
  for (ZeroStage stage : {ZeroStage::kNone, ZeroStage::kOptimizer, ZeroStage::kGradients, ZeroStage::kParameters}) {
    const DataParallelStep s = data_parallel_step(report, on("dgx-h100", 8, stage, true));
    EXPECT_LT(s.states.model_state_bytes(), previous) << zero_stage_name(stage);
    previous = s.states.model_state_bytes();
    double wire = 0;
    for (const auto& c : s.communication) wire += c.wire_bytes_per_rank;
    if (stage == ZeroStage::kNone) ddp_wire = wire;
    if (stage == ZeroStage::kParameters) {
      EXPECT_NEAR(wire, 1.5 * ddp_wire, 1e-6 * ddp_wire);
      EXPECT_GT(s.states.gathered_parameter_bytes, 0u);
    } else {
      EXPECT_NEAR(wire, ddp_wire, 1e-6 * ddp_wire);
    }
    EXPECT_LE(s.memory_lower_bytes, s.memory_upper_bytes);
  }
}

TEST(DataParallelTest, AcrossNodesTheGradientsTakeTheNicsAndAreSlower) {
  const TrainingReport report = transformer_step();
  const DataParallelStep one = data_parallel_step(report, on("dgx-h100", 8));
  const DataParallelStep two = data_parallel_step(report, on("dgx-h100", 16));
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.per_node, 8);
  EXPECT_EQ(two.communication[0].basis, "model, hierarchical");
  EXPECT_GT(two.communication_seconds, one.communication_seconds);
  EXPECT_NEAR(two.samples_per_second() / one.samples_per_second(), 2.0 * one.step_seconds / two.step_seconds, 1e-9);
}

TEST(DataParallelTest, LayoutsThatDoNotDivideAreRefused) {
  const TrainingReport report = transformer_step();
  EXPECT_THROW(data_parallel_step(report, on("dgx-h100", 12)), Error);
  EXPECT_THROW(data_parallel_step(report, on("dgx-h100", 0)), Error);
  EXPECT_EQ(parse_parallel_layout("dp=8").dp, 8);
  EXPECT_EQ(parse_parallel_layout("dp=4,tp=1,pp=1").dp, 4);
  EXPECT_EQ(parse_parallel_layout("tp=2").tp, 2);
  EXPECT_EQ(parse_parallel_layout("dp=4,pp=2").pp, 2);
  EXPECT_EQ(parse_parallel_layout("dp=4,ep=2").ep, 2);  // checked against the model by model_parallel_step
  for (const char* bad : {"", "dp", "dp=0", "dp=x", "dp=2,zz=3", "ep=0", "dp=2.5", "pp=0", "dp=2,dp=4", "tp=8,tp=2"}) {
    EXPECT_THROW(parse_parallel_layout(bad), Error) << bad;
  }
  try {
    parse_parallel_layout("dp=8,ep=8,ep=2");
    ADD_FAILURE() << "a key given twice accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--parallel 'dp=8,ep=8,ep=2': ep is given twice");
  }
}

// The measured check's prediction (`profile --train --data-parallel`): where the ranks' compute
// fills the CPUs, gloo's collectives run on the same cores and hide behind nothing, so the whole
// link time is exposed; with a CPU of its own for each rank's communication, FSDP's gathers and
// reduce-scatters hide behind their passes but what exceeds them.
TEST(DataParallelTest, TheCheckExposesEveryCollectiveWhenTheRanksFillTheCpus) {
  for (const ZeroStage stage : {ZeroStage::kNone, ZeroStage::kParameters}) {
    DataParallelCheck c;
    c.request.model = "transformer";
    c.request.batch = 32;
    c.request.ranks = 2;
    c.request.stage = stage;
    c.request.link = find_interconnect(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json");
    c.request.hardware = HardwareDatabase::builtin().get("epyc-9654");
    c.compute.median = 0.030;
    if (stage == ZeroStage::kParameters) c.units = {16384, 65536, 65536, 8192};
    c.request.cpus = 2;
    predict_data_parallel(c);
    const std::string name(zero_stage_name(stage));
    EXPECT_GT(c.predicted_link_seconds, 0) << name;
    EXPECT_DOUBLE_EQ(c.predicted_exposed_seconds, c.predicted_link_seconds) << name;
    EXPECT_DOUBLE_EQ(c.predicted_step_seconds, 0.030 + c.predicted_link_seconds) << name;
    EXPECT_THAT(::testing::PrintToString(c.notes), ::testing::HasSubstr("no overlap: the 2 ranks")) << name;
    const double link = c.predicted_link_seconds;
    c.request.cpus = 4;
    c.notes.clear();
    predict_data_parallel(c);
    EXPECT_DOUBLE_EQ(c.predicted_link_seconds, link) << name;  // the same collectives, hidden or not
    EXPECT_EQ(c.predicted_calls > 0 && (stage != ZeroStage::kParameters || c.predicted_calls == 12), true) << name;
    EXPECT_LE(c.predicted_exposed_seconds, c.predicted_link_seconds) << name;
    if (stage == ZeroStage::kParameters) EXPECT_LT(c.predicted_exposed_seconds, c.predicted_link_seconds);
    EXPECT_THAT(::testing::PrintToString(c.notes), ::testing::Not(::testing::HasSubstr("no overlap"))) << name;
  }
}

// The tensor-parallel check's prediction (`profile --train --tensor-parallel`): the built-in
// 4-layer Llama at batch 4 × 128 tokens over 2 ranks makes 21 all-reduces a step (four a layer,
// the embedding's, the LM head's input gradient, three of the loss), 18 of 4 × 128 × 256 fp32
// values and 3 of 4 × 128, each on the calibrated link's measured segments; the step is the
// measured compute plus all of them; a rank's parameters are the shard's (hand count).
TEST(TensorParallelCheckTest, ThePredictionIsMegatronsCollectivesOnTheCalibratedLink) {
  TensorParallelCheck c;
  c.request.config = tensor_parallel_check_config("");
  c.request.link = find_interconnect(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json");
  check_tensor_parallel_request(c.request);
  c.compute.median = 0.1;
  predict_tensor_parallel(c);
  std::string basis;
  const auto reduce = [&](double bytes) {
    return in_node_cost(c.request.link, Collective::kAllReduce, 2, bytes, 4, basis).seconds();
  };
  EXPECT_EQ(c.predicted_calls, 21);
  EXPECT_NEAR(c.predicted_link_seconds, 18 * reduce(4.0 * 128 * 256 * 4) + 3 * reduce(4.0 * 128 * 4), 1e-12);
  EXPECT_EQ(basis.rfind("measured", 0), 0u) << basis;
  EXPECT_DOUBLE_EQ(c.predicted_step_seconds, 0.1 + c.predicted_link_seconds);
  // the vocabulary and LM head (4,096 / 2 rows each), per layer two norms, q (4 of 8 heads × 32),
  // k and v (2 of 4 KV heads × 32), o, gate, up and down (352 of 704 columns); the final norm
  const std::uint64_t layer = 2 * 256 + 256 * 128 + 2 * 256 * 64 + 128 * 256 + 3 * 256 * 352;
  EXPECT_EQ(c.predicted_parameters, 2u * 2048 * 256 + 4 * layer + 256);
  c.parameters = c.predicted_parameters + 1;
  c.notes.clear();
  predict_tensor_parallel(c);
  EXPECT_THAT(::testing::PrintToString(c.notes), ::testing::HasSubstr("they are not the same model"));
  // sequence parallelism: a reduce-scatter and an all-gather for each of the 18 all-reduces of the
  // hidden states, the loss's three as they were
  c.request.sequence_parallel = true;
  check_tensor_parallel_request(c.request);
  predict_tensor_parallel(c);
  const auto pair = [&](double bytes) {
    return in_node_cost(c.request.link, Collective::kReduceScatter, 2, bytes, 4, basis).seconds() +
           in_node_cost(c.request.link, Collective::kAllGather, 2, bytes, 4, basis).seconds();
  };
  EXPECT_EQ(c.predicted_calls, 39);
  EXPECT_NEAR(c.predicted_link_seconds, 18 * pair(4.0 * 128 * 256 * 4) + 3 * reduce(4.0 * 128 * 4), 1e-12);
  c.request.tokens = 127;
  EXPECT_THROW(check_tensor_parallel_request(c.request), Error);
}

TEST(TensorParallelCheckTest, DecodersTheWorkerDoesNotBuildAreOneClearError) {
  TensorParallelCheckRequest r;
  r.link = find_interconnect(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json");
  const auto error_of = [&](const std::string& model, int ranks) {
    r.model = model;
    r.config = tensor_parallel_check_config(model);
    r.ranks = ranks;
    try {
      check_tensor_parallel_request(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of("", 2), "accepted");
  // qwen3's q and k norms are built; 8B parameters in fp32 with their gradients are not on this machine
  EXPECT_THAT(error_of("qwen3-8b", 2), ::testing::StartsWith("qwen3-8b at this size needs about"));
  EXPECT_EQ(error_of("", 1), "--tensor-parallel 1: a tensor-parallel step needs at least 2 ranks");
  EXPECT_EQ(error_of("", 3),
            "--tensor-parallel 3: the built-in decoder has 8 attention heads, which 3 ranks do not share evenly (the "
            "worker replicates none)");
  EXPECT_EQ(error_of("mixtral-8x7b", 2),
            "--tensor-parallel runs Llama-family decoders split as Megatron-LM splits them; mixtral-8x7b has a "
            "mixture of experts");
  EXPECT_THAT(error_of("gpt2", 2), ::testing::HasSubstr("gpt2 has LayerNorm and an ungated MLP"));
  EXPECT_THAT(error_of("gemma-2-2b", 2), ::testing::HasSubstr("gemma2's extra norms and soft-caps"));
  EXPECT_THAT(error_of("deepseek-v2-lite", 2), ::testing::HasSubstr("has a mixture of experts"));
  r.tokens = 8192;
  EXPECT_EQ(error_of("", 2), "--prompt 8192: the built-in decoder has 2048 positions");
  r.tokens = 128;
  r.link = find_interconnect("nvlink4-nvswitch");
  EXPECT_THAT(error_of("", 2), ::testing::StartsWith("--link nvlink4-nvswitch has no measured all_reduce over 2"));
  EXPECT_THROW(tensor_parallel_check_config("not-a-model"), Error);
}

// The 1F1B schedule by hand: m × the busiest stage, the others' fill and drain (over v chunks
// interleaved), 2(v·pp − 1) + 2v(m − 1) transfers on the critical path; one stage, no transfer.
TEST(PipelineParallelCheckTest, TheScheduleIsTheBusiestStageTimesMPlusFillAndDrain) {
  const PipelineSchedule s = one_f_one_b({0.07, 0.12}, 4, 1, 0.001);
  EXPECT_NEAR(s.bubble_seconds, 0.07, 1e-15);
  EXPECT_NEAR(s.p2p_seconds, (2 * 1 + 2 * 3) * 0.001, 1e-15);
  EXPECT_NEAR(s.pipeline_seconds, 4 * 0.12 + 0.07 + 0.008, 1e-15);
  const PipelineSchedule interleaved = one_f_one_b({0.1, 0.1, 0.1, 0.1}, 8, 2, 0.001);
  EXPECT_NEAR(interleaved.bubble_seconds, 0.3 / 2, 1e-15);
  EXPECT_NEAR(interleaved.p2p_seconds, (2 * (2 * 4 - 1) + 2 * 2 * 7) * 0.001, 1e-15);
  const PipelineSchedule one = one_f_one_b({0.1}, 8, 1, 0.001);
  EXPECT_DOUBLE_EQ(one.pipeline_seconds, 0.8);
  EXPECT_DOUBLE_EQ(one.p2p_seconds, 0.0);
}

// The pipeline check's prediction: the schedule on the stages' measured passes a micro-batch plus
// the slowest optimizer step; 2(pp − 1)·m transfers of b × s × hidden fp32 values; each stage's
// parameters (the built-in Llama over 2 stages: the embedding and 2 layers, then 2 layers, the
// final norm and the LM head; tied embeddings give the last stage a copy and an all-reduce).
TEST(PipelineParallelCheckTest, ThePredictionIsTheScheduleOnTheStagesMeasuredWork) {
  PipelineParallelCheck c;
  c.request.config = tensor_parallel_check_config("");
  c.request.link = find_interconnect(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json");
  check_pipeline_parallel_request(c.request);
  c.stage_passes.push_back(round_figure({0.28, 0.30}));
  c.stage_passes.push_back(round_figure({0.48, 0.48}));
  c.stage_optimizer.push_back(round_figure({0.001}));
  c.stage_optimizer.push_back(round_figure({0.002}));
  predict_pipeline_parallel(c);
  std::string basis;
  const double each = in_node_cost(c.request.link, Collective::kSendRecv, 2, 4.0 * 128 * 256 * 4, 4, basis).seconds();
  EXPECT_NEAR(c.predicted_bubble_seconds, 0.29 / 4, 1e-12);
  EXPECT_NEAR(c.predicted_p2p_seconds, 8 * each, 1e-12);
  EXPECT_NEAR(c.predicted_step_seconds, 0.48 + 0.29 / 4 + 8 * each + 0.002, 1e-12);
  // the busiest stage's work alone (passes and optimizer) taken off, as from the measured step
  EXPECT_NEAR(c.predicted_overhead_seconds, c.predicted_step_seconds - (0.48 + 0.002), 1e-12);
  EXPECT_FALSE(c.overhead_error().has_value());  // nothing measured: no error to give
  EXPECT_EQ(c.predicted_transfers, 8);
  EXPECT_DOUBLE_EQ(c.predicted_transfer_bytes, 4.0 * 128 * 256 * 4);
  const std::uint64_t layer = 2 * 256 + 256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 704;
  ASSERT_EQ(c.predicted_parameters.size(), 2u);
  EXPECT_EQ(c.predicted_parameters[0], 4096u * 256 + 2 * layer);
  EXPECT_EQ(c.predicted_parameters[1], 2 * layer + 256 + 4096u * 256);
  EXPECT_DOUBLE_EQ(c.predicted_tied_seconds, 0.0);
  c.request.config.tied_embeddings = true;
  c.notes.clear();
  predict_pipeline_parallel(c);
  EXPECT_EQ(c.predicted_parameters[1], 2 * layer + 256 + 4096u * 256);  // the LM head's copy
  EXPECT_GT(c.predicted_tied_seconds, 0.0);
  EXPECT_NEAR(c.predicted_step_seconds, 0.48 + 0.29 / 4 + 8 * each + 0.002 + c.predicted_tied_seconds, 1e-12);
}

TEST(PipelineParallelCheckTest, LayoutsThatDoNotSplitAreOneClearError) {
  PipelineParallelCheckRequest r;
  r.config = tensor_parallel_check_config("");
  r.link = find_interconnect(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json");
  const auto error_of = [&](int ranks) {
    r.ranks = ranks;
    try {
      check_pipeline_parallel_request(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of(4), "accepted");
  EXPECT_EQ(error_of(1), "--pipeline-parallel 1: a pipeline needs at least 2 stages");
  EXPECT_EQ(error_of(3),
            "--pipeline-parallel 3: the built-in decoder has 4 layers, which 3 stages do not share evenly");
  r.micro_batches = 0;
  EXPECT_EQ(error_of(2), "--micro-batches 0: at least 1");
  r.micro_batches = 4;
  r.model = "mixtral-8x7b";
  r.config = tensor_parallel_check_config(r.model);
  EXPECT_EQ(error_of(2), "--pipeline-parallel runs Llama-family decoders; mixtral-8x7b has a mixture of experts");
}

}  // namespace
}  // namespace neuralcost
