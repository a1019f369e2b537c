// GPU power and energy arithmetic on recorded samples (tests/inputs/gpu/power_ramp_handwritten.json
// is hand-written, a linear ramp whose integral is known exactly; no GPU run has recorded one yet),
// its edge cases (gaps, too few samples, readings no GPU gives), the energy-counter path, and the
// sampler with a scripted reader.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "neuralcost/core/error.hpp"
#include "neuralcost/gpu/nvml.hpp"
#include "neuralcost/gpu/power.hpp"
#include "neuralcost/gpu/power_sampler.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

std::string read(const std::string& name) {
  std::ifstream in(std::string(NEURALCOST_TEST_INPUTS) + "/gpu/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool any_has(const std::vector<std::string>& v, const std::string& part) {
  for (const std::string& s : v) {
    if (s.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(GpuPowerTest, RampRecordIntegratesToItsExactEnergy) {
  const PowerRecord r = parse_power_record(read("power_ramp_handwritten.json"), "power_ramp_handwritten.json");
  EXPECT_THAT(r.source, HasSubstr("hand-written"));
  const PowerSummary s = summarize_power(r);
  // 400 W + 100 W/s x t from 0.1 to 1.1 s: 400 + 50 x (1.21 - 0.01) = 460 J; linear, so the trapezoid is exact
  ASSERT_TRUE(s.energy_joules);
  EXPECT_NEAR(*s.energy_joules, 460.0, 1e-9);
  EXPECT_NEAR(*s.average_watts, 460.0, 1e-9);
  EXPECT_DOUBLE_EQ(*s.peak_watts, 510.0);  // the last sample inside, at 1.10 s
  EXPECT_NEAR(*s.energy_per_pass_joules, 4.6, 1e-12);
  EXPECT_NEAR(*s.energy_per_sample_joules, 4.6 / 32, 1e-12);
  EXPECT_NEAR(*s.samples_per_joule, 3200.0 / 460.0, 1e-9);
  EXPECT_EQ(s.samples_in_phase, 51);
  EXPECT_NEAR(s.covered_seconds, 1.0, 1e-12);
  EXPECT_TRUE(s.problems.empty()) << s.problems.front();
}

TEST(GpuPowerTest, PhaseEndsBetweenSamplesAreInterpolated) {
  // 100 W until 1 s, then 300 W: the phase 0.5 .. 1.5 s sees a step it cannot resolve finer than 0.5 s
  const std::vector<PowerSample> samples{{0, 100}, {0.5, 100}, {1.0, 100}, {1.01, 300}, {1.5, 300}, {2.0, 300}};
  const PowerSummary s = summarize_power(samples, 0.5, 1.5, 10, 1, 0.5);
  ASSERT_TRUE(s.energy_joules);
  // 0.5 s at 100 W + 0.01 s ramp at 200 W + 0.49 s at 300 W = 50 + 2 + 147
  EXPECT_NEAR(*s.energy_joules, 199.0, 1e-9);
  EXPECT_NEAR(*s.energy_per_pass_joules, 19.9, 1e-9);
}

TEST(GpuPowerTest, GapLongerThanThreePeriodsIsNamed) {
  std::vector<PowerSample> samples;
  for (int k = 0; k <= 50; ++k) {
    if (k > 15 && k < 35) continue;  // the sampler stalled from 0.3 to 0.7 s
    samples.push_back({0.02 * k, 250});
  }
  const PowerSummary s = summarize_power(samples, 0.0, 1.0, 4, 8, 0.02);
  ASSERT_TRUE(s.energy_joules);
  EXPECT_NEAR(*s.energy_joules, 250.0, 1e-9);  // constant power: interpolation is exact
  EXPECT_NEAR(s.largest_gap_seconds, 0.4, 1e-9);
  EXPECT_TRUE(any_has(s.problems, "a gap of 0.4 s between power samples")) << s.problems.size();
}

TEST(GpuPowerTest, PhaseShorterThanThePeriodHasTooFewSamples) {
  // 10 ms phase between readings half a second apart: interpolated, and both faults named
  const PowerSummary s = summarize_power({{0.0, 100}, {0.5, 200}}, 0.1, 0.11, 1, 1, 0.1);
  EXPECT_EQ(s.samples_in_phase, 0);
  EXPECT_TRUE(any_has(s.problems, "too few power samples: 0 inside the 0.01 s phase"));
  EXPECT_TRUE(any_has(s.problems, "a gap of 0.5 s"));
}

TEST(GpuPowerTest, NoSamplesGiveNoEnergyAndSayWhy) {
  const PowerSummary none = summarize_power({}, 0, 1, 1, 1, 0.02);
  EXPECT_FALSE(none.energy_joules);
  EXPECT_FALSE(none.average_watts);
  EXPECT_TRUE(any_has(none.problems, "too few power samples: 0"));
  // one sample, before the phase: nothing spans it
  const PowerSummary before = summarize_power({{0.0, 80}}, 1, 2, 1, 1, 0.02);
  EXPECT_FALSE(before.energy_joules);
  EXPECT_FALSE(before.energy_per_pass_joules);
}

TEST(GpuPowerTest, ReadingsNoGpuGivesAreRejectedByIndex) {
  try {
    summarize_power({{0, 100}, {0.1, -5}}, 0, 1, 1, 1, 0.02);
    FAIL() << "negative watts accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("power sample 1 (at 0.1 s) reads -5 W"));
  }
  EXPECT_THROW(summarize_power({{0, 100}, {0.1, 1e6}}, 0, 1, 1, 1, 0.02), Error);
  try {
    summarize_power({{0, 100}, {0.2, 100}, {0.1, 100}}, 0, 1, 1, 1, 0.02);
    FAIL() << "out-of-order samples accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("power sample 2 (at 0.1 s) is earlier than the one before it"));
  }
  EXPECT_THROW(summarize_power({}, 1, 1, 1, 1, 0.02), Error);  // empty phase
  EXPECT_THROW(summarize_power({}, 0, 1, 0, 1, 0.02), Error);  // no passes
  EXPECT_THROW(summarize_power({}, 0, 1, 1, 0, 0.02), Error);  // no batch
  EXPECT_THROW(summarize_power({}, 0, 1, 1, 1, 0), Error);     // no period
}

TEST(GpuPowerTest, EnergyCounterGivesEnergyDirectly) {
  const PowerSummary s = summarize_energy_counter(1000, 1460, 1.0, 100, 32);
  EXPECT_NEAR(*s.energy_joules, 460, 1e-12);
  EXPECT_NEAR(*s.average_watts, 460, 1e-12);
  EXPECT_NEAR(*s.energy_per_sample_joules, 4.6 / 32, 1e-12);
  EXPECT_TRUE(s.problems.empty());
  EXPECT_TRUE(any_has(summarize_energy_counter(5, 5, 0.001, 1, 1).problems, "did not advance"));
  EXPECT_THROW(summarize_energy_counter(10, 5, 1, 1, 1), Error);
}

TEST(GpuPowerTest, MalformedPowerRecordsNameTheField) {
  EXPECT_THROW(parse_power_record("{", "p.json"), Error);
  try {
    parse_power_record(R"({"format": "neuralcost-gpu-power", "version": 1, "source": "x", "period_seconds": 0.02,
                          "phase": {"start_seconds": 0, "end_seconds": 1, "passes": 1, "batch": 1},
                          "samples": [[0, 1], [1]]})",
                       "p.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
    EXPECT_STREQ(e.what(), "p.json: samples[1] must be [seconds, watts]");
  }
  try {
    parse_power_record(R"({"format": "neuralcost-gpu-power", "version": 2})", "p.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "p.json: version must be 1");
  }
}

TEST(GpuPowerTest, NvidiaSmiAnswersAreParsedOrRefused) {
  EXPECT_DOUBLE_EQ(*parse_nvidia_smi_power("71.42\n"), 71.42);
  EXPECT_FALSE(parse_nvidia_smi_power("[N/A]\n"));
  EXPECT_FALSE(parse_nvidia_smi_power("[Not Supported]"));
  EXPECT_FALSE(parse_nvidia_smi_power("71.4 80.2\n"));  // two GPUs' answers: not one reading
  EXPECT_FALSE(parse_nvidia_smi_power(""));
}

/// A reader whose power is 200 W, and whose energy counter advances `counter_watts` J per second
/// of steady clock (200 unless told).
class ScriptedReader final : public PowerReader {
 public:
  explicit ScriptedReader(bool counter, double counter_watts = 200.0)
      : counter_(counter), counter_watts_(counter_watts), origin_(std::chrono::steady_clock::now()) {}
  std::optional<double> watts() override { return 200.0; }
  std::optional<double> energy_joules() override {
    if (!counter_) return std::nullopt;
    return counter_watts_ * std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  }
  std::string description() const override { return "scripted"; }
  double period_seconds() const override { return 0.005; }

 private:
  bool counter_;
  double counter_watts_;
  std::chrono::steady_clock::time_point origin_;
};

TEST(GpuPowerTest, SamplerTurnsAPhaseIntoCounters) {
  for (const bool counter : {false, true}) {
    auto log = std::make_shared<PowerLog>();
    PowerSampler sampler(std::make_unique<ScriptedReader>(counter), 4, log);
    sampler.start();
    // a phase as long as NVML's averaging window at least (shorter ones get no figures: below)
    std::this_thread::sleep_for(std::chrono::duration<double>(PowerSampler::kMinPowerPhaseSeconds + 0.02));
    Counters out;
    sampler.stop(10, 1.0, out);
    const Counter* average = find_counter(out, "gpu_power_average_watts");
    const Counter* per_pass = find_counter(out, "gpu_energy_per_pass_joules");
    const Counter* per_sample = find_counter(out, "gpu_energy_per_sample_joules");
    ASSERT_TRUE(average && per_pass && per_sample) << "counter path " << counter;
    EXPECT_NEAR(average->value, 200.0, 0.5);  // the counter is read a few µs after the phase ends
    // 200 W over the phase (at least the 1 s slept) / 10 passes, / 4 per sample
    EXPECT_GE(per_pass->value, 20.0 - 1e-6);
    EXPECT_NEAR(per_sample->value, per_pass->value / 4, 1e-12);
    EXPECT_GE(find_counter(out, "gpu_power_samples")->value, 2);
    EXPECT_THAT(log->source, HasSubstr("scripted, every 0.005 s"));
  }
}

TEST(GpuPowerTest, APhaseShorterThanNvmlsWindowGetsNoPowerFiguresAndSaysWhy) {
  // seen on an H200: a 0.06 s phase "averaged" 794 W under a 700 W limit by the energy counter
  auto log = std::make_shared<PowerLog>();
  PowerSampler sampler(std::make_unique<ScriptedReader>(true), 4, log);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  Counters out;
  sampler.stop(10, 0.06, out);
  EXPECT_EQ(find_counter(out, "gpu_power_average_watts"), nullptr);
  EXPECT_EQ(find_counter(out, "gpu_energy_per_pass_joules"), nullptr);
  ASSERT_EQ(log->summary.problems.size(), 1u);
  EXPECT_THAT(log->summary.problems[0], HasSubstr("power not reported: the timed phase lasted"));
  EXPECT_THAT(log->summary.problems[0], HasSubstr("--target-ci as small as 0.0001"));
}

TEST(GpuPowerTest, APeakBelowTheCountersAverageIsNotReported) {
  // readings of 200 W (averages over a window), an energy counter that advanced at 250 W
  auto log = std::make_shared<PowerLog>();
  PowerSampler sampler(std::make_unique<ScriptedReader>(true, 250.0), 4, log);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::duration<double>(PowerSampler::kMinPowerPhaseSeconds + 0.02));
  Counters out;
  sampler.stop(10, 1.0, out);
  ASSERT_NE(find_counter(out, "gpu_power_average_watts"), nullptr);
  EXPECT_NEAR(find_counter(out, "gpu_power_average_watts")->value, 250.0, 1.0);
  EXPECT_EQ(find_counter(out, "gpu_power_peak_watts"), nullptr);
  ASSERT_FALSE(log->summary.problems.empty());
  EXPECT_THAT(log->summary.problems.back(), HasSubstr("power peak not reported"));
}

TEST(GpuPowerTest, WithoutADriverThereIsNoPowerReaderAndTheReasonSaysSo) {
  std::string why;
  // on a machine with an NVIDIA driver this test has nothing to show
  std::string nvml_why;
  if (Nvml::load(nvml_why)) GTEST_SKIP() << "this machine has NVML";
  EXPECT_EQ(open_power_reader(0, why), nullptr);
  EXPECT_THAT(why, HasSubstr("NVML is not available"));
  EXPECT_THAT(why, HasSubstr("nvidia-smi did not answer"));
}

}  // namespace
}  // namespace neuralcost
