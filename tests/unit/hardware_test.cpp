// The hardware database and spec files: coverage, exact lookup, sources, and bad files.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

const HardwareDatabase& db() { return HardwareDatabase::builtin(); }

std::string error_of(const std::string& json) {
  try {
    parse_hardware_spec(json, "spec.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HardwareDatabaseTest, CoversTheRequiredParts) {
  for (const char* id : {"apple-m1",
                         "apple-m1-pro",
                         "apple-m1-max",
                         "apple-m2",
                         "apple-m2-pro",
                         "apple-m2-max",
                         "apple-m3",
                         "apple-m3-pro",
                         "apple-m3-max",
                         "apple-m4",
                         "apple-m4-pro",
                         "apple-m4-max",
                         "v100-sxm2",
                         "v100-pcie",
                         "t4",
                         "a10",
                         "l4",
                         "l40s",
                         "a100-sxm-40gb",
                         "a100-sxm-80gb",
                         "a100-pcie-40gb",
                         "a100-pcie-80gb",
                         "h100-sxm",
                         "h100-pcie",
                         "h200-sxm",
                         "b200",
                         "mi250x",
                         "mi300x",
                         "xeon-platinum-8480p",
                         "epyc-9654",
                         "epyc-9755",
                         "graviton3",
                         "gh200-96gb",
                         "gh200-144gb",
                         "rtx-4090",
                         "l40",
                         "rtx-6000-ada",
                         "mi325x",
                         "tpu-v5e",
                         "tpu-v5p",
                         "tpu-v6e"}) {
    const HardwareSpec* s = db().find(id);
    ASSERT_NE(s, nullptr) << id;
    EXPECT_EQ(s->id, id);
    EXPECT_EQ(s->origin, "built-in");
  }
}

TEST(HardwareDatabaseTest, EveryNumberHasASource) {
  for (const HardwareSpec& s : db().specs()) {
    std::vector<std::string> fields = {"memory_bandwidth_bytes_per_second"};
    for (const auto& [d, v] : s.peak_flops_per_second)
      fields.push_back("peak_flops_per_second." + std::string(dtype_name(d)));
    for (const auto& [d, v] : s.vector_flops_per_second)
      fields.push_back("vector_flops_per_second." + std::string(dtype_name(d)));
    if (s.memory_capacity_bytes) fields.push_back("memory_capacity_bytes");
    for (const CacheLevel& c : s.caches) fields.push_back("caches." + c.name + ".size_bytes");
    for (const std::string& f : fields) {
      ASSERT_TRUE(s.sources.count(f)) << s.id << ": " << f;
      EXPECT_FALSE(s.sources.at(f).empty()) << s.id << ": " << f;
    }
  }
}

TEST(HardwareDatabaseTest, IdsAreLowercaseHyphenatedAndPeaksAreDense) {
  for (const HardwareSpec& s : db().specs()) {
    for (char c : s.id) EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || std::isdigit(c) || c == '-') << s.id;
    // a vector rate above the peak would mean the two were swapped
    for (const auto& [d, v] : s.vector_flops_per_second) {
      if (s.peak_flops_per_second.count(d)) EXPECT_LE(v, s.peak_flops_per_second.at(d)) << s.id;
    }
  }
  // datasheet dense figures, not the 2:4-sparse ones
  EXPECT_DOUBLE_EQ(db().get("h100-sxm").peak_flops_per_second.at(DType::kBf16), 989.5e12);
  EXPECT_DOUBLE_EQ(db().get("a100-sxm-80gb").peak_flops_per_second.at(DType::kFp16), 312e12);
  // GeForce: the FP32-accumulate tensor rate, half the FP16-accumulate one
  EXPECT_DOUBLE_EQ(db().get("rtx-4090").peak_flops_per_second.at(DType::kBf16), 165.2e12);
  EXPECT_DOUBLE_EQ(db().get("tpu-v6e").peak_flops_per_second.at(DType::kBf16), 918e12);
  EXPECT_EQ(db().get("tpu-v6e").device_type, "tpu");
  EXPECT_TRUE(db().get("tpu-v6e").device_names.empty());  // TPUs have no CUDA name
}

TEST(HardwareDatabaseTest, LookupIsExactAndNeverShadowsAnotherPart) {
  EXPECT_EQ(db().get("H100-SXM").id, "h100-sxm");
  EXPECT_EQ(db().get("h100-pcie").id, "h100-pcie");
  EXPECT_NE(db().get("h100-pcie").memory_bandwidth_bytes_per_second,
            db().get("h100-sxm").memory_bandwidth_bytes_per_second);
  EXPECT_EQ(db().find("a100"), nullptr);
  EXPECT_EQ(db().find("h100"), nullptr);
  EXPECT_EQ(db().find("h200"), nullptr);
  EXPECT_EQ(db().find("gh200"), nullptr);  // 96GB HBM3 or 144GB HBM3e
  EXPECT_EQ(db().get("trillium").id, "tpu-v6e");
}

TEST(HardwareDatabaseTest, UnknownNameListsTheNearestIds) {
  try {
    db().get("a100");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("unknown hardware 'a100'; nearest ids: a100-"));
    EXPECT_THAT(e.what(), HasSubstr("a100-sxm-80gb"));
  }
}

