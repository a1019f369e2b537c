// Devices in the run interface, with a fake backend that offers cpu and cuda:0: a run names a
// device the backend offers, the roofline spec must be of that kind of device (a CPU's spec for
// a cuda run is refused unless the mismatch is allowed, then warned), the spec follows the
// device by default, the device's samplers fill the run's counters, and a failure is an outcome.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

class FakeModel final : public PreparedModel {
 public:
  explicit FakeModel(std::int64_t batch, double seconds = 1e-3) : batch_(batch), seconds_(seconds) {}
  void run() override { ++runs_; }
  OpGraph captured_graph() override {
    ReferenceOptions o;
    o.model = "ff";
    o.batch = batch_;
    return build_reference_model(o);
  }
  // a scripted clock: every pass takes 1 ms (well above the lower bound of an ff on an H100)
  std::optional<double> last_run_seconds() const override { return seconds_; }
  // two page faults per pass, as a worker would report them
  std::optional<double> page_faults() const override { return 2.0 * runs_; }

 private:
  std::int64_t batch_;
  double seconds_;
  int runs_ = 0;
};

/// Offers cpu and cuda:0 (an H100 SXM, as CUDA names it); counts prepare()s.
class FakeGpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "fake"; }
  std::string_view description() const override { return "a backend of the tests with a GPU"; }
  std::optional<std::string> unavailable_reason() const override { return std::nullopt; }
  std::vector<std::string> modes() const override { return {"eager"}; }
  std::vector<Device> devices() const override { return {Device::cpu(), Device::cuda(0)}; }
  std::optional<std::string> device_name(const Device& device, double timeout_seconds) const override {
    asked_timeout = timeout_seconds;
    if (device == Device::cuda(0)) return gpu_name;
    return std::nullopt;
  }
  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& model, const std::string&,
                                         const RunOptions& run) const override {
    ++prepared;
    last_device = run.device.name();
    if (fail) throw Error(ErrorCode::kUnimplemented, "the fake backend was told to fail");
    return std::make_unique<FakeModel>(model.batch, pass_seconds);
  }

  std::string gpu_name = "NVIDIA H100 80GB HBM3";
  mutable double asked_timeout = 0;  ///< the timeout device_name() was given
  bool fail = false;
  double pass_seconds = 1e-3;  // what the fake's own clock says a pass took
  mutable int prepared = 0;
  mutable std::string last_device;
};

ProfileOptions on(const std::string& device) {
  ProfileOptions o;
  o.run.device = Device::parse(device);
  o.layer_runs = 0;
  o.timing.warmup_iterations = 1;
  o.timing.warmup_seconds = 0;
  o.timing.budget_seconds = 0.05;
  o.timing.min_samples = 5;
  return o;
}

ModelRequest ff() {
  ModelRequest r;
  r.model = "ff";
  r.batch = 2;
  return r;
}

const HardwareSpec& spec(const std::string& id) { return HardwareDatabase::builtin().get(id); }

TEST(DeviceTest, DeviceNamesAreCpuOrCudaN) {
  EXPECT_TRUE(Device::parse("cpu").is_cpu());
  EXPECT_EQ(Device::parse("cpu"), Device());
  EXPECT_EQ(Device::parse("cuda:3").index(), 3);
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_NE(Device::cuda(3), Device::cuda(2));
  EXPECT_EQ(Device::cuda(12).name(), "cuda:12");
  EXPECT_EQ(Device::parse(Device::cuda(999).name()), Device::cuda(999));
  EXPECT_EQ(Device::parse("cuda:0").spec_type(), "gpu");
  EXPECT_EQ(Device::cpu().spec_type(), "cpu");
  EXPECT_EQ(device_names({Device::cpu(), Device::cuda(1)}), "cpu, cuda:1");
  EXPECT_EQ(device_names({}), "none");
  for (const char* bad : {"", "gpu", "cuda", "cuda:", "cuda:x", "CPU", "cuda:-1", "cuda:1000", "cuda:0 "}) {
    EXPECT_THROW(Device::parse(bad), Error) << bad;
  }
  EXPECT_THROW(Device::cuda(-1), Error);
}

TEST(DeviceTest, ARunNamesADeviceTheBackendOffers) {
  const FakeGpuBackend fake;
  EXPECT_NO_THROW(check_device_offered(fake, Device::parse("cuda:0")));
  try {
    check_device_offered(fake, Device::parse("cuda:1"));
    FAIL() << "cuda:1 is not offered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_STREQ(e.what(), "backend 'fake' has no device 'cuda:1' on this machine (devices: cpu, cuda:0)");
  }
  EXPECT_THROW(profile(fake, ff(), spec("h100-sxm"), on("cuda:1")), Error);
  EXPECT_EQ(fake.prepared, 0);
}

TEST(DeviceTest, ACpuSpecForACudaRunIsRefusedBeforeAnythingRuns) {
  const FakeGpuBackend fake;
  try {
    profile(fake, ff(), spec("epyc-9654"), on("cuda:0"));
    FAIL() << "a CPU's roofline for a GPU run was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("the hardware spec 'epyc-9654' is a cpu"));
    EXPECT_THAT(e.what(), HasSubstr("but the run is on cuda:0, a gpu"));
    EXPECT_THAT(e.what(), HasSubstr("--allow-hardware-mismatch"));
  }
  EXPECT_EQ(fake.prepared, 0);
  // and a GPU's for a cpu run, and a TPU's for either
  EXPECT_THROW(profile(fake, ff(), spec("h100-sxm"), on("cpu")), Error);
  EXPECT_THROW(profile(fake, ff(), spec("tpu-v5e"), on("cuda:0")), Error);
  EXPECT_THROW(profile(fake, ff(), spec("tpu-v5e"), on("cpu")), Error);
  EXPECT_EQ(fake.prepared, 0);
}

