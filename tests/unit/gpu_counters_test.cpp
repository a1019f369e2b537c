// Counter arithmetic (FLOPs = fadd + fmul + 2 ffma, tensor instructions by their weights), the
// counter record, and kernels mapped to layers by the ranges that enclose their launches, on
// tests/inputs/gpu/counters_handwritten.json: a hand-written record with invented counts (no GPU
// run has recorded one yet), built so that every rule has a case.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "neuralcost/core/error.hpp"
#include "neuralcost/gpu/kernel_counters.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CounterRecord fixture() {
  std::ifstream in(std::string(NEURALCOST_TEST_INPUTS) + "/gpu/counters_handwritten.json");
  std::stringstream s;
  s << in.rdbuf();
  return parse_counter_record(s.str(), "counters_handwritten.json");
}

TEST(GpuCountersTest, FlopsAreFaddPlusFmulPlusTwoFfma) {
  KernelCounters k;
  k.fadd = 3;
  k.fmul = 5;
  k.ffma = 7;
  k.dadd = 1;
  k.dfma = 2;
  const KernelFlops f = kernel_flops(k);
  EXPECT_DOUBLE_EQ(f.fp32, 3 + 5 + 2 * 7);
  EXPECT_DOUBLE_EQ(f.fp64, 1 + 2 * 2);
  EXPECT_DOUBLE_EQ(f.total(), 22 + 5);
}

TEST(GpuCountersTest, TensorInstructionsCountTwoMnkEach) {
  // mma.m16n8k16: 16 x 8 x 16 multiply-adds per warp instruction
  EXPECT_DOUBLE_EQ(find_tensor_instruction("HMMA.16816.F32.BF16")->flops, 4096);
  EXPECT_DOUBLE_EQ(find_tensor_instruction("HMMA.1684.F32.TF32")->flops, 1024);
  EXPECT_DOUBLE_EQ(find_tensor_instruction("DMMA.884")->flops, 512);
  // measured on an H200: the profiler counts a warpgroup's HGMMA once per warp, 4 times
  EXPECT_DOUBLE_EQ(find_tensor_instruction("HGMMA.64x128x16.F32.BF16")->flops, 2.0 * 64 * 128 * 16 / 4);
  EXPECT_EQ(find_tensor_instruction("HGMMA.64x128x16.F32.BF16")->counted, "warp");
  // the measurement itself: a 4096^3 bf16 GEMM (m64n128k16) executed 2,097,152 HGMMA
  EXPECT_DOUBLE_EQ(2097152 * find_tensor_instruction("HGMMA.64x128x16.F32.BF16")->flops, 2.0 * 4096 * 4096 * 4096);
  EXPECT_EQ(find_tensor_instruction("HMMA.9999"), nullptr);
  for (const TensorInstruction& t : tensor_instructions()) {
    EXPECT_GT(t.flops, 0) << t.name;
    EXPECT_FALSE(t.source.empty()) << t.name;
  }
  KernelCounters k;
  k.tensor = {{"HMMA.16816.F32.BF16", 10}, {"HMMA.new.shape", 3}, {"HMMA.1688.F32", 0}};
  const KernelFlops f = kernel_flops(k);
  EXPECT_DOUBLE_EQ(f.tensor, 40960);
  EXPECT_THAT(f.unweighted, ElementsAre("HMMA.new.shape"));  // named, not guessed; a zero count is no loss
}

TEST(GpuCountersTest, KernelsGoToTheOutermostRangeAroundTheirLaunch) {
  const CounterRecord rec = fixture();
  EXPECT_THAT(rec.source, HasSubstr("hand-written"));
  const KernelAttribution a = attribute_kernels(rec);
  ASSERT_EQ(a.layers.size(), 5u);
  EXPECT_EQ(a.layers[0].name, "aten::conv2d");
  EXPECT_EQ(a.layers[1].name, "aten::batch_norm");
  EXPECT_EQ(a.layers[2].name, "aten::relu");
  EXPECT_EQ(a.layers[3].name, "aten::linear");
  EXPECT_EQ(a.layers[4].name, "aten::relu#2");  // the second instance of a range is its own row
  const LayerCounters& conv = a.layers[0];
  EXPECT_EQ(conv.kernels, 2);  // the convolution and its layout conversion, both launched inside conv2d
  EXPECT_DOUBLE_EQ(conv.tensor_flops, 57624.0 * 4096);
  EXPECT_DOUBLE_EQ(conv.flops, 57624.0 * 4096 + 802816 + 150528);
  EXPECT_DOUBLE_EQ(conv.dram_bytes(), 1200000 + 1605632 + 301056 + 301056);
  EXPECT_NEAR(conv.kernel_seconds, 11e-6, 1e-15);
  EXPECT_NEAR(*conv.arithmetic_intensity(), conv.flops / conv.dram_bytes(), 1e-9);
  EXPECT_DOUBLE_EQ(a.layers[1].flops, 4.0 * 802816);  // batch norm: fadd + fmul + 2 ffma
  EXPECT_DOUBLE_EQ(a.layers[2].flops, 0);             // relu is max(), not an FP add/mul/fma
  EXPECT_DOUBLE_EQ(a.layers[3].flops, 10 * 2.0 * 64 * 128 * 16 / 4);
  EXPECT_THAT(a.layers[3].unweighted, ElementsAre("HGMMA.64x96x16.F32.BF16"));
  // launched outside every range of its thread (thread 2's range does not count), and no launch at all
  ASSERT_EQ(a.unattributed.size(), 2u);
  EXPECT_THAT(a.unattributed[0], HasSubstr("memcpy_outside (correlation id 6): launched outside every range"));
  EXPECT_THAT(a.unattributed[1], HasSubstr("orphan_kernel (correlation id 99): no launch"));
  EXPECT_DOUBLE_EQ(a.unattributed_flops, 10 + 2 * 5);
}

