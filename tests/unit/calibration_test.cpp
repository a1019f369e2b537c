// Calibration: one real quick calibration checked against sanity bounds (nothing above its
// theoretical ceiling, caches faster than DRAM), the JSON form, and the per-user cache file
// (reused for this CPU, stale for another, a corrupt file reported and replaced).
#include "neuralcost/calibrate/calibrate.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

const Calibration& quick_calibration() {
  static const Calibration c = [] {
    CalibrationOptions options;
    options.quick = true;
    return calibrate(describe_host(), options);
  }();
  return c;
}

TEST(CalibrationTest, AQuickCalibrationIsBelievable) {
  const Calibration& c = quick_calibration();
  EXPECT_LT(c.seconds, 10.0);
  EXPECT_GT(c.clock_ghz, 0.2);
  EXPECT_LT(c.clock_ghz, 7.0);
  ASSERT_FALSE(c.levels.empty());
  EXPECT_EQ(c.levels.back().name, "DRAM");
  for (const BandwidthLevel& l : c.levels) {
    EXPECT_GT(l.triad.best, 1e8) << l.name;
    EXPECT_LT(l.triad.best, 1e14) << l.name;
    EXPECT_GE(l.triad.best, l.triad.median) << l.name;
    EXPECT_FALSE(l.triad.kernel.empty()) << l.name;
  }
  // the smallest cache is faster than memory, and the tuned triad keeps up with a plain one
  EXPECT_GT(c.levels.front().triad.best, c.levels.back().triad.best);
  EXPECT_GT(c.levels.back().triad.best, 0.8 * c.stream_triad.best);
  ASSERT_TRUE(c.fma.count("fp32"));
  for (const auto& [dtype, m] : c.fma) {
    ASSERT_TRUE(c.theoretical_flops.count(dtype)) << dtype;
    EXPECT_LE(m.best, 1.05 * c.theoretical_flops.at(dtype)) << dtype;
    EXPECT_GE(m.best, 0.5 * c.theoretical_flops.at(dtype)) << dtype;
  }
  EXPECT_NEAR(c.fma.at("fp64").best / c.fma.at("fp32").best, 0.5, 0.1);
  for (const GemmCeiling& g : c.gemm) {
    EXPECT_GT(g.flops_per_second.best, 0) << g.library;
    EXPECT_LE(g.flops_per_second.best, 1.05 * c.fma.at(g.dtype).best) << g.library << " " << g.dtype;
  }
  EXPECT_EQ(c.environment.at("threads"), std::to_string(c.threads));
}

TEST(CalibrationTest, TheCalibratedSpecUsesTheMeasuredCeilings) {
  const Calibration& c = quick_calibration();
  const HardwareSpec s = calibrated_spec(describe_host(), c);
  EXPECT_EQ(s.id, "host");
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), c.fma.at("fp32").best);
  EXPECT_DOUBLE_EQ(s.memory_bandwidth_bytes_per_second, c.levels.back().triad.best);
  ASSERT_EQ(s.caches.size(), c.levels.size() - 1);
  for (const CacheLevel& level : s.caches) EXPECT_TRUE(level.bandwidth_bytes_per_second.has_value()) << level.name;
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("measured"));
}

TEST(CalibrationTest, JsonRoundTripsAndBadJsonNamesTheField) {
  const Calibration& c = quick_calibration();
  const Calibration back = parse_calibration(calibration_to_json(c), "x.json");
  EXPECT_EQ(back.fingerprint, c.fingerprint);
  EXPECT_EQ(back.levels.size(), c.levels.size());
  EXPECT_DOUBLE_EQ(back.levels.back().triad.best, c.levels.back().triad.best);
  EXPECT_EQ(back.levels.back().triad.kernel, c.levels.back().triad.kernel);
  EXPECT_DOUBLE_EQ(back.fma.at("fp32").best, c.fma.at("fp32").best);
  EXPECT_EQ(back.gemm.size(), c.gemm.size());
  try {
    parse_calibration(R"({"fingerprint": "x", "created": 3})", "cache.json");
    FAIL() << "accepted a calibration with a numeric 'created'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
    EXPECT_THAT(e.what(), HasSubstr("cache.json: not a calibration (field 'created'"));
  }
}

