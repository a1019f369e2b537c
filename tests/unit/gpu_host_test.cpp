// The GPU path's host side on a machine without a GPU: CUDA detection when the driver library is
// absent, is the toolkit's stub or is not a driver; NVML absent; the CUDA contract fields, their
// text and their warnings (filled by hand: no GPU run has recorded one yet); the plugin's
// calibration answer beside the datasheet (a hand-written answer); the launch floor term; and the
// errors of --device cuda:N here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "neuralcost/calibrate/gpu_calibration.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/gpu/contract.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/gpu/launch_floor.hpp"
#include "neuralcost/gpu/nvml.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

TEST(GpuHostTest, AbsentDriverLibraryMeansNoNvidiaDriver) {
  const CudaDevices d = detect_cuda_devices("libneuralcost-no-such-driver.so.1");
  EXPECT_TRUE(d.devices.empty());
  ASSERT_TRUE(d.unavailable_reason);
  EXPECT_THAT(*d.unavailable_reason, HasSubstr("no NVIDIA driver: libneuralcost-no-such-driver.so.1 cannot be loaded"));
}

TEST(GpuHostTest, ALibraryWithoutTheDriverApiIsNotADriver) {
  const CudaDevices d = detect_cuda_devices("libm.so.6");
  ASSERT_TRUE(d.unavailable_reason);
  EXPECT_THAT(*d.unavailable_reason, HasSubstr("libm.so.6 lacks the CUDA driver API"));
}

TEST(GpuHostTest, TheToolkitsStubIsRecognisedAsNoDriver) {
  // the CUDA toolkit ships a link stub of libcuda; cuInit in it answers CUDA_ERROR_STUB_LIBRARY
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  const CudaDevices d = detect_cuda_devices(stub);
  ASSERT_TRUE(d.unavailable_reason);
  EXPECT_THAT(*d.unavailable_reason, HasSubstr("CUDA_ERROR_STUB_LIBRARY"));
}

TEST(GpuHostTest, MissingDeviceNamesWhyAndWhatThereIs) {
  CudaDevices none;
  none.unavailable_reason = "no NVIDIA driver: libcuda.so.1 cannot be loaded (x)";
  EXPECT_EQ(*cuda_device_missing(none, 0),
            "cuda:0: CUDA is not available here: no NVIDIA driver: libcuda.so.1 cannot be loaded (x)");
  CudaDevices one;
  one.devices.push_back({0, "NVIDIA H200", 141000000000ull, 9, 0, 132});
  EXPECT_FALSE(cuda_device_missing(one, 0));
  EXPECT_EQ(*cuda_device_missing(one, 7), "cuda:7: no such CUDA device; this machine has one (cuda:0 (NVIDIA H200))");
}

TEST(GpuHostTest, VersionsAreWrittenAsTheirLibrariesNumberThem) {
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cuda_version_text(0), "unknown");
  EXPECT_EQ(cudnn_version_text(91002), "9.10.2");
  EXPECT_EQ(cudnn_version_text(8907), "8.9.7");
  EXPECT_EQ(cudnn_version_text(-1), "unknown");
}

TEST(GpuHostTest, NvmlAbsentOrNotNvmlIsNamed) {
  std::string why;
  EXPECT_EQ(Nvml::load(why, "libnvidia-ml-no-such.so.1"), nullptr);
  EXPECT_THAT(why, HasSubstr("NVML is not available: libnvidia-ml-no-such.so.1 cannot be loaded"));
  EXPECT_EQ(Nvml::load(why, "libm.so.6"), nullptr);
  EXPECT_THAT(why, HasSubstr("libm.so.6 lacks nvmlInit_v2"));
}