TEST(HardwareDatabaseTest, DuplicateNamesAreRejected) {
  HardwareSpec a = db().get("t4"), b = db().get("l4");
  b.aliases.push_back("Tesla-T4");
  EXPECT_THROW(HardwareDatabase({a, b}), Error);
  HardwareSpec c = db().get("l4");
  c.device_names.push_back("TESLA T4");  // another part's CUDA name
  EXPECT_THROW(HardwareDatabase({a, c}), Error);
}

TEST(HardwareDatabaseTest, GpusAreFoundByTheNameCudaGivesThem) {
  EXPECT_EQ(db().find_device_name("NVIDIA H100 80GB HBM3")->id, "h100-sxm");
  EXPECT_EQ(db().find_device_name("nvidia h200")->id, "h200-sxm");
  EXPECT_EQ(db().find_device_name("NVIDIA H200 NVL")->id, "h200-nvl");
  EXPECT_EQ(db().find_device_name("NVIDIA GH200 144G HBM3e")->id, "gh200-144gb");
  EXPECT_EQ(db().find_device_name("NVIDIA GeForce RTX 4090")->id, "rtx-4090");
  EXPECT_EQ(db().find_device_name("NVIDIA L40")->id, "l40");
  EXPECT_EQ(db().find_device_name("NVIDIA RTX 6000 Ada Generation")->id, "rtx-6000-ada");
  EXPECT_EQ(db().find_device_name("NVIDIA GeForce RTX 4090 D"), nullptr);  // a different part
  EXPECT_EQ(db().find_device_name("NVIDIA H100"), nullptr);                // exact names only
  EXPECT_EQ(db().find("NVIDIA H100 80GB HBM3"), nullptr);                  // not an id or alias
  // a spec file keeps them
  const HardwareSpec s = parse_hardware_spec(
      R"({"id": "box", "device_names": ["Box GPU"], "peak_flops_per_second": {"fp32": 1e12},
          "memory_bandwidth_bytes_per_second": 1e11})",
      "box.json");
  EXPECT_EQ(s.device_names, std::vector<std::string>{"Box GPU"});
  EXPECT_THROW(parse_hardware_spec(R"({"id": "box", "device_names": "Box GPU", "peak_flops_per_second": {"fp32": 1e12},
                                       "memory_bandwidth_bytes_per_second": 1e11})",
                                   "box.json"),
               Error);
}

TEST(HardwareSpecTest, RidgePointAndRoofSelection) {
  const HardwareSpec& h = db().get("h100-sxm");
  EXPECT_DOUBLE_EQ(h.ridge_point(DType::kFp32), 67e12 / 3.35e12);
  EXPECT_DOUBLE_EQ(h.flops_per_second(DType::kBf16, true), 989.5e12);
  EXPECT_LT(h.flops_per_second(DType::kBf16, false), 989.5e12);  // no tensor cores for elementwise
  try {
    db().get("v100-sxm2").flops_per_second(DType::kFp8, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("hardware 'v100-sxm2' has no fp8 peak (it gives: fp64, fp32, fp16)"));
  }
}

