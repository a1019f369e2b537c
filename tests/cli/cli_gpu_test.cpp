// The GPU commands through the CLI on a machine without a GPU (this project's machines): each
// says why CUDA is unavailable, and a command that names a CUDA device gives one error line and
// exit 1. On a machine with a GPU these tests skip; bench/gpu_check.sh covers it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void skip_with_gpu() {
  if (!cuda_devices().unavailable_reason) GTEST_SKIP() << "this machine has a CUDA device";
}

void expect_one_error(const std::string& args, const std::string& start) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
  EXPECT_THAT(r.err, StartsWith("error: " + start)) << args;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << args;
}

TEST(CliGpuTest, CalibratingACudaDeviceWithoutOneIsOneError) {
  skip_with_gpu();
  expect_one_error("hardware calibrate --device cuda:0", "cuda:0: CUDA is not available here: ");
  expect_one_error("hardware calibrate --device cuda:7 --quick", "cuda:7: CUDA is not available here: ");
}

TEST(CliGpuTest, OptionsThatDoNotApplyAreRefused) {
  expect_one_error("hardware calibrate --device cuda:0 --threads 2",
                   "--threads is for the CPU's calibration, not --device cuda:0");
  expect_one_error("hardware calibrate --device cuda:0 --force",
                   "--force is for the CPU's calibration, not --device cuda:0");
  expect_one_error("hardware calibrate --counters", "--counters is for --device cuda:N, not the CPU");
  expect_one_error("hardware calibrate --spec-output x.json", "--spec-output is for --device cuda:N");
  expect_one_error("hardware calibrate --device gpu0", "--device 'gpu0' is not a device name");
}

TEST(CliGpuTest, DetectSaysWhyThereIsNoCuda) {
  skip_with_gpu();
  const CliResult table = run_cli("hardware detect");
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("unavailable: " + *cuda_devices().unavailable_reason));
  const CliResult json = run_cli("hardware detect --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_FALSE(j["cuda"]["available"].get<bool>());
  EXPECT_EQ(j["cuda"]["unavailable_reason"], *cuda_devices().unavailable_reason);
  EXPECT_TRUE(j["cuda"]["devices"].empty());
}

TEST(CliGpuTest, BackendsSayWhyThereAreNoCudaDevices) {
  skip_with_gpu();
  const CliResult r = run_cli("backends");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: no cuda:N devices: CUDA is not available here: "));
  const CliResult json = run_cli("backends --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  for (const auto& b : nlohmann::json::parse(json.out)) {
    EXPECT_EQ(b["cuda_unavailable_reason"], *cuda_devices().unavailable_reason);
  }
}

TEST(CliGpuTest, ProfilingOnAMissingCudaDeviceIsOneError) {
  skip_with_gpu();
  expect_one_error("profile --model ff --backend torch --device cuda:7",
                   "backend 'torch' has no device 'cuda:7' on this machine (devices: cpu): cuda:7: CUDA is not "
                   "available here: " +
                       *cuda_devices().unavailable_reason);
}

TEST(CliGpuTest, GpuSpecsShowTheLaunchFloor) {
  const CliResult r = run_cli("analyze --model transformer --batch 1 --hardware h100-sxm");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("launch floor: 3.00 µs per kernel (an estimate): "));
  const CliResult cpu = run_cli("analyze --model transformer --batch 1 --hardware epyc-9654");
  EXPECT_THAT(cpu.out, ::testing::Not(HasSubstr("launch floor")));
}

}  // namespace
}  // namespace neuralcost