TEST(GpuHostTest, ContractFieldsAreWrittenAndUnknownsSaid) {
  CudaContract g;  // as NVML and the CUDA libraries would fill it on an H200 (values typed by hand)
  g.index = 0;
  g.gpu_name = "NVIDIA H200";
  g.driver_version = "570.124.06";
  g.cuda_driver_version = "12.8";
  g.cuda_runtime_version = "12.8";
  g.cudnn_version = "9.10.2";
  g.sm_clock_mhz = 1980;
  g.max_sm_clock_mhz = 1980;
  g.application_sm_clock_mhz = 1755;
  g.persistence_mode = false;
  g.ecc_enabled = true;
  g.mig_enabled = true;
  std::map<std::string, std::string> c;
  write_cuda_contract(g, c);
  EXPECT_EQ(c["gpu.name"], "NVIDIA H200");
  EXPECT_EQ(c["gpu.driver_version"], "570.124.06");
  EXPECT_EQ(c["gpu.cudnn_version"], "9.10.2");
  EXPECT_EQ(c["gpu.application_sm_clock_mhz"], "1755");
  EXPECT_EQ(c["gpu.memory_clock_mhz"], "unknown");
  EXPECT_EQ(c["gpu.persistence_mode"], "off");
  EXPECT_EQ(c["gpu.ecc"], "on");
  EXPECT_EQ(c["gpu.mig"], "on");
  const std::vector<std::string> w = cuda_contract_warnings(g);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_THAT(w[0], HasSubstr("MIG mode"));
  EXPECT_THAT(w[1], HasSubstr("application SM clock is 1755 MHz, below its maximum 1980 MHz"));
  EXPECT_THAT(w[2], HasSubstr("persistence mode off"));
}

TEST(GpuHostTest, ContractWithoutNvmlSaysWhatIsUnknown) {
  const CudaContract g = query_cuda_contract(0, nullptr, "NVML is not available: test");
  bool said = false;
  for (const std::string& u : g.unknown) said = said || u.find("clocks, persistence, ECC, MIG") != std::string::npos;
  EXPECT_TRUE(said);
  std::map<std::string, std::string> c;
  write_cuda_contract(g, c);
  EXPECT_EQ(c["gpu.sm_clock_mhz"], "unknown");
  EXPECT_THAT(c["gpu.unknown"], HasSubstr("NVML is not available: test"));
  EXPECT_TRUE(cuda_contract_warnings(g).empty());  // unknown is not a fault
}

std::string read_input(const std::string& name) {
  std::ifstream in(std::string(NEURALCOST_TEST_INPUTS) + "/gpu/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GpuHostTest, CalibrationSitsBesideTheDatasheetAndAboveItIsFlagged) {
  const HardwareSpec* h200 = HardwareDatabase::builtin().find("h200-sxm");
  ASSERT_NE(h200, nullptr);
  const GpuCalibration c = parse_gpu_calibration(read_input("calibration_plugin_handwritten.json"), h200, "cal.json");
  EXPECT_EQ(c.spec_id, "h200-sxm");
  ASSERT_EQ(c.ceilings.size(), 7u);
  const GpuCeiling& copy = c.ceilings[0];
  EXPECT_EQ(copy.datasheet_field, "memory_bandwidth_bytes_per_second");
  EXPECT_NEAR(*copy.ratio, 4.2 / 4.8, 1e-12);
  EXPECT_FALSE(copy.above_datasheet);
  EXPECT_FALSE(c.ceilings[2].datasheet);  // the database gives no L2 bandwidth for the H200
  const GpuCeiling& fp64 = c.ceilings[4];
  EXPECT_EQ(fp64.datasheet_field, "vector_flops_per_second.fp64");  // FMA units, not the fp64 tensor cores
  EXPECT_TRUE(fp64.above_datasheet);
  const GpuCeiling& launch = c.ceilings[5];
  EXPECT_EQ(launch.datasheet_field, "kernel_launch_seconds");
  EXPECT_FALSE(launch.above_datasheet);  // a time, not a ceiling
  EXPECT_NEAR(*c.ceilings[6].ratio, 7.0e14 / 9.895e14, 1e-12);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0],
              HasSubstr("fp64_fma measured 3.6e+13 FLOP/s, 106% of the datasheet's vector_flops_per_second.fp64"));
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_THAT(c.skipped[0], HasSubstr("gemm_fp8: cuBLASLt offers no algorithm"));
}