TEST(DeviceTest, AnAllowedMismatchRunsWithAWarning) {
  const FakeGpuBackend fake;
  ProfileOptions o = on("cuda:0");
  o.allow_hardware_mismatch = true;
  const auto runs = profile(fake, ff(), spec("epyc-9654"), o);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].outcome.failed()) << runs[0].outcome.error();
  EXPECT_THAT(runs[0].warnings, ::testing::Contains(HasSubstr("that other device's, not this run's")));
}

TEST(DeviceTest, AMatchingSpecRunsOnTheNamedDevice) {
  const FakeGpuBackend fake;
  const auto runs = profile(fake, ff(), spec("h100-sxm"), on("cuda:0"));
  ASSERT_EQ(runs.size(), 1u);
  const ProfileRun& r = runs[0];
  EXPECT_FALSE(r.outcome.failed()) << r.outcome.error();
  EXPECT_EQ(fake.last_device, "cuda:0");
  EXPECT_EQ(r.device, "cuda:0");
  EXPECT_EQ(r.contract.at("device"), "cuda:0");
  EXPECT_EQ(r.contract.at("hardware_id"), "h100-sxm");
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  EXPECT_THAT(r.contract.at("clock"), HasSubstr("after the device synchronised"));
  // the CPU's samplers belong to the CPU: a cuda run has no page-fault counter
  EXPECT_TRUE(r.timing.counters.empty());
}

TEST(DeviceTest, TheSpecFollowsTheDevice) {
  FakeGpuBackend fake;
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cpu"), 300), "host");
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cuda:0"), 300), "h100-sxm");  // by the spec's device_names
  fake.gpu_name = "nvidia a100-sxm4-40gb";                                             // exact, but not case
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cuda:0"), 300), "a100-sxm-40gb");
  fake.gpu_name = "NVIDIA GH200 480GB";  // named after the superchip's CPU memory; 96GB HBM3 GPU
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cuda:0"), 300), "gh200-96gb");
  fake.gpu_name = "AMD Instinct MI325X";  // ROCm's name, reached through cuda:N
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cuda:0"), 300), "mi325x");
  EXPECT_FALSE(check_hardware_matches(spec("mi325x"), Device::parse("cuda:0"), false).has_value());
  fake.gpu_name = "Some Future GPU";
  try {
    default_hardware_for({&fake}, Device::parse("cuda:0"), 300);
    FAIL() << "an unknown GPU got a spec";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("cuda:0 is 'Some Future GPU'"));
    EXPECT_THAT(e.what(), HasSubstr("--hardware"));
  }
  EXPECT_THROW(default_hardware_for({&fake}, Device::parse("cuda:7"), 300), Error);  // no backend offers it
  // asking a backend for its GPU's name waits no longer than the run's --worker-timeout
  fake.gpu_name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(default_hardware_for({&fake}, Device::parse("cuda:0"), 2), "h100-sxm");
  EXPECT_EQ(fake.asked_timeout, 2);
}

TEST(DeviceTest, TheCpuSamplersCountPageFaultsAndLoadOfTheTimedPhase) {
  const FakeGpuBackend fake;
  const auto runs = profile(fake, ff(), spec("epyc-9654"), on("cpu"));
  ASSERT_EQ(runs.size(), 1u);
  const ProfileRun& r = runs[0];
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  // page faults, and the load the CPU's load sampler saw (measure/load.hpp; tested in load_test.cpp)
  ASSERT_NE(find_counter(r.timing.counters, "page_faults"), nullptr);
  EXPECT_NE(find_counter(r.timing.counters, "cpus_used_by_others"), nullptr);
  const Counter& faults = *find_counter(r.timing.counters, "page_faults");
  EXPECT_EQ(faults.kind, Counter::Kind::kPerIteration);
  EXPECT_DOUBLE_EQ(faults.value, 2.0);  // the fake's two per pass, warm-up excluded
  EXPECT_EQ(r.contract.at("page_faults_per_iteration"), "2.0");
}

TEST(DeviceTest, AFailureIsTheRunsOutcome) {
  FakeGpuBackend fake;
  fake.fail = true;
  const auto runs = profile(fake, ff(), spec("h100-sxm"), on("cuda:0"));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome.verdict, Verdict::kFailed);
  EXPECT_EQ(runs[0].outcome.error(), "the fake backend was told to fail");
  EXPECT_EQ(verdict_name(runs[0].outcome.verdict), "failed");
}

TEST(DeviceTest, PassesOfZeroSecondsFailTheRunInsteadOfGivingNoNumbers) {
  FakeGpuBackend fake;
  fake.pass_seconds = 0;  // a backend clock coarser than a pass
  const auto runs = profile(fake, ff(), spec("h100-sxm"), on("cuda:0"));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].outcome.failed());
  EXPECT_THAT(runs[0].outcome.error(), HasSubstr("the median pass took 0 s"));
}

}  // namespace
}  // namespace neuralcost
