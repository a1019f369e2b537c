// Calibration. The logic is tested on a canned calibration (tests/inputs/calibration/zen4_vm.json,
// of the zen4_vm host description): its JSON form, the spec and roofline built from it, the
// per-user cache reusing it (one file per thread count), and the rule that keeps a busy
// machine's calibration out of the cache. Measuring is tested where nothing else can stand in
// for it: one quick calibration of this machine (the smoke test: a corrupt cache replaced by a
// new measurement, with the VM's impossible L3 found by probing), the cache's recalibrating
// paths, and a calibration under a synthetic load (a busy loop pinned to one CPU), which is not
// cached and says why; these measure a cut-down description of this CPU (no caches, 256 MiB of
// memory: a 32 MiB "DRAM" level) to keep them short.
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/calibrate/calibrate.hpp"
#include "neuralcost/hardware/database.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/models/reference.hpp"
#include "synthetic_load.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const HostDescription& zen4_vm() {
  static const HostDescription vm = describe_host(std::string(NEURALCOST_TEST_INPUTS) + "/hosts/zen4_vm");
  return vm;
}

std::string canned_text() { return read_text(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/zen4_vm.json"); }

/// The canned calibration, as measured on the zen4_vm description.
Calibration canned() {
  Calibration c = parse_calibration(canned_text(), "zen4_vm.json");
  c.fingerprint = host_fingerprint(zen4_vm());
  return c;
}

/// This CPU without caches and with 256 MiB of memory: calibrating it measures a 32 MiB buffer.
HostDescription cut_down_host() {
  HostDescription h = describe_host();
  h.caches.clear();
  h.memory_bytes = 256ull << 20;
  return h;
}

void expect_same_rate(const RateMeasurement& a, const RateMeasurement& b, const std::string& what) {
  EXPECT_DOUBLE_EQ(a.best, b.best) << what;
  EXPECT_DOUBLE_EQ(a.median, b.median) << what;
  EXPECT_DOUBLE_EQ(a.spread, b.spread) << what;
  EXPECT_EQ(a.runs, b.runs) << what;
  EXPECT_EQ(a.kernel, b.kernel) << what;
}

TEST(CalibrationTest, TheCannedCalibrationReadsAsWritten) {
  const Calibration c = parse_calibration(canned_text(), "zen4_vm.json");
  EXPECT_EQ(c.created, "2026-03-01T12:00:00Z");
  EXPECT_TRUE(c.quick);
  EXPECT_EQ(c.threads, 2);
  EXPECT_EQ(c.kernel_isa, "avx512");
  EXPECT_DOUBLE_EQ(c.clock_ghz, 3.7);
  EXPECT_DOUBLE_EQ(c.peak_clock_ghz, 4.4);
  EXPECT_THAT(c.peak_clock_source, HasSubstr("Zen 4 (Genoa)"));
  EXPECT_EQ(c.rounds, 2);
  EXPECT_DOUBLE_EQ(c.round_tolerance, 0.03);
  EXPECT_DOUBLE_EQ(c.load_before.other_runnable, 0.1);
  EXPECT_DOUBLE_EQ(c.load_during.steal_fraction, 0.001);
  EXPECT_TRUE(c.busy.empty());
  ASSERT_EQ(c.levels.size(), 4u);
  EXPECT_EQ(c.levels[0].name, "L1");
  EXPECT_DOUBLE_EQ(c.levels[0].working_set_bytes, 49152);
  EXPECT_DOUBLE_EQ(c.levels[1].copy.best, 170e9);
  EXPECT_EQ(c.levels[1].copy.kernel, "avx2");
  EXPECT_EQ(c.levels[3].name, "DRAM");
  EXPECT_DOUBLE_EQ(c.levels[3].triad.median, 20.4e9);
  EXPECT_EQ(c.levels[3].triad.runs, 6);
  EXPECT_EQ(c.levels[3].triad.kernel, "avx512-nt");
  EXPECT_EQ(c.levels[3].triad.rounds, 2);
  EXPECT_DOUBLE_EQ(c.levels[3].triad.round_agreement, 0.012);
  EXPECT_EQ(c.levels[2].triad.rounds, 0);  // a rate without rounds reads as none
  EXPECT_DOUBLE_EQ(c.stream_triad.best, 20.5e9);
  EXPECT_TRUE(c.stream_triad.kernel.empty());
  ASSERT_EQ(c.fma.size(), 3u);
  EXPECT_DOUBLE_EQ(c.fma.at("bf16").best, 450e9);
  EXPECT_DOUBLE_EQ(c.theoretical_flops.at("fp64"), 140.8e9);
  ASSERT_EQ(c.gemm.size(), 2u);
  EXPECT_EQ(c.gemm[1].library, "oneDNN 2.6.3");
  EXPECT_EQ(c.gemm[1].n, 1024);
  EXPECT_EQ(c.environment.at("virtual_machine"), "yes");
  ASSERT_EQ(c.warnings.size(), 1u);
}

TEST(CalibrationTest, JsonRoundTripsEveryField) {
  const Calibration c = canned();
  const std::string text = calibration_to_json(c);
  const Calibration back = parse_calibration(text, "x.json");
  EXPECT_EQ(calibration_to_json(back), text);  // a fixed point: nothing lost or reformatted
  EXPECT_EQ(back.fingerprint, c.fingerprint);
  EXPECT_EQ(back.created, c.created);
  EXPECT_EQ(back.tool_version, c.tool_version);
  EXPECT_EQ(back.quick, c.quick);
  EXPECT_DOUBLE_EQ(back.seconds, c.seconds);
  ASSERT_EQ(back.levels.size(), c.levels.size());
  for (std::size_t i = 0; i < c.levels.size(); ++i) {
    EXPECT_EQ(back.levels[i].name, c.levels[i].name);
    EXPECT_DOUBLE_EQ(back.levels[i].size_bytes, c.levels[i].size_bytes);
    expect_same_rate(back.levels[i].read, c.levels[i].read, c.levels[i].name + " read");
    expect_same_rate(back.levels[i].copy, c.levels[i].copy, c.levels[i].name + " copy");
    expect_same_rate(back.levels[i].triad, c.levels[i].triad, c.levels[i].name + " triad");
  }
  for (const auto& [dtype, m] : c.fma) expect_same_rate(back.fma.at(dtype), m, dtype);
  ASSERT_EQ(back.gemm.size(), c.gemm.size());
  expect_same_rate(back.gemm[0].flops_per_second, c.gemm[0].flops_per_second, c.gemm[0].library);
  EXPECT_EQ(back.theoretical_flops, c.theoretical_flops);
  EXPECT_EQ(back.environment, c.environment);
  EXPECT_EQ(back.warnings, c.warnings);
  EXPECT_EQ(back.peak_clock_source, c.peak_clock_source);
  EXPECT_EQ(back.rounds, c.rounds);
  EXPECT_EQ(back.busy, c.busy);
  EXPECT_DOUBLE_EQ(back.load_during.other_cpus, c.load_during.other_cpus);
}

TEST(CalibrationTest, BadJsonNamesTheField) {
  auto refusal = [](const std::string& text) -> std::string {
    try {
      parse_calibration(text, "cache.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
      return e.what();
    }
    return "accepted";
  };
  EXPECT_THAT(refusal(R"({"fingerprint": "x", "created": 3})"),
              HasSubstr("cache.json: not a calibration (field 'created'"));
  EXPECT_THAT(refusal("{ \"fingerprint\": tru"), HasSubstr("cache.json: not a calibration (field '(document)'"));
  // the checks beyond types: DRAM last, a positive triad per level, a positive fp32 peak
  nlohmann::json j = nlohmann::json::parse(canned_text());
  nlohmann::json no_dram = j;
  no_dram["levels"].erase(no_dram["levels"].size() - 1);
  EXPECT_THAT(refusal(no_dram.dump()), HasSubstr("the last level is not DRAM"));
  nlohmann::json zero_triad = j;
  zero_triad["levels"][1]["triad"]["best"] = 0.0;
  EXPECT_THAT(refusal(zero_triad.dump()), HasSubstr("a level without a positive triad bandwidth"));
  nlohmann::json no_fp32 = j;
  no_fp32["fma"].erase("fp32");
  EXPECT_THAT(refusal(no_fp32.dump()), HasSubstr("no positive fp32 peak"));
  // a file of an older version, without the load it was taken under, is not a calibration
  nlohmann::json no_load = j;
  no_load.erase("load");
  EXPECT_THAT(refusal(no_load.dump()), HasSubstr("field 'load'"));
  EXPECT_EQ(refusal(j.dump()), "accepted");
}

/// zen4_vm without any BF16 arithmetic (a Zen 3, an older Xeon).
HostDescription without_bf16(HostDescription h) {
  for (auto* list : {&h.flags, &h.isa}) {
    list->erase(
        std::remove_if(list->begin(), list->end(),
                       [](const std::string& f) { return f == "avx512_bf16" || f == "amx_bf16" || f == "bf16"; }),
        list->end());
  }
  return h;
}

TEST(CalibrationTest, WithoutBf16ArithmeticBf16IsBoundByTheMeasuredFp32Peak) {
  // frameworks widen bf16 to fp32 on such a CPU: a bf16 run's roof is the fp32 FMA peak, not none
  Calibration c = canned();
  c.fma.erase("bf16");
  const HardwareSpec s = calibrated_spec(without_bf16(zen4_vm()), c);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 230e9);
  EXPECT_THAT(s.sources.at("peak_flops_per_second.bf16"), HasSubstr("no BF16 arithmetic on this CPU"));
  // a CPU with bf16 instructions whose calibration did not measure them gets no guessed peak
  EXPECT_FALSE(calibrated_spec(zen4_vm(), c).peak_flops_per_second.count(DType::kBf16));
  // nor does the theoretical spec of one without them go above its fp32 rate
  const HardwareSpec t = theoretical_host_spec(without_bf16(zen4_vm()));
  EXPECT_DOUBLE_EQ(t.peak_flops_per_second.at(DType::kBf16), t.peak_flops_per_second.at(DType::kFp32));
}

TEST(CalibrationTest, TheCalibratedSpecUsesTheMeasuredCeilings) {
  const Calibration c = canned();
  const HardwareSpec s = calibrated_spec(zen4_vm(), c);
  EXPECT_EQ(s.id, "host");
  EXPECT_EQ(s.origin, "calibrated");
  EXPECT_THAT(s.name, HasSubstr("(calibrated, 2 threads)"));
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 230e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp64), 115e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kBf16), 450e9);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kInt8), 4 * 230e9);  // the VM has avx512_vnni
  EXPECT_DOUBLE_EQ(s.memory_bandwidth_bytes_per_second, 21e9);            // DRAM's triad
  ASSERT_EQ(s.caches.size(), 3u);
  EXPECT_EQ(s.caches[2].name, "L3");
  EXPECT_DOUBLE_EQ(s.caches[2].size_bytes, 32.0 * (1 << 20));  // the probed size, not the reported 508 MiB
  EXPECT_DOUBLE_EQ(*s.caches[0].bandwidth_bytes_per_second, 400e9);
  EXPECT_DOUBLE_EQ(*s.caches[1].bandwidth_bytes_per_second, 180e9);
  EXPECT_THAT(s.sources.at("peak_flops_per_second.fp32"), HasSubstr("measured 2026-03-01T12:00:00Z: 2 threads"));
  EXPECT_THAT(s.sources.at("memory_bandwidth_bytes_per_second"), HasSubstr("triad over 384 MiB on 2 threads"));
  ASSERT_FALSE(s.notes.empty());
  EXPECT_THAT(s.notes.front(),
              HasSubstr("quick, 2 threads, 2 rounds, clock 3.70 GHz measured beside the 4.40 GHz of the theoretical"));
  EXPECT_THAT(s.notes, testing::Contains(HasSubstr("GEMM ceiling oneDNN 2.6.3 fp32 n=1024: 205.0 GFLOP/s")));
  EXPECT_THAT(s.notes, testing::Contains(HasSubstr("warning: L3 reports 508 MiB")));
  // the roofs' uncertainty: the larger round-to-round disagreement of the DRAM triad and the FMA peaks
  Calibration disagreeing = c;
  disagreeing.levels.back().triad.round_agreement = 0.012;
  disagreeing.fma.at("fp32").round_agreement = 0.031;
  EXPECT_DOUBLE_EQ(calibrated_spec(zen4_vm(), disagreeing).roof_uncertainty, 0.031);
  disagreeing.fma.at("fp32").round_agreement = 0.004;
  EXPECT_DOUBLE_EQ(calibrated_spec(zen4_vm(), disagreeing).roof_uncertainty, 0.012);
  EXPECT_EQ(HardwareDatabase::builtin().get("h100-sxm").roof_uncertainty, 0.0);  // a datasheet's roofs are exact
}