TEST(GpuHostTest, MalformedCalibrationAnswersAreRefused) {
  EXPECT_THROW(parse_gpu_calibration("nope", nullptr, "x"), Error);
  try {
    parse_gpu_calibration(R"({"device_name": "G", "ceilings": [{"name": "hbm_copy", "value": -1}]})", nullptr, "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "x: ceilings[0].value must be a positive number");
  }
  const GpuCalibration unknown = parse_gpu_calibration(R"({"device_name": "G", "ceilings": []})", nullptr, "x");
  ASSERT_EQ(unknown.warnings.size(), 1u);
  EXPECT_THAT(unknown.warnings[0], HasSubstr("names no GPU 'G'"));
}

TEST(GpuHostTest, CalibratingACudaDeviceHereIsOneNamedError) {
  if (!cuda_devices().unavailable_reason) GTEST_SKIP() << "this machine has a CUDA device";
  try {
    calibrate_gpu(Device::parse("cuda:0"), true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("cuda:0: CUDA is not available here: "));
  }
  EXPECT_THROW(calibrate_gpu(Device::parse("cuda:x"), true), Error);
  try {
    calibrate_gpu(Device::parse("cpu"), true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(GpuHostTest, LaunchFloorLiftsOpsBelowItAndIsItsOwnTerm) {
  ReferenceOptions o;
  o.model = "transformer";
  o.batch = 1;
  const Analysis a = analyze(build_reference_model(o), *HardwareDatabase::builtin().find("h100-sxm"));
  const std::optional<LaunchFloor> f = launch_floor(a);
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ(f->seconds_per_kernel, 3e-6);
  EXPECT_THAT(f->source, HasSubstr("estimate"));
  EXPECT_GT(f->unfused_kernels, 0);
  EXPECT_LE(f->fused_kernels, f->unfused_kernels);
  EXPECT_DOUBLE_EQ(f->unfused_floor_seconds, f->unfused_kernels * 3e-6);
  // a batch-1 transformer's ops are all far below 3 µs on an H100: the floor is the bound
  EXPECT_EQ(f->ops_below_floor, f->unfused_kernels);
  EXPECT_DOUBLE_EQ(f->unfused_bound_seconds, f->unfused_floor_seconds);  // every op is at the floor
  EXPECT_GT(f->unfused_bound_seconds, a.totals.lower_bound_seconds);
  EXPECT_DOUBLE_EQ(f->fused_bound_seconds, f->fused_floor_seconds);
  ASSERT_EQ(f->op_bound_seconds.size(), a.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) EXPECT_GE(f->op_bound_seconds[i], a.ops[i].lower_bound_seconds);
  // a CPU spec has no launch floor
  HardwareSpec cpu = *HardwareDatabase::builtin().find("epyc-9654");
  EXPECT_FALSE(launch_floor(analyze(build_reference_model(o), cpu)));
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(GpuHostTest, CounterCheckSetsCountersBesideKnownWork) {
  const std::vector<CounterCheck> rows =
      parse_counter_check(read_input("counter_check_handwritten.json"), "check.json");
  ASSERT_EQ(rows.size(), 5u);  // copy: FLOPs and bytes; triad: FLOPs and bytes; fma: FLOPs
  EXPECT_EQ(rows[0].kernel, "copy");
  EXPECT_FALSE(rows[0].ratio);  // no FLOPs expected of a copy
  EXPECT_DOUBLE_EQ(rows[1].measured, 67371008.0 + 67108864);
  EXPECT_NEAR(*rows[1].ratio, (67371008.0 + 67108864) / 134217728, 1e-12);
  EXPECT_DOUBLE_EQ(*rows[2].ratio, 1.0);  // triad: 2 x ffma
  EXPECT_EQ(rows[4].kernel, "fp32_fma");
  EXPECT_DOUBLE_EQ(rows[4].measured, 4325376 + 2.0 * 2214592512);
  try {
    parse_counter_check(R"({"kernels": [{"kernel": "copy"}]})", "check.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "check.json: kernels[0].metrics must be an object (the kernel was not profiled)");
  }
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(GpuHostTest, CalibrationViewsShowRatiosFlagsAndSkips) {
  GpuCalibration c = parse_gpu_calibration(read_input("calibration_plugin_handwritten.json"),
                                           HardwareDatabase::builtin().find("h200-sxm"), "cal.json");
  c.device = "cuda:0";
  c.counter_checks = parse_counter_check(read_input("counter_check_handwritten.json"), "check.json");
  const std::string table = render_gpu_calibration(c, Format::kTable);
  EXPECT_THAT(table,
              HasSubstr("calibration of cuda:0 (NVIDIA H200, compute 9.0), compared with the datasheet of h200-sxm"));
  EXPECT_THAT(table, HasSubstr("87.5%"));            // hbm_copy 4.2 of 4.8 TB/s
  EXPECT_THAT(table, HasSubstr("105.9% (above!)"));  // fp64_fma 36 of 34 TFLOP/s
  EXPECT_THAT(table, HasSubstr("hardware counters (CUPTI range profiler) on kernels of known work"));
  EXPECT_THAT(table, HasSubstr("note: skipped gemm_fp8: cuBLASLt offers no algorithm"));
  EXPECT_THAT(table, HasSubstr("warning: fp64_fma measured"));
  const nlohmann::json j = nlohmann::json::parse(render_gpu_calibration(c, Format::kJson));
  EXPECT_EQ(j["ceilings"].size(), 7u);
  EXPECT_TRUE(j["ceilings"][4]["above_datasheet"].get<bool>());
  EXPECT_TRUE(j["ceilings"][2]["ratio"].is_null());  // no L2 datasheet figure
  EXPECT_EQ(j["counter_checks"].size(), 5u);
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(GpuHostTest, MeasuredSpecTakesWhatWasMeasuredAndBelievable) {
  const HardwareSpec& h200 = *HardwareDatabase::builtin().find("h200-sxm");
  GpuCalibration c = parse_gpu_calibration(read_input("calibration_plugin_handwritten.json"), &h200, "cal.json");
  c.device = "cuda:0";
  const HardwareSpec s = measured_gpu_spec(h200, c);
  EXPECT_DOUBLE_EQ(s.memory_bandwidth_bytes_per_second, 4.3e12);  // the better of copy and triad
  EXPECT_THAT(s.sources.at("memory_bandwidth_bytes_per_second"), HasSubstr("measured on cuda:0 (NVIDIA H200)"));
  EXPECT_THAT(s.sources.at("memory_bandwidth_bytes_per_second"), HasSubstr("hbm_triad"));
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 7.0e14);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kTf32), 4.945e14);  // not measured: the datasheet's
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 6.0e13);    // no vector fp32 in the spec
  EXPECT_DOUBLE_EQ(s.vector_flops_per_second.at(DType::kFp64), 3.4e13);  // above the datasheet: not believed
  EXPECT_DOUBLE_EQ(*s.kernel_launch_seconds, 2.5e-6);
  ASSERT_EQ(s.caches.size(), 1u);
  EXPECT_DOUBLE_EQ(*s.caches[0].bandwidth_bytes_per_second, 1.1e13);
  bool noted = false;
  for (const std::string& n : s.notes) noted = noted || n.find("fp64_fma measured") != std::string::npos;
  EXPECT_TRUE(noted);
  // what --spec-output writes is a spec file --hardware reads back
  const HardwareSpec back = parse_hardware_spec(render_hardware(s, Format::kJson), "measured.json");
  EXPECT_DOUBLE_EQ(back.memory_bandwidth_bytes_per_second, 4.3e12);
  EXPECT_DOUBLE_EQ(*back.kernel_launch_seconds, 2.5e-6);
}

}  // namespace
}  // namespace neuralcost