TEST(CalibrationTest, ACacheSizeThatCannotBeTrueIsMeasuredInstead) {
  // this VM's description with the 508 MB L3 such VMs report, calibrated on the real machine
  const HostDescription vm = describe_host(std::string(NEURALCOST_TEST_INPUTS) + "/hosts/zen4_vm");
  CalibrationOptions options;
  options.quick = true;
  const Calibration c = calibrate(vm, options);
  EXPECT_LT(c.seconds, 10.0);
  for (const BandwidthLevel& l : c.levels) {
    if (l.name != "DRAM") EXPECT_LT(l.size_bytes, 256.0 * (1 << 20)) << l.name;  // never the reported 508 MiB
  }
  bool explained = false;
  for (const std::string& w : c.warnings) {
    explained = explained || w.find("L3 reports 508 MiB; bandwidth stays above") != std::string::npos ||
                w.find("L3's reported size is implausible") != std::string::npos;
  }
  EXPECT_TRUE(explained);
}

class CalibrationCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("neuralcost_cache_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    ::setenv("NEURALCOST_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("NEURALCOST_CACHE_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(CalibrationCacheTest, ACalibrationOfThisCpuIsReused) {
  EXPECT_EQ(calibration_cache_path(), (dir_ / "host-calibration.json").string());
  Calibration c = quick_calibration();
  c.created = "2026-01-01T00:00:00Z";  // marks this copy
  save_calibration(c);
  std::string status;
  const Calibration cached = cached_calibration(describe_host(), false, status);
  EXPECT_EQ(cached.created, "2026-01-01T00:00:00Z");
  EXPECT_THAT(status, HasSubstr("calibration of 2026-01-01T00:00:00Z from"));
}

TEST_F(CalibrationCacheTest, AnotherCpusCalibrationIsStaleAndReplaced) {
  Calibration c = quick_calibration();
  c.fingerprint = "Some Other CPU | family 6 model 143 | 112 CPUs";
  save_calibration(c);
  std::string status;
  const Calibration fresh = cached_calibration(describe_host(), false, status);
  EXPECT_EQ(fresh.fingerprint, host_fingerprint(describe_host()));
  EXPECT_THAT(status, HasSubstr("was measured on another CPU (Some Other CPU"));
  EXPECT_THAT(status, HasSubstr("quick calibration measured now"));
  // the replacement was saved, unless the machine was too busy for a believable one
  if (status.find("not saved") == std::string::npos) {
    std::string again;
    cached_calibration(describe_host(), false, again);
    EXPECT_THAT(again, HasSubstr("from"));
  }
}

TEST_F(CalibrationCacheTest, ACalibrationWithOtherThreadsIsNotTheHostsCeiling) {
  Calibration c = quick_calibration();
  c.threads = describe_host().logical_cpus + 1;
  save_calibration(c);
  std::string status;
  const Calibration fresh = cached_calibration(describe_host(), false, status);
  EXPECT_THAT(status, HasSubstr("threads, not one per CPU"));
  EXPECT_EQ(fresh.threads, describe_host().logical_cpus);
}

TEST_F(CalibrationCacheTest, AnUnbelievableCalibrationIsNotCached) {
  // a calibration from a busy machine (FMA far below its theoretical peak) must not be reused
  Calibration c = quick_calibration();
  c.fma["fp32"].best = 0.5 * c.theoretical_flops.at("fp32");
  c.fingerprint = "Some Other CPU";  // stale, so cached_calibration measures; the busy one is this copy
  save_calibration(c);
  std::string status;
  cached_calibration(describe_host(), false, status);
  // whatever was measured now, the saved file is either a believable new one or still the old one
  std::ifstream in(dir_ / "host-calibration.json");
  std::stringstream text;
  text << in.rdbuf();
  const Calibration saved = parse_calibration(text.str(), "saved");
  if (saved.fingerprint == host_fingerprint(describe_host())) {
    EXPECT_GE(saved.fma.at("fp32").best, 0.85 * saved.theoretical_flops.at("fp32"));
  } else {
    EXPECT_THAT(status, HasSubstr("not saved: FP32 FMA reached only"));
  }
}

TEST_F(CalibrationCacheTest, ACorruptCacheIsReportedAndReplaced) {
  std::ofstream(dir_ / "host-calibration.json") << "{ \"fingerprint\": tru";
  std::string status;
  const Calibration fresh = cached_calibration(describe_host(), false, status);
  EXPECT_THAT(status, HasSubstr("host-calibration.json: not a calibration"));
  EXPECT_THAT(status, HasSubstr("recalibrating"));
  EXPECT_FALSE(fresh.levels.empty());
  if (status.find("not saved") == std::string::npos) {
    std::ifstream in(dir_ / "host-calibration.json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NO_THROW(parse_calibration(text.str(), "saved"));
  }
}

}  // namespace
}  // namespace neuralcost