TEST(GpuCountersTest, InnermostLevelGivesTheOpThatLaunched) {
  const KernelAttribution a = attribute_kernels(fixture(), RangeLevel::kInnermost);
  EXPECT_EQ(a.layers[0].name, "aten::cudnn_convolution");
  EXPECT_EQ(a.layers[0].kernels, 2);
}

TEST(GpuCountersTest, MeasuredLayersSitBesideCountedOnesOnTheRoofline) {
  const KernelAttribution a = attribute_kernels(fixture());
  const HardwareSpec* h200 = HardwareDatabase::builtin().find("h200-sxm");
  ASSERT_NE(h200, nullptr);
  const std::vector<LayerComparison> rows = compare_layers(
      a, {{"aten::conv2d", 57624.0 * 4096, 3.0e6}, {"aten::batch_norm", 3211264, 3.2e6}, {"aten::missing", 5, 5}}, h200,
      DType::kBf16);
  ASSERT_EQ(rows.size(), 6u);  // three counted, then relu, linear and relu#2 measured only
  const LayerComparison& conv = rows[0];
  EXPECT_NEAR(*conv.flops_ratio, (57624.0 * 4096 + 802816 + 150528) / (57624.0 * 4096), 1e-12);
  const double intensity = *conv.measured_flops / *conv.measured_dram_bytes;
  EXPECT_NEAR(*conv.measured_intensity, intensity, 1e-9);
  // memory-bound at this intensity: intensity x 4.8 TB/s is below the bf16 peak
  EXPECT_NEAR(*conv.attainable_flops_per_second, intensity * 4.8e12, 1);
  EXPECT_NEAR(*conv.efficiency, (*conv.measured_flops / 11e-6) / (intensity * 4.8e12), 1e-9);
  EXPECT_DOUBLE_EQ(*rows[1].flops_ratio, 1.0);
  EXPECT_FALSE(rows[2].measured_flops);  // counted, never measured
  EXPECT_EQ(rows[3].name, "aten::relu");
  EXPECT_FALSE(rows[3].counted_flops);
  EXPECT_DOUBLE_EQ(*rows[3].measured_intensity, 0);  // DRAM bytes but no FP add/mul/fma
}

TEST(GpuCountersTest, MalformedRecordsAreRefusedNamingTheField) {
  auto refuse = [](const std::string& text, const std::string& message) {
    try {
      parse_counter_record(text, "rec.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  const std::string head = R"({"format": "neuralcost-gpu-counters", "version": 1, "source": "x", "device": "d", )";
  refuse("[]", "rec.json: the document must be an object");
  refuse(R"({"format": "other"})", "rec.json: format must be \"neuralcost-gpu-counters\"");
  refuse(R"({"format": "neuralcost-gpu-counters", "version": 7})",
         "rec.json: version must be 1 (the only version this reads)");
  refuse(head + R"("ranges": [{"name": "a", "start_ns": 5, "end_ns": 1}], "launches": [], "kernels": []})",
         "rec.json: ranges[0] ends before it starts");
  refuse(
      head +
          R"("ranges": [], "launches": [{"correlation_id": 1, "start_ns": 1}, {"correlation_id": 1, "start_ns": 2}], "kernels": []})",
      "rec.json: launches[1].correlation_id repeats an earlier launch's");
  refuse(
      head + R"("ranges": [], "launches": [], "kernels": [{"name": "k", "correlation_id": 1, "start_ns": 0, "end_ns": 1,
         "dram_bytes_read": -4, "dram_bytes_written": 0}]})",
      "rec.json: kernels[0].dram_bytes_read must be a non-negative number");
  refuse(
      head + R"("ranges": [], "launches": [], "kernels": [{"name": "k", "correlation_id": 1, "start_ns": 0, "end_ns": 1,
         "dram_bytes_written": 0}]})",
      "rec.json: kernels[0].dram_bytes_read is missing");
  refuse(head + R"("ranges": [], "launches": []})", "rec.json: kernels must be an array");
}

}  // namespace
}  // namespace neuralcost
