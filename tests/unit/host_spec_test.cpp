// The provisional host spec from canned /proc/cpuinfo text, and a sanity check of the triad.
#include "neuralcost/hardware/host.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace neuralcost {
namespace {

const char* kZen5Vm =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.150\n"
    "flags\t\t: fpu fma avx2 avx512f avx512_bf16 avx512_vnni hypervisor\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.150\nflags\t\t: fpu fma avx2 avx512f\n";

TEST(HostSpecTest, Avx512VmPeaksFromFlagsAndClock) {
  const CpuDescription cpu = parse_cpuinfo(kZen5Vm, 2, 0);
  EXPECT_EQ(cpu.model, "AMD EPYC");
  EXPECT_DOUBLE_EQ(cpu.ghz, 2.59615);
  const HardwareSpec s = theoretical_host_spec(cpu);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 2 * 2 * 16 * 2 * 2.59615e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 2 * s.peak_flops_per_second.at(DType::kFp32));
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), ::testing::HasSubstr("16 fp32 lanes"));
  EXPECT_THAT(s.notes, ::testing::Contains(::testing::HasSubstr("virtual machine")));
}

TEST(HostSpecTest, CpufreqMaxWinsOverCurrentClockAndArmUsesNeon) {
  const CpuDescription cpu = parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd\ncpu MHz\t\t: 1000\n", 4, 3.0e6);
  EXPECT_DOUBLE_EQ(cpu.ghz, 3.0);
  const HardwareSpec s = theoretical_host_spec(cpu);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 4 * 2 * 8 * 2 * 3.0e9);
  EXPECT_FALSE(s.peak_flops_per_second.count(DType::kBf16));
}

TEST(HostSpecTest, SmtSiblingsShareTheirCoresPipes) {
  // 4 logical CPUs, 2 cores with 2 threads each
  std::string text;
  for (int cpu = 0; cpu < 4; ++cpu) {
    text += "processor\t: " + std::to_string(cpu) + "\nphysical id\t: 0\ncore id\t\t: " + std::to_string(cpu / 2) +
            "\ncpu MHz\t\t: 2000\nflags\t\t: fma avx2\n\n";
  }
  const CpuDescription cpu = parse_cpuinfo(text, 4, 0);
  EXPECT_EQ(cpu.logical_cpus, 2);
  EXPECT_DOUBLE_EQ(theoretical_host_spec(cpu).peak_flops_per_second.at(DType::kFp32), 2 * 2 * 8 * 2 * 2.0e9);
}

TEST(HostSpecTest, TriadBandwidthIsPlausible) {
  const double bw = measure_triad_bandwidth();
  EXPECT_GT(bw, 1e9);    // any machine that runs this moves more than 1 GB/s
  EXPECT_LT(bw, 1e13);   // and no CPU moves 10 TB/s
}

}  // namespace
}  // namespace neuralcost