TEST(CalibrationTest, TheRooflineOfACalibratedSpecUsesItsLevels) {
  const HardwareSpec s = calibrated_spec(zen4_vm(), canned());
  ReferenceOptions o;
  o.model = "ff";
  o.batch = 1;
  const Analysis a = analyze(build_reference_model(o), s);
  ASSERT_FALSE(a.ops.empty());
  std::map<std::string, double> bandwidth = {{"DRAM", 21e9}};
  for (const CacheLevel& level : s.caches) bandwidth[level.name] = *level.bandwidth_bytes_per_second;
  std::set<std::string> levels;
  // the model's state (weights, its input) is read where all of it fits: ff's 500 KB, L2
  double resident = 0;
  for (const ParameterDesc& p : a.graph.unique_parameters()) resident += static_cast<double>(p.bytes());
  for (const TensorDesc& t : a.graph.inputs()) resident += static_cast<double>(t.bytes());
  ASSERT_GT(resident, static_cast<double>(s.caches[0].size_bytes));
  ASSERT_LE(resident, static_cast<double>(s.caches[1].size_bytes));
  for (const OpRoofline& op : a.ops) {
    const double bytes = static_cast<double>(op.cost.bytes_read + op.cost.bytes_written);
    EXPECT_DOUBLE_EQ(op.dram_seconds, bytes / 21e9);
    ASSERT_TRUE(bandwidth.count(op.memory_level)) << op.memory_level;
    const OpRecord& rec = a.graph.op(op.op_index);
    double state = static_cast<double>(op.cost.parameter_bytes);
    for (const TensorDesc& t : rec.inputs) state += a.graph.producer(t.name) ? 0.0 : static_cast<double>(t.bytes());
    state = std::min(state, static_cast<double>(op.cost.bytes_read));
    const std::string own = bytes <= static_cast<double>(s.caches[0].size_bytes)   ? "L1"
                            : bytes <= static_cast<double>(s.caches[1].size_bytes) ? "L2"
                                                                                   : "L3";
    EXPECT_DOUBLE_EQ(op.memory_seconds, state / bandwidth.at("L2") + (bytes - state) / bandwidth.at(own)) << rec.name;
    if (op.cost.flops > 0) EXPECT_DOUBLE_EQ(op.compute_seconds, static_cast<double>(op.cost.flops) / 230e9);
    levels.insert(op.memory_level);
  }
  // the 401 KB first weight streams from L2; the small activations stay in L1
  EXPECT_TRUE(levels.count("L1"));
  EXPECT_TRUE(levels.count("L2"));
  EXPECT_FALSE(levels.count("DRAM"));
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
  EXPECT_EQ(calibration_cache_path(2), (dir_ / "host-calibration-2t.json").string());
  save_calibration(canned());
  EXPECT_NO_THROW(parse_calibration(read_text(dir_ / "host-calibration-2t.json"), "saved"));
  std::string status;
  const Calibration cached = cached_calibration(zen4_vm(), 0, false, status);  // measures nothing
  EXPECT_EQ(cached.created, "2026-03-01T12:00:00Z");
  EXPECT_DOUBLE_EQ(cached.levels.back().triad.best, 21e9);
  EXPECT_EQ(status, "calibration of 2026-03-01T12:00:00Z (2 threads) from " + calibration_cache_path(2));
}