TEST(HardwareSpecTest, MinimalUserSpecParses) {
  const HardwareSpec s = parse_hardware_spec(
      R"({"id": "my-box", "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 5e10})",
      "my.json");
  EXPECT_EQ(s.name, "my-box");
  EXPECT_DOUBLE_EQ(s.ridge_point(DType::kFp32), 20.0);
}

TEST(HardwareSpecTest, BadFilesNameTheFileAndField) {
  EXPECT_THAT(error_of("{\"id\": \"x\", "), HasSubstr("spec.json: malformed JSON at byte"));
  EXPECT_EQ(error_of("[1, 2]"), "spec.json: a hardware spec must be a JSON object");
  EXPECT_EQ(error_of(R"({"peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 1e9})"),
            "spec.json: field 'id' is missing");
  EXPECT_EQ(error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": 1e12}})"),
            "spec.json: field 'memory_bandwidth_bytes_per_second' is missing");
  EXPECT_EQ(
      error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": -3})"),
      "spec.json: field 'memory_bandwidth_bytes_per_second' must be a positive number (got -3)");
  EXPECT_EQ(
      error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": "fast"}, "memory_bandwidth_bytes_per_second": 1e11})"),
      "spec.json: field 'peak_flops_per_second.fp32' must be a positive number (got \"fast\")");
  EXPECT_EQ(
      error_of(R"({"id": "x", "peak_flops_per_second": {"fp4": 1e15}, "memory_bandwidth_bytes_per_second": 1e11})"),
      "spec.json: field 'peak_flops_per_second.fp4' is not a dtype (use fp64, fp32, tf32, fp16, bf16, int8, fp8)");
  EXPECT_EQ(error_of(R"({"id": "x", "peak_flops_per_second": {}, "memory_bandwidth_bytes_per_second": 1e11})"),
            "spec.json: field 'peak_flops_per_second' must give at least one dtype");
  EXPECT_EQ(error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": 1}, "memory_bandwith": 1})"),
            "spec.json: field 'memory_bandwith' is not a hardware spec field (see docs/hardware.md)");
  EXPECT_EQ(
      error_of(
          R"({"id": "x", "schema_version": 2, "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 1e11})"),
      "spec.json: field 'schema_version' must be 1 (got 2)");
  EXPECT_EQ(
      error_of(
          R"({"id": "x", "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 1e11, "caches": [{"name": "L2"}]})"),
      "spec.json: field 'caches[0].size_bytes' is missing");
  EXPECT_EQ(
      error_of(
          R"({"id": "x", "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 1e11, "caches": [{"name": "L2", "size_bytes": 1, "sise": 2}]})"),
      "spec.json: field 'caches[0].sise' is not a cache field (name, size_bytes, bandwidth_bytes_per_second)");
  EXPECT_EQ(
      error_of(
          R"({"id": "x", "peak_flops_per_second": {"fp32": 1e12}, "memory_bandwidth_bytes_per_second": 1e11, "origin": 3})"),
      "spec.json: field 'origin' must be a string");
}

TEST(HardwareSpecTest, ImplausibleAndHostileValuesAreRejectedNotPropagated) {
  EXPECT_EQ(
      error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": 1e308}, "memory_bandwidth_bytes_per_second": 1e11})"),
      "spec.json: field 'peak_flops_per_second.fp32' is 1e+308, outside the plausible range 1e+06 to 1e+20");
  EXPECT_THAT(
      error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": 1e999}, "memory_bandwidth_bytes_per_second": 1e11})"),
      HasSubstr("spec.json: "));
  // a deeply nested value is named by its type, never serialised into the message
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of(R"({"id": "x", "peak_flops_per_second": {"fp32": )" + deep +
                     R"(}, "memory_bandwidth_bytes_per_second": 1e11})"),
            "spec.json: field 'peak_flops_per_second.fp32' must be a positive number (got a list)");
  try {
    load_hardware_file(::testing::TempDir());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a regular file"));
  }
}

