// The GPU path on what a real GPU recorded: bench/gpu_check.sh on an NVIDIA H200 (driver
// 580.159.04, CUDA 13.0, torch 2.11, 2026-12-04; tests/inputs/gpu/README.md says which file is
// which). These tests read the recorded answers on machines without a GPU: the plugin's
// ceilings beside the datasheet and beside PyTorch's own kernels, the counters on kernels of known
// work, Nsight Compute's counts of cuBLAS kernels, a power record, and a profile on cuda:0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "neuralcost/calibrate/gpu_calibration.hpp"
#include "neuralcost/gpu/kernel_counters.hpp"
#include "neuralcost/gpu/power.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/report/results.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

std::string recorded(const std::string& name) {
  std::ifstream in(std::string(NEURALCOST_TEST_INPUTS) + "/gpu/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

GpuCalibration h200_calibration() {
  const HardwareSpec* h200 = HardwareDatabase::builtin().find("h200-sxm");
  EXPECT_NE(h200, nullptr);
  GpuCalibration c = parse_gpu_calibration(recorded("h200_calibration_plugin.json"), h200, "h200");
  c.device = "cuda:0";
  return c;
}

const GpuCeiling& ceiling(const GpuCalibration& c, const std::string& name) {
  const auto it =
      std::find_if(c.ceilings.begin(), c.ceilings.end(), [&](const GpuCeiling& g) { return g.name == name; });
  EXPECT_NE(it, c.ceilings.end()) << name;
  return *it;
}

TEST(GpuRecordedTest, EveryMeasuredH200CeilingLiesBelowItsDatasheet) {
  const GpuCalibration c = h200_calibration();
  EXPECT_EQ(c.gpu_name, "NVIDIA H200");
  EXPECT_EQ(c.compute_capability, "9.0");
  ASSERT_EQ(c.ceilings.size(), 11u);
  for (const GpuCeiling& g : c.ceilings) {
    EXPECT_FALSE(g.above_datasheet) << g.name;
    if (g.ratio && g.unit != "s") {
      EXPECT_GT(*g.ratio, 0.5) << g.name;
      EXPECT_LE(*g.ratio, 1.0) << g.name;
    }
  }
  // the criteria: a copy reaches 85 % of 4.8 TB/s, a bf16 GEMM 70 % of 989.5 TFLOP/s
  EXPECT_GE(*ceiling(c, "hbm_memcpy").ratio, 0.85);
  EXPECT_GE(*ceiling(c, "gemm_bf16").ratio, 0.70);
  // the launch floor was measured above the 3 µs estimate of the built-in spec
  EXPECT_GT(ceiling(c, "launch_floor").measured, 3e-6);
  EXPECT_LT(ceiling(c, "launch_floor").measured, 10e-6);
}

TEST(GpuRecordedTest, ThePluginsCeilingsAgreeWithPyTorchsOwnKernels) {
  // an independent measurement of the same ceilings through PyTorch and cuBLAS (bench/gpu_torch_probe.py):
  // with the GEMM inputs a constant byte pattern, the plugin's bf16 figure was 13 % above PyTorch's
  const GpuCalibration c = h200_calibration();
  const nlohmann::json probe = nlohmann::json::parse(recorded("h200_torch_probe.json"))["ceilings"];
  const std::map<std::string, std::string> pairs = {{"gemm_bf16", "gemm_bf16_flops_per_second"},
                                                    {"gemm_fp16", "gemm_fp16_flops_per_second"},
                                                    {"gemm_tf32", "gemm_tf32_flops_per_second"},
                                                    {"hbm_memcpy", "hbm_copy_bytes_per_second"}};
  for (const auto& [ours, theirs] : pairs) {
    const double ratio = ceiling(c, ours).measured / probe[theirs].get<double>();
    EXPECT_NEAR(ratio, 1.0, 0.05) << ours;
  }
}

TEST(GpuRecordedTest, TheMeasuredSpecTakesTheFastestCopy) {
  const GpuCalibration c = h200_calibration();
  const HardwareSpec s = measured_gpu_spec(*HardwareDatabase::builtin().find("h200-sxm"), c);
  EXPECT_DOUBLE_EQ(s.memory_bandwidth_bytes_per_second, ceiling(c, "hbm_memcpy").measured);
  EXPECT_THAT(s.sources.at("memory_bandwidth_bytes_per_second"), HasSubstr("hbm_memcpy"));
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), ceiling(c, "gemm_bf16").measured);
  EXPECT_DOUBLE_EQ(*s.kernel_launch_seconds, ceiling(c, "launch_floor").measured);
}

