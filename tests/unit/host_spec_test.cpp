// Host detection on canned /proc and sysfs trees (tests/inputs/hosts: this VM with the 508 MB
// L3 such VMs report, and a 4-core ARM Neoverse V1 server), theoretical peaks from the
// microarchitecture, and detection of the machine the test runs on.
#include "neuralcost/hardware/cpu_parts.hpp"
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

TEST(HostDetectionTest, TheVmPeaksAreZen4sAtTheDocumentedClock) {
  // the hypervisor shows only "AMD EPYC": the Genoa row of the CPU table gives the FMA pipes and
  // the highest documented max boost of any Genoa part; the 2.6 GHz Linux reports is not used
  const HostDescription h = describe_host(kHosts + "/zen4_vm");
  std::string why;
  EXPECT_EQ(fp32_flops_per_cycle(h, why), 32);  // AVX-512 on two 256-bit pipes
  EXPECT_THAT(why, HasSubstr("Zen 4"));
  const HardwareSpec s = theoretical_host_spec(h);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 2 * 32 * 4.4e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp64), 32 * 4.4e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 4 * 32 * 4.4e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kInt8), 8 * 32 * 4.4e9);
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("2 cores x 32 FP32 FLOP/cycle"));
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("names no part of the CPU table"));
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("EPYC 9174F: 4.4 GHz"));
  ASSERT_EQ(s.caches.size(), 2u);  // the implausible L3 is not a level of the spec
  EXPECT_THAT(s.notes, Contains(HasSubstr("virtual machine")));
  // one thread: one core's peak, and the name says so
  const HardwareSpec one = theoretical_host_spec(h, 1);
  EXPECT_DOUBLE_EQ(one.peak_flops_per_second.at(DType::kFp32), 32 * 4.4e9);
  EXPECT_THAT(one.name, HasSubstr("(theoretical, 1 thread)"));
  EXPECT_THAT(one.name, HasSubstr("(1 of 2 cores)"));
}

TEST(HostDetectionTest, ThisVmIsZen5Turin) {
  // this VM (family 1Ah model 02h, shown as "AMD EPYC"): two 512-bit FMA pipes at Turin's highest
  // documented max boost, 5.0 GHz
  const HostDescription h = describe_host(kHosts + "/zen5_vm");
  EXPECT_EQ(h.family, 0x1A);
  EXPECT_EQ(h.model_number, 2);
  EXPECT_DOUBLE_EQ(h.ghz, 2.59612);  // what Linux reports: the TSC
  const PeakClock clock = peak_clock(h, 2);
  ASSERT_NE(clock.part, nullptr);
  EXPECT_TRUE(clock.documented);
  EXPECT_EQ(clock.part->microarchitecture, "Zen 5 (Turin)");
  EXPECT_DOUBLE_EQ(clock.ghz, 5.0);
  EXPECT_THAT(clock.source, HasSubstr("an upper bound"));
  const HardwareSpec s = theoretical_host_spec(h);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 2 * 64 * 5.0e9);
  ASSERT_EQ(s.caches.size(), 3u);  // its 32 MiB L3 is plausible
}

TEST(HostDetectionTest, APartInTheTableUsesItsDocumentedClocks) {
  HostDescription h = describe_host(kHosts + "/zen4_vm");
  h.model = "AMD EPYC 9654 96-Core Processor";
  const CpuPart* part = find_cpu_part(h);
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->name, "EPYC 9654");
  EXPECT_FALSE(part->source.empty());
  // a few of its 96 cores: each can reach the max boost
  const PeakClock few = peak_clock(h, 2);
  EXPECT_DOUBLE_EQ(few.ghz, 3.70);
  EXPECT_THAT(few.source, HasSubstr("max boost (2 of its 96 cores busy"));
  // every core of both sockets: the all-core boost
  h.sockets = 2;
  const PeakClock all = peak_clock(h, 192);
  EXPECT_DOUBLE_EQ(all.ghz, 3.55);
  EXPECT_THAT(all.source, HasSubstr("all-core boost (all 192 cores busy"));
  // the P variant is the same part; a longer number is not
  h.model = "AMD EPYC 9654P 96-Core Processor";
  EXPECT_EQ(find_cpu_part(h)->name, "EPYC 9654");
  h.model = "AMD EPYC 96541";
  EXPECT_TRUE(find_cpu_part(h)->name.empty());  // the Genoa row
  // Intel parts: Sapphire Rapids with two AVX-512 FMA units per core
  HostDescription spr;
  spr.vendor = "GenuineIntel";
  spr.family = 6;
  spr.model_number = 0x8F;
  spr.model = "Intel(R) Xeon(R) Platinum 8480+";
  spr.cores = 56;
  spr.flags = {"avx512f"};
  std::string why;
  EXPECT_EQ(fp32_flops_per_cycle(spr, why), 64);
  EXPECT_DOUBLE_EQ(peak_clock(spr, 56).ghz, 3.0);
  EXPECT_DOUBLE_EQ(peak_clock(spr, 8).ghz, 3.8);
}

TEST(HostDetectionTest, ACpuNotInTheTableSaysSoAndUsesLinuxsClock) {
  HostDescription h;
  h.vendor = "GenuineIntel";
  h.family = 6;
  h.model_number = 0x55;  // Skylake-SP: not in the table
  h.model = "Intel(R) Xeon(R) Gold 6148";
  h.cores = 4;
  h.ghz = 2.4;
  h.ghz_source = "cpufreq cpuinfo_max_freq";
  h.flags = {"avx512f"};
  const PeakClock clock = peak_clock(h, 4);
  EXPECT_FALSE(clock.documented);
  EXPECT_EQ(clock.part, nullptr);
  EXPECT_DOUBLE_EQ(clock.ghz, 2.4);
  EXPECT_THAT(clock.source, HasSubstr("is not in the CPU table, so the clock Linux reports: cpufreq cpuinfo_max_freq"));
  // no clock from Linux: the measured one, named as such
  h.ghz = 0;
  const PeakClock measured = peak_clock(h, 4, 3.1);
  EXPECT_DOUBLE_EQ(measured.ghz, 3.1);
  EXPECT_THAT(measured.source, HasSubstr("the clock calibration measured"));
  EXPECT_THAT(theoretical_host_spec(h, 0, 3.1).sources.at("peak_flops_per_second.fp32"),
              HasSubstr("not in the CPU table"));
}

TEST(HostDetectionTest, EveryTableRowHasASourceAndAClock) {
  for (const CpuPart& p : cpu_parts()) {
    const std::string row = p.name.empty() ? std::string(p.microarchitecture) : std::string(p.name);
    EXPECT_FALSE(p.source.empty()) << row;
    EXPECT_GT(p.max_boost_ghz + p.all_core_boost_ghz, 0) << row;
    EXPECT_GE(p.max_boost_ghz == 0 ? p.all_core_boost_ghz : p.max_boost_ghz, p.all_core_boost_ghz) << row;
    EXPECT_GE(p.max_boost_ghz == 0 ? 1e9 : p.max_boost_ghz, p.base_ghz) << row;
    EXPECT_TRUE(p.fp32_flops_per_cycle() == 32 || p.fp32_flops_per_cycle() == 64) << row;
    EXPECT_LE(p.model_first, p.model_last) << row;
  }
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