TEST_F(CalibrationCacheTest, TheCacheIsAFileOfOursNeverALinkFollowedNorAFolderOthersCanWrite) {
  namespace fs = std::filesystem;
  // a link at the cache's name (a corrupt cache replaced, an attacker's link): replaced, its
  // target untouched, the file private
  const fs::path target = dir_ / "elsewhere.json";
  { std::ofstream(target) << "precious"; }
  fs::create_symlink(target, dir_ / "host-calibration-2t.json");
  save_calibration(canned());
  EXPECT_EQ(read_text(target), "precious");
  EXPECT_FALSE(fs::is_symlink(dir_ / "host-calibration-2t.json"));
  EXPECT_EQ(fs::status(dir_ / "host-calibration-2t.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // a folder other users can write (a prepared /tmp/neural-cost): neither read nor written
  fs::permissions(dir_, fs::perms::all);
  const CachedCalibration cached = load_cached_calibration(zen4_vm(), 0, false);
  EXPECT_FALSE(cached.calibration.has_value());
  EXPECT_THAT(cached.status, HasSubstr("can be written by other users"));
  EXPECT_THROW(save_calibration(canned()), Error);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
}

TEST_F(CalibrationCacheTest, AHandEditedHundredfoldCalibrationIsNotBelieved) {
  Calibration c = canned();
  for (auto& [dtype, m] : c.fma) m.best *= 100;
  save_calibration(c);
  const CachedCalibration cached = load_cached_calibration(zen4_vm(), 0, false);
  EXPECT_FALSE(cached.calibration.has_value());
  EXPECT_THAT(cached.status, HasSubstr("holds figures no CPU like this reaches"));
}

TEST_F(CalibrationCacheTest, AClockNoCpuRunsAtIsNotBelieved) {
  // what the add-immediate clock kernel measured on Golden Cove cores (folded at rename)
  Calibration c = canned();
  c.clock_ghz = 19.6;
  save_calibration(c);
  CachedCalibration cached = load_cached_calibration(zen4_vm(), 0, false);
  EXPECT_FALSE(cached.calibration.has_value());
  EXPECT_THAT(cached.status, HasSubstr("holds figures no CPU like this reaches (a clock of 19.6 GHz)"));
  c.clock_ghz = 4.4;
  save_calibration(c);
  EXPECT_TRUE(load_cached_calibration(zen4_vm(), 0, false).calibration.has_value());
}

TEST_F(CalibrationCacheTest, CalibrationsAreCachedByThreadCount) {
  // a 1-thread calibration and the all-CPU one live side by side: a --threads 1 run gets the
  // first, the default the second, and saving one never throws the other away
  Calibration one = canned();
  one.threads = 1;
  one.created = "2026-03-02T00:00:00Z";
  for (auto& [dtype, m] : one.fma) m.best /= 2;  // one core's figures (a cache read checks them)
  one.fma["fp32"].best = 115e9;
  save_calibration(one);
  save_calibration(canned());
  std::string status;
  EXPECT_EQ(cached_calibration(zen4_vm(), 1, false, status).created, "2026-03-02T00:00:00Z");
  EXPECT_THAT(status, HasSubstr("(1 thread) from"));
  EXPECT_THAT(status, HasSubstr("host-calibration-1t.json"));
  EXPECT_EQ(cached_calibration(zen4_vm(), 0, false, status).created, "2026-03-01T12:00:00Z");
  EXPECT_EQ(cached_calibration(zen4_vm(), 2, false, status).created, "2026-03-01T12:00:00Z");
  EXPECT_EQ(cached_calibration(zen4_vm(), 64, false, status).created, "2026-03-01T12:00:00Z");  // capped at 2 CPUs
  // the 1-thread roof: one core's ceilings, and the spec says so
  const HardwareSpec s = calibrated_spec(zen4_vm(), one);
  EXPECT_THAT(s.name, HasSubstr("(calibrated, 1 thread)"));
  EXPECT_THAT(s.name, HasSubstr("(1 of 2 cores)"));
  EXPECT_DOUBLE_EQ(s.peak_flops_per_second.at(DType::kFp32), 115e9);
  const HardwareSpec theory = host_spec_from_calibration("host-spec", zen4_vm(), one, "canned");
  EXPECT_DOUBLE_EQ(theory.peak_flops_per_second.at(DType::kFp32), 1 * 32 * 4.4e9);  // one core at the documented clock
  EXPECT_THAT(theory.name, HasSubstr("1 thread"));
}

TEST_F(CalibrationCacheTest, ABusyCalibrationIsNotCacheable) {
  Calibration c = canned();
  EXPECT_TRUE(why_not_cacheable(c).empty());
  c.busy.push_back("other processes used 96% of a CPU during calibration (...); rerun on an idle machine");
  EXPECT_THAT(why_not_cacheable(c), ::testing::ElementsAre(HasSubstr("96% of a CPU")));
  c.busy.clear();
  c.fma["fp32"].best = 0.4 * c.theoretical_flops.at("fp32");
  EXPECT_THAT(why_not_cacheable(c), ::testing::ElementsAre(HasSubstr("FP32 FMA reached only 40% of the theoretical")));
  // rounds that never agreed on a quiet machine: cached with their spread, and said so
  c = canned();
  c.busy.push_back("the best rounds do not agree within 3% after 8 rounds (L2 triad's best two rounds differ by 4.1%)");
  EXPECT_TRUE(why_not_cacheable(c).empty());
  EXPECT_THAT(rounds_disagreement(c), HasSubstr("L2 triad"));
  c.busy.push_back("other processes used 96% of a CPU during calibration (...); rerun on an idle machine");
  EXPECT_THAT(why_not_cacheable(c), ::testing::ElementsAre(HasSubstr("96% of a CPU")));  // load still keeps it out
  c = canned();
  EXPECT_EQ(rounds_disagreement(c), "");
  c.clock_ghz = 11.96;  // CI's reading of the add-immediate chain
  EXPECT_THAT(why_not_cacheable(c), ::testing::ElementsAre(HasSubstr("the clock measured 11.96 GHz, above any CPU's")));
}

TEST(CalibrationTest, AboveTheTheoreticalPeakIsAFindingOnlyBeyondFivePercent) {
  Calibration c = canned();
  const double theory = c.theoretical_flops.at("fp32");
  auto above = [&](double ratio) {
    c.fma["fp32"].best = ratio * theory;
    for (const std::string& f : ceiling_findings(c, zen4_vm())) {
      if (f.find("fp32 FMA measured") != std::string::npos) return f;
    }
    return std::string();
  };
  EXPECT_EQ(above(1.02), "");  // noise: the integer-add clock and the FMA clock differ by that much
  EXPECT_EQ(above(1.05), "");
  EXPECT_THAT(above(1.06), HasSubstr("above the ceiling by more than the 5% tolerance"));
  EXPECT_THAT(above(1.06), HasSubstr("4.40 GHz"));
  c.fma["fp32"].best = 0.8 * theory;
  EXPECT_THAT(ceiling_findings(c, zen4_vm()),
              testing::Contains(HasSubstr("fp32 FMA reaches 80% of the theoretical 281.6 GFLOP/s")));
}

TEST_F(CalibrationCacheTest, TheSmokeTestACorruptCacheIsReplacedByANewMeasurement) {
  // the one real calibration: this machine measured under the VM's description, whose 508 MiB
  // L3 cannot be true, so the level is probed (memory capped at 1 GiB: a 128 MiB DRAM buffer,
  // fewer probes)
  HostDescription vm = zen4_vm();
  vm.memory_bytes = 1ull << 30;
  const int threads = calibration_threads(vm, 0);
  std::ofstream(calibration_cache_path(threads)) << "{ \"fingerprint\": tru";
  std::string status;
  const Calibration c = cached_calibration(vm, 0, false, status);
  EXPECT_THAT(status, HasSubstr(fmt::format("host-calibration-{}t.json: not a calibration", threads)));
  EXPECT_THAT(status, HasSubstr("recalibrating"));
  EXPECT_TRUE(c.quick);
  EXPECT_EQ(c.fingerprint, host_fingerprint(vm));
  EXPECT_LT(c.seconds, 90.0);  // quick: about 5 s alone, more on a busy machine
  EXPECT_GT(c.clock_ghz, 0.2);
  EXPECT_LT(c.clock_ghz, 7.0);
  EXPECT_GE(c.rounds, 2);
  EXPECT_GT(c.load_before.seconds, 0.2);
  EXPECT_GT(c.load_during.seconds, 0.5);
  EXPECT_DOUBLE_EQ(c.peak_clock_ghz, 4.4);  // the VM description's documented clock, not the one measured
  ASSERT_FALSE(c.levels.empty());
  EXPECT_EQ(c.levels.back().name, "DRAM");
  for (const BandwidthLevel& l : c.levels) {
    EXPECT_GT(l.triad.best, 1e8) << l.name;
    EXPECT_LT(l.triad.best, 1e14) << l.name;
    EXPECT_FALSE(l.triad.kernel.empty()) << l.name;
    EXPECT_GE(l.triad.rounds, 1) << l.name;
    if (l.name != "DRAM") EXPECT_LT(l.size_bytes, 256.0 * (1 << 20)) << l.name;  // never the reported 508 MiB
  }
  EXPECT_THAT(c.warnings, testing::Contains(testing::AnyOf(HasSubstr("L3 reports 508 MiB; bandwidth stays above"),
                                                           HasSubstr("L3's reported size is implausible"))));
  // figures within what any CPU of today reaches. (Ratios between two measurements, FMA against
  // the peak or GEMM against FMA, are not checked: on a busy machine each figure is depressed
  // by a different amount. The rule that keeps such a calibration out of the cache is tested on
  // canned calibrations above.)
  ASSERT_TRUE(c.fma.count("fp32"));
  for (const auto& [dtype, m] : c.fma) {
    EXPECT_GT(m.best, 1e8) << dtype;
    EXPECT_LT(m.best, 1e14) << dtype;
  }
  for (const GemmCeiling& g : c.gemm) {
    EXPECT_GT(g.flops_per_second.best, 1e8) << g.library;
    EXPECT_LT(g.flops_per_second.best, 1e14) << g.library;
  }
  EXPECT_EQ(c.environment.at("threads"), std::to_string(c.threads));
  // saved and reused, unless the machine was busy: then not saved, and the status says why
  if (status.find("not saved") == std::string::npos) {
    EXPECT_TRUE(why_not_cacheable(c).empty());
    std::string again;
    EXPECT_EQ(cached_calibration(vm, 0, false, again).created, c.created);
    EXPECT_THAT(again, HasSubstr("from"));
  } else {
    EXPECT_FALSE(why_not_cacheable(c).empty());
    EXPECT_THAT(status, HasSubstr("the next run calibrates again"));
  }
}

TEST_F(CalibrationCacheTest, ACalibrationUnderSyntheticLoadIsNotCachedAndSaysWhy) {
  const HostDescription host = cut_down_host();
  load_testing::SyntheticLoad load;
  ASSERT_TRUE(load.running());
  std::string status;
  const Calibration c = cached_calibration(host, 0, false, status);
  load.stop();
  EXPECT_THAT(status, HasSubstr("measured now"));
  EXPECT_THAT(status, HasSubstr("but not saved: other processes used"));
  EXPECT_THAT(status, HasSubstr("rerun on an idle machine"));
  EXPECT_FALSE(std::filesystem::exists(calibration_cache_path(c.threads)));
  // the busy loop took a whole CPU while calibration slept, and a share of one while it ran
  EXPECT_GE(c.load_before.other_cpus, kLoadOtherCpusLimit);
  EXPECT_THAT(c.busy, testing::Contains(HasSubstr("during the idle check before calibration")));
  EXPECT_THAT(why_not_cacheable(c), testing::Not(testing::IsEmpty()));
}

TEST_F(CalibrationCacheTest, ACacheThatCannotBeWrittenCostsTheSaveNotTheRun) {
  // the cache's folder cannot be made (a file is in its way): --hardware host measures, says so
  // and goes on; it failed after measuring
  { std::ofstream(dir_ / "file") << "not a folder"; }
  ::setenv("NEURALCOST_CACHE_DIR", (dir_ / "file" / "cache").c_str(), 1);
  std::string status;
  const Calibration c = cached_calibration(cut_down_host(), 0, false, status);
  EXPECT_THAT(status, HasSubstr("the calibration cache is not used: cannot create"));
  EXPECT_THAT(status, HasSubstr("measured now"));
  EXPECT_THAT(status, HasSubstr("but not saved"));
  if (why_not_cacheable(c).empty()) EXPECT_THAT(status, ::testing::EndsWith("Not a directory"));  // the save's failure
  EXPECT_FALSE(c.fma.empty());
}

TEST_F(CalibrationCacheTest, AnotherCpusCalibrationIsReplaced) {
  const HostDescription host = cut_down_host();
  Calibration c = canned();
  c.fingerprint = "Some Other CPU | family 6 model 143 | 112 CPUs";
  c.threads = calibration_threads(host, 0);
  save_calibration(c);
  std::string status;
  const Calibration fresh = cached_calibration(host, 0, false, status);
  EXPECT_EQ(fresh.fingerprint, host_fingerprint(host));
  EXPECT_THAT(status, HasSubstr("was measured on another CPU (Some Other CPU"));
  EXPECT_THAT(status, HasSubstr("quick calibration"));
  EXPECT_THAT(status, HasSubstr("measured now"));
  // the saved file is either the new one (of a quiet machine) or still the old one
  const Calibration saved = parse_calibration(read_text(calibration_cache_path(c.threads)), "saved");
  if (saved.fingerprint == host_fingerprint(host)) {
    EXPECT_TRUE(why_not_cacheable(saved).empty());
    EXPECT_EQ(saved.created, fresh.created);
  } else {
    EXPECT_EQ(saved.fingerprint, c.fingerprint);
    EXPECT_THAT(status, HasSubstr("not saved"));
  }
}

TEST_F(CalibrationCacheTest, ACalibrationWaitsForTheOneInProgressAndUsesWhatItSaved) {
  // concurrent calibrations took each other's cores and each saved wrong figures. Here another
  // calibration of the 2 threads (this thread, holding the cache's lock) is about to save; a run
  // that finds no cache waits for it, then uses its figures instead of measuring beside it
  HostDescription vm = zen4_vm();
  vm.memory_bytes = 1ull << 30;  // were it to measure (as it did), a short calibration
  auto other = std::make_unique<CalibrationLock>(2, 1.0);
  ASSERT_TRUE(other->held()) << other->why_not();
  std::string status;
  Calibration got;
  std::thread run([&] { got = cached_calibration(vm, 0, false, status); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  save_calibration(canned());
  other.reset();
  run.join();
  EXPECT_EQ(got.created, "2026-03-01T12:00:00Z");  // the other's figures, not measured again
  EXPECT_THAT(status, ::testing::StartsWith("waited "));
  EXPECT_THAT(status, HasSubstr("s for another calibration of this CPU; calibration of 2026-03-01T12:00:00Z (2 "
                                "threads) from " +
                                calibration_cache_path(2)));
}

TEST_F(CalibrationCacheTest, TheCacheLockIsExclusiveWaitsBoundedAndIsNeverALinkFollowed) {
  {
    const CalibrationLock first(2, 1.0);
    ASSERT_TRUE(first.held()) << first.why_not();
    EXPECT_DOUBLE_EQ(first.waited_seconds(), 0.0);
    EXPECT_TRUE(std::filesystem::is_regular_file(dir_ / "host-calibration-2t.lock"));
    EXPECT_EQ(std::filesystem::status(dir_ / "host-calibration-2t.lock").permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    const CalibrationLock second(2, 0.2);  // not while the first holds it, and not forever
    EXPECT_FALSE(second.held());
    EXPECT_GE(second.waited_seconds(), 0.2);
    EXPECT_THAT(second.why_not(),
                HasSubstr("another calibration held " + (dir_ / "host-calibration-2t.lock").string()));
    EXPECT_TRUE(CalibrationLock(1, 0.2).held());  // another thread count is another lock
  }
  EXPECT_TRUE(CalibrationLock(2, 0.2).held());  // released with the first
  // a link at the lock's name is not followed (its target neither created nor locked)
  std::filesystem::remove(dir_ / "host-calibration-2t.lock");
  std::filesystem::create_symlink(dir_ / "elsewhere", dir_ / "host-calibration-2t.lock");
  const CalibrationLock linked(2, 0.2);
  EXPECT_FALSE(linked.held());
  EXPECT_THAT(linked.why_not(), HasSubstr("cannot open the lock"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "elsewhere"));
}

TEST_F(CalibrationCacheTest, AFileWithOtherThreadsIsStale) {
  // a file at the 2-thread place that holds another thread count (edited, or written by hand)
  const HostDescription host = zen4_vm();
  Calibration c = canned();
  c.threads = 3;
  std::ofstream(calibration_cache_path(2)) << calibration_to_json(c);
  const CachedCalibration cached = load_cached_calibration(host, 0, false);
  EXPECT_FALSE(cached.calibration.has_value());
  EXPECT_TRUE(cached.stale);
  EXPECT_THAT(cached.status, HasSubstr("was measured with 3 threads, not 2"));
}

}  // namespace
}  // namespace neuralcost