TEST(GpuRecordedTest, CountersOnKernelsOfKnownWorkAreWithinTwoPercent) {
  const std::vector<CounterCheck> checks = parse_counter_check(recorded("h200_counter_check.json"), "h200");
  ASSERT_EQ(checks.size(), 5u);
  int compared = 0;
  for (const CounterCheck& k : checks) {
    if (!k.ratio) {
      EXPECT_EQ(k.measured, 0) << k.kernel << " " << k.quantity;  // a copy executes no FP instruction
      continue;
    }
    EXPECT_NEAR(*k.ratio, 1.0, 0.02) << k.kernel << " " << k.quantity;
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

/// Nsight Compute's CSV (--csv --metrics ...): metric values by kernel id.
std::map<std::string, std::map<std::string, double>> ncu_kernels(const std::string& csv,
                                                                 std::map<std::string, std::string>& names) {
  std::map<std::string, std::map<std::string, double>> out;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '"' || line.rfind("\"ID\"", 0) == 0) continue;
    std::vector<std::string> f;
    for (std::size_t i = 0; i < line.size();) {
      const std::size_t end = line.find('"', i + 1);
      f.push_back(line.substr(i + 1, end - i - 1));
      i = end + 2;
    }
    std::string value = f.back();
    value.erase(std::remove(value.begin(), value.end(), ','), value.end());
    names[f[0]] = f[4];
    out[f[0]][f[12]] = std::stod(value);
  }
  return out;
}

