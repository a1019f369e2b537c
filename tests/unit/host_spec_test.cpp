// Host detection on canned /proc and sysfs trees (tests/inputs/hosts: this VM with the 508 MB
// L3 such VMs report, and a 4-core ARM Neoverse V1 server), theoretical peaks from the
// microarchitecture, and detection of the machine the test runs on.
#include "neuralcost/hardware/host.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace neuralcost {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

const std::string kHosts = std::string(NEURALCOST_TEST_INPUTS) + "/hosts";

TEST(HostDetectionTest, TheVmIsReadAndItsImpossibleL3Distrusted) {
  const HostDescription h = describe_host(kHosts + "/zen4_vm");
  EXPECT_EQ(h.model, "AMD EPYC");
  EXPECT_EQ(h.vendor, "AuthenticAMD");
  EXPECT_EQ(h.family, 25);
  EXPECT_EQ(h.model_number, 17);
  EXPECT_EQ(h.logical_cpus, 2);
  EXPECT_EQ(h.cores, 2);
  EXPECT_EQ(h.threads_per_core, 1);
  EXPECT_TRUE(h.virtualized);
  EXPECT_DOUBLE_EQ(h.ghz, 2.59615);
  EXPECT_THAT(h.ghz_source, HasSubstr("not the boost clock"));
  EXPECT_THAT(h.isa, Contains("avx512_bf16"));
  EXPECT_EQ(h.memory_bytes, 24684096ull * 1024);
  EXPECT_EQ(h.numa_nodes, 1);
  ASSERT_EQ(h.caches.size(), 3u);  // the instruction cache is left out
  EXPECT_EQ(h.caches[0].size_bytes, 32u << 10);
  EXPECT_EQ(h.caches[0].instances, 2);
  EXPECT_EQ(h.caches[1].size_bytes, 1u << 20);
  EXPECT_TRUE(h.caches[1].plausible);
  EXPECT_EQ(h.caches[2].size_bytes, 520192ull << 10);
  EXPECT_EQ(h.caches[2].shared_by_cpus, 2);
  EXPECT_FALSE(h.caches[2].plausible);  // 254 MiB per CPU: no real L3 gives that
  EXPECT_THAT(h.notes, Contains(HasSubstr("L3 reports 508 MiB shared by 2 CPU(s)")));
}

TEST(HostDetectionTest, TheVmPeaksAreZen4s) {
  const HostDescription h = describe_host(kHosts + "/zen4_vm");
  std::string why;
  EXPECT_EQ(fp32_flops_per_cycle(h, why), 32);  // AVX-512 on two 256-bit pipes
  EXPECT_THAT(why, HasSubstr("Zen 4"));
  const HardwareSpec s = theoretical_host_spec(h);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 2 * 32 * 2.59615e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp64), 32 * 2.59615e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 4 * 32 * 2.59615e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kInt8), 8 * 32 * 2.59615e9);
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("2 cores x 32 FP32 FLOP/cycle"));
  ASSERT_EQ(s.caches.size(), 2u);  // the implausible L3 is not a level of the spec
  EXPECT_THAT(s.notes, Contains(HasSubstr("virtual machine")));
}

TEST(HostDetectionTest, AnArmServerIsRead) {
  const HostDescription h = describe_host(kHosts + "/arm_neoverse_v1");
  EXPECT_EQ(h.architecture, "aarch64");
  EXPECT_EQ(h.vendor, "ARM implementer 0x41");
  EXPECT_EQ(h.cpu_part, "0xd40");
  EXPECT_EQ(h.model, "ARM CPU part 0xd40");
  EXPECT_EQ(h.logical_cpus, 4);
  EXPECT_EQ(h.cores, 4);
  EXPECT_FALSE(h.virtualized);
  EXPECT_DOUBLE_EQ(h.ghz, 2.6);
  EXPECT_EQ(h.ghz_source, "cpufreq cpuinfo_max_freq");
  EXPECT_EQ(h.numa_nodes, 2);
  EXPECT_THAT(h.isa, Contains("sve"));
  ASSERT_EQ(h.caches.size(), 3u);
  EXPECT_TRUE(h.caches[2].plausible);
  EXPECT_EQ(h.caches[2].instances, 1);
  std::string why;
  EXPECT_EQ(fp32_flops_per_cycle(h, why), 32);  // V1: 4 x 128-bit FMA pipes
  const HardwareSpec s = theoretical_host_spec(h);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 4 * 32 * 2.6e9);
  EXPECT_TRUE(s.peak_flops_per_second.count(DType::kBf16));
  EXPECT_TRUE(s.peak_flops_per_second.count(DType::kInt8));  // asimddp
}

TEST(HostDetectionTest, AMissingTreeGivesDefaultsNotACrash) {
  const HostDescription h = describe_host(kHosts + "/does_not_exist");
  EXPECT_EQ(h.model, "unknown");
  EXPECT_EQ(h.logical_cpus, 1);
  EXPECT_TRUE(h.caches.empty());
  EXPECT_THAT(h.notes, Contains(HasSubstr("no clock is readable")));
  std::string why;
  EXPECT_EQ(fp32_flops_per_cycle(h, why), 8);
}

TEST(HostDetectionTest, ThisMachineIsDescribed) {
  const HostDescription h = describe_host();
  EXPECT_GE(h.logical_cpus, 1);
  EXPECT_GE(h.cores, 1);
  EXPECT_LE(h.cores, h.logical_cpus);
  EXPECT_GT(h.memory_bytes, 0u);
  EXPECT_FALSE(h.flags.empty());
}

}  // namespace
}  // namespace neuralcost