TEST(HardwareSpecTest, ResolveLoadsFilesAndFillsMissingSources) {
  const std::string path = ::testing::TempDir() + "/nc_spec.json";
  std::ofstream(path)
      << R"({"id": "box", "peak_flops_per_second": {"fp32": 2e12}, "memory_bandwidth_bytes_per_second": 1e11})";
  const ResolvedHardware r = resolve_hardware(path);
  EXPECT_EQ(r.source, HardwareSource::kFile);
  ASSERT_TRUE(r.spec.has_value());
  EXPECT_EQ(r.spec->origin, path);
  EXPECT_EQ(r.spec->sources.at("peak_flops_per_second.fp32"), "user file " + path);
  EXPECT_THROW(resolve_hardware(::testing::TempDir() + "/missing.json"), Error);
  const ResolvedHardware t4 = resolve_hardware("t4");
  EXPECT_EQ(t4.source, HardwareSource::kDatabase);
  EXPECT_EQ(t4.spec->id, "t4");
}

/// Points the calibration cache at an empty folder of its own for one test.
class EmptyCalibrationCache : public testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("NEURALCOST_CACHE_DIR");
    old_ = old ? old : "";
    dir_ = ::testing::TempDir() + "/nc_cache_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    setenv("NEURALCOST_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (old_.empty())
      unsetenv("NEURALCOST_CACHE_DIR");
    else
      setenv("NEURALCOST_CACHE_DIR", old_.c_str(), 1);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_, old_;
};

TEST_F(EmptyCalibrationCache, HostWithoutACalibrationNeedsOneAndMeasuresNothing) {
  const auto start = std::chrono::steady_clock::now();
  const ResolvedHardware r = resolve_hardware("host");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(r.source, HardwareSource::kNeedsCalibration);
  EXPECT_FALSE(r.spec.has_value());
  EXPECT_FALSE(r.stale_calibration);
  const int cpus = describe_host().logical_cpus;
  EXPECT_THAT(r.status, HasSubstr(fmt::format("no calibration for {} thread(s) cached at {}", cpus, dir_)));
  EXPECT_FALSE(std::filesystem::exists(calibration_cache_path(cpus)));  // nothing was calibrated
}

TEST_F(EmptyCalibrationCache, HostUsesACannedCalibrationOfThisCpu) {
  const HostDescription host = describe_host();
  Calibration c;
  c.fingerprint = host_fingerprint(host);
  c.created = "2026-01-01T00:00:00Z";
  c.threads = host.logical_cpus;
  c.fma["fp32"] = {1e11, 1e11, 0, 3, "scalar"};
  BandwidthLevel dram;
  dram.name = "DRAM";
  dram.triad = {2e10, 2e10, 0, 3, "scalar"};
  c.levels.push_back(dram);
  save_calibration(c);
  for (const char* which : {"host", "host-spec"}) {
    const ResolvedHardware r = resolve_hardware(which);
    EXPECT_EQ(r.source, HardwareSource::kCachedCalibration) << which;
    ASSERT_TRUE(r.spec.has_value());
    EXPECT_EQ(r.spec->memory_bandwidth_bytes_per_second, 2e10) << which;
    EXPECT_THAT(r.status, HasSubstr("calibration of 2026-01-01T00:00:00Z ("));
    EXPECT_EQ(r.spec->notes.front(), "Calibration: " + r.status);
  }
  EXPECT_EQ(resolve_hardware("host").spec->peak_flops_per_second.at(DType::kFp32), 1e11);
  c.fingerprint = "Some Other CPU";
  save_calibration(c);
  const ResolvedHardware stale = resolve_hardware("host");
  EXPECT_EQ(stale.source, HardwareSource::kNeedsCalibration);
  EXPECT_TRUE(stale.stale_calibration);
  EXPECT_THAT(stale.status, HasSubstr("was measured on another CPU (Some Other CPU)"));
}

}  // namespace
}  // namespace neuralcost