TEST(GpuRecordedTest, NsightComputeCountsCublasSgemmAsTwoFlopsPerFfma) {
  // an independent check of the FLOP formula (fadd + fmul + 2 ffma) on a kernel we did not write:
  // cuBLAS's fp32 SGEMM of 2048^3 (TF32 off) under ncu
  std::map<std::string, std::string> names;
  const auto kernels = ncu_kernels(recorded("h200_ncu_probe.csv"), names);
  bool seen = false;
  for (const auto& [id, m] : kernels) {
    if (names[id].find("sgemm") == std::string::npos) continue;
    KernelCounters k;
    k.fadd = m.at("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum");
    k.fmul = m.at("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum");
    k.ffma = m.at("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum");
    const double flops = kernel_flops(k).fp32;
    EXPECT_NEAR(flops / (2.0 * 2048 * 2048 * 2048), 1.0, 1e-3);  // + alpha's 2048^2 multiplies
    EXPECT_DOUBLE_EQ(k.ffma, 2048.0 * 2048 * 2048);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

TEST(GpuRecordedTest, ARecordedPowerPhaseIntegratesWithinItsReadings) {
  const PowerRecord r = parse_power_record(recorded("h200_power_cnn.json"), "h200_power_cnn.json");
  EXPECT_THAT(r.source, HasSubstr("NVML"));
  const PowerSummary s = summarize_power(r);
  ASSERT_TRUE(s.average_watts && s.energy_per_pass_joules);
  double lo = 1e9, hi = 0;
  for (const PowerSample& p : r.samples) {
    lo = std::min(lo, p.watts);
    hi = std::max(hi, p.watts);
  }
  EXPECT_GE(*s.average_watts, lo);
  EXPECT_LE(*s.average_watts, hi);
  EXPECT_NEAR(*s.energy_per_pass_joules * r.passes, *s.average_watts * (r.end_seconds - r.start_seconds), 1e-6);
  EXPECT_LE(*s.average_watts, 700.0);  // the H200's power limit in this run
}

TEST(GpuRecordedTest, AProfileOnTheH200StaysUnderItsFusedBound) {
  const ResultsFile f = read_results(std::string(NEURALCOST_TEST_INPUTS) + "/gpu/h200_profile_resnet18.json");
  ASSERT_EQ(f.runs.size(), 2u);  // eager and torch.compile
  for (const ResultRun& run : f.runs) {
    EXPECT_EQ(run.contract.at("gpu.name"), "NVIDIA H200");
    EXPECT_THAT(run.contract.at("cuda_tf32"), HasSubstr("off"));  // fp32 measured against the fp32 roof
    EXPECT_GT(run.fused_efficiency, 0.0);
    EXPECT_LE(run.fused_efficiency, 1.0);
  }
}

TEST(GpuRecordedTest, ADecodeStepOnTheH200IsNeverFasterThanItsBoundOrItsLaunchFloor) {
  // `profile data/decoders/smollm2-135m.json --phase decode --context 512 --batch 1,8 --dtype bf16
  // --backend torch --device cuda:0 --mode eager,compiled --budget 3` (bench/gpu_check.sh, group
  // decoder; per-op rows dropped): transformers 5.17 in Python launches a kernel per op, so the step
  // takes 20-33 ms where its roofline bound is 64-120 us and its launch floor 1.6 ms
  const std::string path = std::string(NEURALCOST_TEST_INPUTS) + "/gpu/h200_profile_decoder.json";
  const ResultsFile f = read_results(path);
  ASSERT_EQ(f.runs.size(), 4u);  // eager and compiled at batch 1 and 8
  const nlohmann::json doc = nlohmann::json::parse(recorded("h200_profile_decoder.json"));
  for (std::size_t i = 0; i < f.runs.size(); ++i) {
    const ResultRun& run = f.runs[i];
    EXPECT_EQ(run.contract.at("gpu.name"), "NVIDIA H200");
    EXPECT_THAT(run.contract.at("model_sizes"), HasSubstr("decode of 1 token per sequence over a KV cache of 512"));
    EXPECT_EQ(run.contract.at("dtype"), "bf16");
    EXPECT_GT(run.fused_efficiency, 0.0);
    EXPECT_LT(run.fused_efficiency, 0.01);  // under 1 %: the GPU waits for the host
    const double floor = doc.at("runs")[i].at("totals").at("launch_floor").at("fused_floor_seconds").get<double>();
    EXPECT_GT(floor, 1e-3);                     // 549 kernels after fusion, 3 us each
    EXPECT_GT(run.ci95_low_seconds, floor);     // slower than the floor in every round
    EXPECT_GT(run.median_seconds, 10 * floor);  // and by far: the host's Python sets the pace
  }
}

TEST(GpuRecordedTest, RoundsOfASecondOrMoreCarryPlausiblePower) {
  // `profile --model cnn,transformer --backend torch --device cuda:0 --batch 256 --rounds 6 --budget 8
  // --target-ci 0.0001` on the H200: rounds of about 1.3 s, long enough for NVML's averages
  const nlohmann::json doc = nlohmann::json::parse(recorded("h200_profile_power.json"));
  ASSERT_EQ(doc.at("runs").size(), 2u);
  for (const nlohmann::json& run : doc.at("runs")) {
    std::map<std::string, double> c;
    for (const nlohmann::json& k : run.at("counters")) c[k.at("name").get<std::string>()] = k.at("value").get<double>();
    ASSERT_TRUE(c.count("gpu_power_average_watts") && c.count("gpu_power_peak_watts")) << run.at("model");
    EXPECT_GT(c["gpu_power_average_watts"], 100.0);  // above an idle H200's draw
    EXPECT_LE(c["gpu_power_average_watts"], 700.0);  // the power limit of this run
    EXPECT_GE(c["gpu_power_peak_watts"], c["gpu_power_average_watts"]);
    EXPECT_GT(c["gpu_power_samples"], 50.0);
    // energy per sample is energy per pass over the batch
    EXPECT_NEAR(c["gpu_energy_per_sample_joules"] * 256, c["gpu_energy_per_pass_joules"],
                1e-9 * c["gpu_energy_per_pass_joules"]);
  }
}

}  // namespace
}  // namespace neuralcost
