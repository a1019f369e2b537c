// Results files read back, priced and compared: real CLI output (tests/inputs/results, made by
// make_results.sh) for what a file holds, small hand-made runs for the decisions' edges, and one
// malformed input per failure class.
#include "neuralcost/report/results.hpp"
#include "neuralcost/report/cost.hpp"
#include "neuralcost/report/findings.hpp"
#include "neuralcost/report/report_views.hpp"
#include "neuralcost/report/results_comparison.hpp"
#include "report/findings_text.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kResults = std::string(NEURALCOST_TEST_INPUTS) + "/results/";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

/// A minimal measured run as a results line (hand-made: for the decisions, not the figures).
json run_json(const std::string& model, const std::string& mode, std::int64_t batch, const std::vector<double>& samples,
              const std::string& verdict = "ok") {
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 1e-3 : sorted[sorted.size() / 2];
  json timing{{"median_seconds", median},
              {"ci95_low_seconds", median * 0.98},
              {"ci95_high_seconds", median * 1.02},
              {"cv", 0.01},
              {"samples", std::max<std::size_t>(1, samples.size())}};
  if (!samples.empty()) timing["samples_seconds"] = samples;
  return {
      {"model", model},
      {"backend", "jax"},
      {"mode", mode},
      {"batch", batch},
      {"device", "cpu"},
      {"failed", false},
      {"outcome", {{"verdict", verdict}, {"reasons", verdict == "ok" ? json::array() : json::array({"too noisy"})}}},
      {"timing", timing},
      {"totals",
       {{"flops", 1000},
        {"bytes_read", 400},
        {"bytes_written", 100},
        {"arithmetic_intensity", 2.0},
        {"lower_bound_seconds", median / 10}}},
      {"efficiency", 0.1},
      {"fused_efficiency", 0.1},
      {"samples_per_second", static_cast<double>(batch) / median},
      {"achieved_flops_per_second", 1000 / median},
      {"bound", "memory"},
      {"ops", json::array()},
      {"layers", json::array()},
      {"contract", {{"model_sizes", "seq 32, width 128, depth 2"}}},
      {"warnings", json::array()}};
}

json failed_json(const std::string& model, const std::string& mode, std::int64_t batch) {
  return {{"model", model},
          {"backend", "jax"},
          {"mode", mode},
          {"batch", batch},
          {"device", "cpu"},
          {"failed", true},
          {"outcome", {{"verdict", "failed"}, {"reasons", {"worker crashed"}}}},
          {"error", "worker crashed"}};
}

std::string jsonl(const std::vector<json>& runs) {
  std::string out = R"({"hardware": {"id": "toy", "peak_flops_per_second": {"fp32": 1e12}, )"
                    R"("memory_bandwidth_bytes_per_second": 1e11}})"
                    "\n";
  for (const json& r : runs) out += r.dump() + "\n";
  return out;
}

std::vector<double> around(double centre, int n) {
  std::vector<double> s;
  for (int i = 0; i < n; ++i) s.push_back(centre * (1 + 0.01 * ((i * 7) % 5 - 2)));
  return s;
}

TEST(ResultsTest, ReadsAProfileDocumentWithItsHardware) {
  const ResultsFile r = read_results(kResults + "study.json");
  EXPECT_TRUE(r.warnings.empty());
  // ff and cnn at two batches in two frameworks and two modes, and the missing model's failures
  ASSERT_EQ(r.runs.size(), 20u);
  ASSERT_EQ(r.hardware.size(), 1u);
  std::size_t failed = 0;
  for (const ResultRun& run : r.runs) {
    EXPECT_EQ(run.hardware_id, r.hardware.front().id);
    if (run.failed()) {
      ++failed;
      EXPECT_THAT(run.model, HasSubstr("<script>"));
      EXPECT_FALSE(run.error.empty());
      continue;
    }
    EXPECT_GT(run.median_seconds, 0);
    EXPECT_EQ(run.samples_seconds.size(), static_cast<std::size_t>(run.samples));
    EXPECT_LE(run.ci95_low_seconds, run.median_seconds);
    EXPECT_GT(run.flops, 0u);
  }
  EXPECT_EQ(failed, 4u);
  EXPECT_EQ(r.runs.front().source, kResults + "study.json: runs[0]");
}

TEST(ResultsTest, ReadsJsonLinesWithAHardwareHeader) {
  const ResultsFile r = read_results(kResults + "before.jsonl");
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.runs.size(), 8u);
  ASSERT_EQ(r.hardware.size(), 1u);
  EXPECT_EQ(r.runs.front().source, kResults + "before.jsonl:2");  // line 1 is the header
  EXPECT_EQ(r.runs.front().hardware_id, r.hardware.front().id);
  bool layers = false;
  for (const ResultRun& run : r.runs) layers = layers || !run.layers.empty();
  EXPECT_TRUE(layers) << "torch eager runs have per-layer times";
}

TEST(ResultsTest, AHeaderMayCarryMoreAndARunItsOwnHardware) {
  // what `study` writes: a header with its settings (ignored here), then runs; a run with its own spec
  json own = run_json("ff", "eager", 1, around(1e-3, 10));
  own["hardware"] = {
      {"id", "other"}, {"peak_flops_per_second", {{"fp32", 2e12}}}, {"memory_bandwidth_bytes_per_second", 1e11}};
  const std::string text = R"({"schema_version": 1, "study": {"models": ["ff"], "batches": [1]}, )"
                           R"("hardware": {"id": "toy", "peak_flops_per_second": {"fp32": 1e12}, )"
                           R"("memory_bandwidth_bytes_per_second": 1e11}})"
                           "\n" +
                           run_json("ff", "jit", 1, around(1e-4, 10)).dump() + "\n" + own.dump() + "\n";
  const ResultsFile r = parse_results(text, "study.jsonl");
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[0].hardware_id, "toy");
  EXPECT_EQ(r.runs[1].hardware_id, "other");
  EXPECT_EQ(r.hardware.size(), 2u);
}

TEST(ResultsTest, ATruncatedLastLineIsNamedAndTheGoodLinesAreRead) {
  std::vector<std::string> lines = lines_of(slurp(kResults + "before.jsonl"));
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  text.resize(text.size() - lines.back().size() / 2 - 1);  // an interrupted write: half a line, no newline
  const ResultsFile r = parse_results(text, "cut.jsonl");
  EXPECT_EQ(r.runs.size(), lines.size() - 2);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr(fmt::format("cut.jsonl:{}: truncated", lines.size())));
}

TEST(ResultsTest, ForeignAndMalformedLinesAreSkippedByLineNumber) {
  const std::string text = jsonl({run_json("ff", "eager", 1, around(1e-3, 10))}) +
                           "{\"name\": \"a line of something else\"}\n"
                           "not json at all\n"
                           "[1, 2, 3]\n" +
                           run_json("ff", "jit", 1, around(5e-4, 10)).dump() + "\n";
  const ResultsFile r = parse_results(text, "mixed.jsonl");
  EXPECT_EQ(r.runs.size(), 2u);
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_THAT(r.warnings[0], HasSubstr("mixed.jsonl:3: not a results line"));
  EXPECT_THAT(r.warnings[1], HasSubstr("mixed.jsonl:4: not JSON"));
  EXPECT_THAT(r.warnings[2], HasSubstr("mixed.jsonl:5: not a results line"));
  EXPECT_EQ(r.runs[1].source, "mixed.jsonl:6");
}

TEST(ResultsTest, ARunWithABadFieldIsSkippedNamingTheField) {
  json no_median = run_json("ff", "eager", 1, {});
  no_median["timing"].erase("median_seconds");
  json bad_batch = run_json("ff", "eager", 1, {});
  bad_batch["batch"] = 0;
  json disagrees = run_json("ff", "eager", 1, {});
  disagrees["failed"] = true;
  json future = run_json("ff", "eager", 1, {});
  future["schema_version"] = 2;
  const ResultsFile r = parse_results(jsonl({no_median, bad_batch, disagrees, future}), "bad.jsonl");
  EXPECT_TRUE(r.runs.empty());
  ASSERT_EQ(r.warnings.size(), 4u);
  EXPECT_THAT(r.warnings[0], HasSubstr("bad.jsonl:2: field 'timing.median_seconds' is missing; line skipped"));
  EXPECT_THAT(r.warnings[1], HasSubstr("bad.jsonl:3: field 'batch' must be an integer >= 1"));
  EXPECT_THAT(r.warnings[2], HasSubstr("bad.jsonl:4: field 'failed' disagrees with outcome.verdict"));
  EXPECT_THAT(r.warnings[3], HasSubstr("bad.jsonl:5: schema_version 2 (this neural-cost reads 1)"));
  EXPECT_THROW(require_runs(r), Error);
  // times no pass takes: 0, below a picosecond (ratios of them overflow), beyond 10^6 s (printed
  // they overflowed the tables' integers), and an interval upside down
  std::vector<json> times;
  for (const double t : {0.0, 1e-15, 1e19}) {
    times.push_back(run_json("ff", "eager", 1, {}));
    times.back()["timing"]["median_seconds"] = t;
  }
  times.push_back(run_json("ff", "eager", 1, {}));
  times.back()["timing"]["ci95_low_seconds"] = 2.0;
  times.back()["timing"]["ci95_high_seconds"] = 1.0;
  const ResultsFile t = parse_results(jsonl(times), "times.jsonl");
  EXPECT_TRUE(t.runs.empty());
  ASSERT_EQ(t.warnings.size(), 4u);
  EXPECT_THAT(t.warnings[0], HasSubstr("times.jsonl:2: field 'timing.median_seconds' is 0 s: a measured time is "
                                       "from 10^-12 s to 10^6 s; line skipped"));
  EXPECT_THAT(t.warnings[1], HasSubstr("is 1e-15 s"));
  EXPECT_THAT(t.warnings[2], HasSubstr("is 1e+19 s"));
  EXPECT_THAT(t.warnings[3], HasSubstr("field 'timing.ci95_low_seconds' 2 s is above ci95_high_seconds (1 s)"));
}

TEST(ResultsTest, EmptyFilesAndCutDocumentsAreErrors) {
  for (const char* empty : {"", "\n\n", "  \n"}) {
    try {
      parse_results(empty, "empty.jsonl");
      ADD_FAILURE() << "an empty file must be an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
      EXPECT_EQ(std::string(e.what()), "empty.jsonl: empty: no runs to report");
    }
  }
  const std::string doc = slurp(kResults + "study.json");
  try {
    parse_results(doc.substr(0, doc.size() / 2), "half.json");
    ADD_FAILURE() << "half a profile document must be an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("half.json:"));
    EXPECT_THAT(e.what(), HasSubstr("not a complete profile document (truncated?): it ends early"));
  }
  // a header and nothing else: read, but nothing to report
  const ResultsFile header_only = parse_results(jsonl({}), "header.jsonl");
  EXPECT_TRUE(header_only.warnings.empty());
  try {
    require_runs(header_only);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "header.jsonl: no runs to report");
  }
  EXPECT_THROW(read_results(kResults + "no-such-file.jsonl"), Error);
  // a whole document of another kind (an analysis): one error, not a warning per line
  try {
    parse_results(json{{"model", "ff"}, {"ops", json::array()}, {"totals", json::object()}}.dump(2), "analysis.json");
    ADD_FAILURE() << "an analysis must not read as results";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "analysis.json: a JSON document without runs (an analysis or a spec?), not "
              "results: give the output of profile or study");
  }
}

TEST(ResultsTest, ManyBadLinesAreSummarised) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "garbage\n";
  const ResultsFile r = parse_results(text + run_json("ff", "eager", 1, {}).dump() + "\n", "noisy.jsonl");
  EXPECT_EQ(r.runs.size(), 1u);
  ASSERT_EQ(r.warnings.size(), 21u);
  EXPECT_EQ(r.warnings.back(), "noisy.jsonl: 30 more problems not listed");
}

TEST(CostTest, CostPerSampleIsPriceTimesMedianOverBatchForEveryRun) {
  const ResultsFile r = read_results(kResults + "study.json");
  PriceList prices;
  prices.per_hour = 3.6;
  const CostReport cost = cost_of(r, prices);
  ASSERT_EQ(cost.runs.size(), r.runs.size());
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    const ResultRun& run = r.runs[i];
    if (run.failed()) {
      EXPECT_FALSE(cost.runs[i]);
      continue;
    }
    ASSERT_TRUE(cost.runs[i]);
    const RunCost& c = *cost.runs[i];
    EXPECT_DOUBLE_EQ(c.per_sample.value, 3.6 / 3600 * run.median_seconds / static_cast<double>(run.batch));
    EXPECT_DOUBLE_EQ(c.per_sample.low, 3.6 / 3600 * run.ci95_low_seconds / static_cast<double>(run.batch));
    EXPECT_DOUBLE_EQ(c.per_sample.high, 3.6 / 3600 * run.ci95_high_seconds / static_cast<double>(run.batch));
    EXPECT_DOUBLE_EQ(c.per_million_samples.value, 1e6 * c.per_sample.value);
    EXPECT_FALSE(c.per_million_tokens) << "ff and cnn read no sequence";
    for (const LayerCost& l : c.layers) {
      EXPECT_DOUBLE_EQ(l.above_bound_per_million_samples,
                       1e6 * 3.6 / 3600 * run.layers[l.layer].waste_seconds / static_cast<double>(run.batch));
    }
    for (std::size_t k = 1; k < c.layers.size(); ++k) {
      EXPECT_GE(c.layers[k - 1].above_bound_per_million_samples, c.layers[k].above_bound_per_million_samples);
    }
  }
}

TEST(CostTest, ATrainingStepIsPricedPerTrainingSampleAndSaysSo) {
  json step = run_json("ff", "eager", 8, around(4e-3, 20));
  step["contract"] = {{"workload", "train"}};
  const ResultsFile r = parse_results(jsonl({run_json("ff", "eager", 8, around(1e-3, 20)), step}), "t.jsonl");
  PriceList prices;
  prices.per_hour = 3.6;
  const CostReport cost = cost_of(r, prices);
  ASSERT_TRUE(cost.runs[1]);
  EXPECT_DOUBLE_EQ(cost.runs[1]->per_sample.value, 3.6 / 3600 * r.runs[1].median_seconds / 8);
  const json j = cost_json(r, cost);
  EXPECT_EQ(j["runs"][0]["workload"], "forward");
  EXPECT_EQ(j["runs"][1]["workload"], "train");
  EXPECT_EQ(j["training"], kTrainingCostNote);
  const std::string table = render_cost(r, cost, Format::kCsv);
  EXPECT_THAT(table, HasSubstr(",forward\n"));
  EXPECT_THAT(table, HasSubstr(",train\n"));
}

TEST(CostTest, SequenceModelsArePricedPerToken) {
  const ResultsFile r = parse_results(jsonl({run_json("lstm", "eager", 4, around(2e-3, 10))}), "lstm.jsonl");
  const std::optional<RunCost> c = run_cost(r.runs.front(), 1.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->tokens_per_sample, 32);
  ASSERT_TRUE(c->per_million_tokens);
  EXPECT_DOUBLE_EQ(c->per_million_tokens->value, 1e6 / 3600 * r.runs.front().median_seconds / (4 * 32));
}

TEST(CostTest, PricesFromUsersAreChecked) {
  EXPECT_DOUBLE_EQ(parse_price_per_hour("2.10", "--price-per-hour"), 2.10);
  EXPECT_DOUBLE_EQ(parse_price_per_hour("0", "--price-per-hour"), 0);
  for (const auto& [text, message] :
       std::vector<std::pair<std::string, std::string>>{{"-1", "--price-per-hour '-1' must not be negative (got -1)"},
                                                        {"abc", "--price-per-hour 'abc' is not a number"},
                                                        {"2.1x", "--price-per-hour '2.1x' is not a number"},
                                                        {"", "--price-per-hour '' is not a number"},
                                                        {"inf", "--price-per-hour 'inf' must be a finite number"},
                                                        {"nan", "--price-per-hour 'nan' must be a finite number"},
                                                        {"1e999", "--price-per-hour '1e999' is not a number"}}) {
    try {
      parse_price_per_hour(text, "--price-per-hour");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

TEST(CostTest, APriceFileIsKeyedByHardwareId) {
  const PriceList p =
      parse_price_file(R"({"currency": "EUR", "price_per_hour": {"toy": 2.0, "h100-sxm": 2.5}})", "p.json");
  EXPECT_EQ(p.currency, "EUR");
  EXPECT_EQ(p.price_for("toy"), 2.0);
  EXPECT_FALSE(p.price_for("host"));
  const ResultsFile r = parse_results(jsonl({run_json("ff", "eager", 1, {})}), "toy.jsonl");
  EXPECT_TRUE(cost_of(r, p).runs.front());
  PriceList other = parse_price_file(R"({"price_per_hour": {"h100-sxm": 2.5}})", "other.json");
  const CostReport unpriced = cost_of(r, other);
  EXPECT_FALSE(unpriced.runs.front());
  ASSERT_EQ(unpriced.warnings.size(), 1u);
  EXPECT_EQ(unpriced.warnings[0], "other.json: no price for hardware 'toy': its runs have no cost");
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"price_per_hour": {"toy": -2}})", "p.json: field 'price_per_hour.toy' must not be negative"},
           {R"({"price_per_hour": {"toy": "2"}})", "p.json: field 'price_per_hour.toy' must be a number"},
           {R"({"price_per_hour": {}})",
            "p.json: field 'price_per_hour' must be an object of hardware id -> price per "
            "hour, with at least one entry"},
           {R"({"prices": {"toy": 2}})",
            "p.json: field 'prices' is not a price file field (schema_version, currency, "
            "price_per_hour, notes)"},
           {"{", "p.json: malformed JSON at byte 2"}}) {
    try {
      parse_price_file(text, "p.json");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

TEST(CompareTest, ChangesAreTestedOnTheSamples) {
  const ResultsFile before =
      parse_results(jsonl({run_json("ff", "eager", 1, around(1e-3, 30)), run_json("ff", "jit", 1, around(1e-4, 30)),
                           run_json("cnn", "eager", 1, around(2e-3, 30)), run_json("rnn", "eager", 1, {}),
                           failed_json("lstm", "eager", 1), run_json("transformer", "eager", 1, around(1e-3, 10))}),
                    "before.jsonl");
  const ResultsFile after = parse_results(
      jsonl({run_json("ff", "eager", 1, around(0.8e-3, 30)), run_json("ff", "jit", 1, around(1e-4, 30)),
             run_json("cnn", "eager", 1, around(2.4e-3, 30)), run_json("rnn", "eager", 1, {}),
             run_json("lstm", "eager", 1, around(1e-3, 10)), run_json("ff", "eager", 4, around(1e-3, 10))}),
      "after.jsonl");
  const ResultsComparison c = compare_results(before, after);
  ASSERT_EQ(c.cells.size(), 5u);
  EXPECT_EQ(c.cells[0].change, Change::kFaster);
  EXPECT_NEAR(c.cells[0].ratio, 0.8, 0.01);
  EXPECT_LT(c.cells[0].ratio_ci95.high, 1.0);
  EXPECT_LT(c.cells[0].test->p_value, 0.05);
  EXPECT_EQ(c.cells[1].change, Change::kNoChange);
  EXPECT_GE(c.cells[1].test->p_value, 0.05);
  EXPECT_EQ(c.cells[2].change, Change::kSlower);
  EXPECT_EQ(c.cells[3].change, Change::kNotTested) << "no per-sample times";
  EXPECT_FALSE(c.cells[3].test);
  EXPECT_LE(c.cells[3].ratio_ci95.low, 1.0);
  EXPECT_GE(c.cells[3].ratio_ci95.high, 1.0);
  EXPECT_EQ(c.cells[4].change, Change::kNotComparable);
  EXPECT_THAT(c.cells[4].notes.front(), HasSubstr("before failed: worker crashed"));
  ASSERT_EQ(c.only_before.size(), 1u);
  EXPECT_EQ(c.only_before[0].model, "transformer");
  ASSERT_EQ(c.only_after.size(), 1u);
  EXPECT_EQ(c.only_after[0].batch, 4);
  EXPECT_THROW(compare_results(before, after, 0), Error);
  EXPECT_THROW(compare_results(before, after, 1), Error);
}

TEST(CompareTest, ARepeatedCellComparesItsLastRun) {
  const ResultsFile before = parse_results(jsonl({run_json("ff", "eager", 1, around(1e-3, 20))}), "b.jsonl");
  const ResultsFile after = parse_results(
      jsonl({run_json("ff", "eager", 1, around(5e-3, 20)), run_json("ff", "eager", 1, around(1e-3, 20))}), "a.jsonl");
  const ResultsComparison c = compare_results(before, after);
  ASSERT_EQ(c.cells.size(), 1u);
  EXPECT_EQ(c.cells[0].change, Change::kNoChange);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("a.jsonl:3: ff, jax eager, batch 1 appears again (a.jsonl:2)"));
}

TEST(CompareTest, ATrainingStepIsAnotherWorkloadThanTheForwardPass) {
  json step = run_json("ff", "eager", 1, around(3e-3, 20));
  step["contract"] = {{"workload", "train"}, {"train_optimizer", "adam"}};
  const ResultsFile before = parse_results(jsonl({run_json("ff", "eager", 1, around(1e-3, 20))}), "b.jsonl");
  const ResultsFile after = parse_results(jsonl({step}), "a.jsonl");
  const ResultsComparison c = compare_results(before, after);
  EXPECT_TRUE(c.cells.empty()) << "a step compared with a forward pass would read as 3x slower";
  ASSERT_EQ(c.only_before.size(), 1u);
  ASSERT_EQ(c.only_after.size(), 1u);
  EXPECT_EQ(cell_name(c.only_before[0]), "ff, jax eager, batch 1");
  EXPECT_EQ(cell_name(c.only_after[0]), "ff, jax eager, batch 1, training step");
  // steps against steps compare
  const ResultsComparison steps = compare_results(after, after);
  ASSERT_EQ(steps.cells.size(), 1u);
  EXPECT_TRUE(steps.cells[0].cell.training);
}

TEST(CompareTest, RealResultsCompareEveryCell) {
  const ResultsComparison c =
      compare_results(read_results(kResults + "before.jsonl"), read_results(kResults + "after.jsonl"));
  ASSERT_EQ(c.cells.size(), 8u);
  for (const CellChange& x : c.cells) {
    ASSERT_TRUE(x.test) << cell_name(x.cell);
    EXPECT_GE(x.test->p_value, 0);
    EXPECT_LE(x.test->p_value, 1);
    EXPECT_LE(x.ratio_ci95.low, x.ratio_ci95.high);
  }
  EXPECT_TRUE(c.only_before.empty());
  EXPECT_TRUE(c.only_after.empty());
}

TEST(FindingsTest, CountsWinsAndSpeedupsOfRealResults) {
  const ResultsFile r = read_results(kResults + "study.json");
  const Findings f = find_findings(r);
  EXPECT_EQ(f.runs, 20u);
  EXPECT_EQ(f.failed, 4u);
  EXPECT_EQ(f.ok + f.mistrusted, 16u);
  EXPECT_EQ(f.memory_bound + f.compute_bound, 16u);
  EXPECT_EQ(f.speedups.size(), 8u) << "every compiled run against the eager run of its cell";
  ASSERT_TRUE(f.largest_speedup);
  for (const Speedup& s : f.speedups) {
    EXPECT_DOUBLE_EQ(s.speedup, r.runs[s.eager].median_seconds / r.runs[s.compiled].median_seconds);
  }
  EXPECT_EQ(f.models_compared, 2u);
  // written before rounds: a window's passes make no 95% interval of the cell, so no model has a
  // decided winner; the fastest is still each winner's run, and both models are ties
  std::size_t wins = 0;
  for (const ConfigWins& w : f.wins) wins += w.models.size();
  EXPECT_EQ(wins, 0u);
  EXPECT_EQ(f.tied_models.size(), 2u);
  for (const Winner& w : f.winners) {
    EXPECT_LE(r.runs[w.run].median_seconds, r.runs[w.runner_up].median_seconds);
    EXPECT_FALSE(w.decided);
  }
}

/// A run with rounds: round i's median is `centre` x drift[i] (the machine's speed in that
/// window), taken in sweep 0, pass i; its estimate and interval are the rounds'.
json rounds_run(const std::string& backend, const std::string& mode, double centre, const std::vector<double>& drift) {
  json r = run_json("ff", mode, 1, around(centre, 10));
  r["backend"] = backend;
  json rounds = json::array();
  std::vector<double> medians;
  for (std::size_t i = 0; i < drift.size(); ++i) {
    medians.push_back(centre * drift[i]);
    rounds.push_back({{"process", 0}, {"sweep", 0}, {"pass", static_cast<int>(i)}, {"median_seconds", medians.back()}});
  }
  std::sort(medians.begin(), medians.end());
  r["timing"]["rounds"] = rounds;
  r["timing"]["median_seconds"] = (medians[2] + medians[3]) / 2;
  r["timing"]["ci95_low_seconds"] = medians.front();
  r["timing"]["ci95_high_seconds"] = medians.back();
  r["timing"]["estimate"] = {{"coverage", 0.96875}};
  return r;
}

const std::vector<double> kDrift = {1.0, 1.08, 0.95, 1.12, 1.03, 0.97};   // one study's windows
const std::vector<double> kDrift2 = {1.05, 0.96, 1.1, 0.99, 1.02, 0.94};  // another's

// Rounds pair tick by tick (the same sweep and pass): the speedup is the median of the pairs'
// ratios, inside its interval. Rounds that share one tick (a profile's processes, all at sweep 0,
// pass 0) have no partner: the speedup is the medians' ratio with the two intervals' bounds, not
// every compiled round against one eager round. A decided winner whose run is mistrusted says so.
TEST(FindingsTest, RoundsPairOnlyTickByTickAndAMistrustedWinnerIsSaid) {
  json eager = rounds_run("jax", "eager", 2e-3, kDrift), compiled = rounds_run("jax", "compiled", 1e-3, kDrift2);
  Findings f = find_findings(parse_results(jsonl({eager, compiled}), "paired.jsonl"));
  ASSERT_EQ(f.speedups.size(), 1u);
  const Speedup& s = f.speedups[0];
  EXPECT_EQ(s.pairs, 6u);
  EXPECT_GE(s.speedup, s.ci95.low);
  EXPECT_LE(s.speedup, s.ci95.high);
  std::vector<double> ratios;
  for (std::size_t i = 0; i < kDrift.size(); ++i) ratios.push_back(2e-3 * kDrift[i] / (1e-3 * kDrift2[i]));
  std::sort(ratios.begin(), ratios.end());
  EXPECT_NEAR(s.speedup, (ratios[2] + ratios[3]) / 2, 1e-12);
  for (json* run : {&eager, &compiled}) {
    for (json& round : (*run)["timing"]["rounds"]) round["pass"] = 0;
  }
  f = find_findings(parse_results(jsonl({eager, compiled}), "one_tick.jsonl"));
  ASSERT_EQ(f.speedups.size(), 1u);
  EXPECT_EQ(f.speedups[0].pairs, 0u);
  const ResultsFile one_tick = parse_results(jsonl({eager, compiled}), "one_tick.jsonl");
  EXPECT_DOUBLE_EQ(f.speedups[0].speedup, one_tick.runs[0].median_seconds / one_tick.runs[1].median_seconds);
  // a clear win of a mistrusted run: named, and said to be mistrusted
  json fast = rounds_run("jax", "compiled", 1e-3, kDrift2);
  fast["outcome"] = {{"verdict", "mistrusted"}, {"reasons", {"too noisy"}}};
  ReportInput input;
  const ResultsFile mistrusted = parse_results(jsonl({rounds_run("jax", "eager", 2e-3, kDrift), fast}), "m.jsonl");
  input.results = &mistrusted;
  input.findings = find_findings(mistrusted);
  ASSERT_EQ(input.findings.wins.size(), 1u);
  EXPECT_EQ(input.findings.wins[0].mistrusted, std::vector<std::string>{"ff"});
  bool said = false;
  for (const std::string& sentence : report::findings_sentences(input)) {
    said = said || sentence.find("is fastest on 1 of 1 model (ff; its run mistrusted on ff, see its verdict)") !=
                       std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST(CompareTest, RoundsOfTwoIdenticalStudiesShowNoChange) {
  const ResultsFile a = parse_results(jsonl({rounds_run("jax", "eager", 1e-3, kDrift)}), "a.jsonl");
  const ResultsFile b = parse_results(jsonl({rounds_run("jax", "eager", 1e-3, kDrift2)}), "b.jsonl");
  const ResultsComparison c = compare_results(a, b);
  ASSERT_EQ(c.cells.size(), 1u);
  EXPECT_EQ(c.cells[0].tested_on, "rounds");
  EXPECT_EQ(c.cells[0].change, Change::kNoChange);
  EXPECT_LE(c.cells[0].ratio_ci95.low, 1.0);
  EXPECT_GE(c.cells[0].ratio_ci95.high, 1.0);
  EXPECT_TRUE(slower_than(c, 0.05).empty());
}

TEST(CompareTest, AMachineWhosePaceMovedWithinAFileIsSaid) {
  // 8 cells whose rounds move together tick by tick: the machine's pace, read from the cells
  const std::vector<double> jump = {0.7, 0.72, 0.75, 1.15, 1.2, 1.18};  // 70% apart halfway through
  std::vector<json> steady, moved;
  for (const char* backend : {"jax", "libtorch", "tensorflow", "torch"}) {
    for (const char* mode : {"eager", "compiled"}) {
      steady.push_back(rounds_run(backend, mode, 1e-3, kDrift));
      moved.push_back(rounds_run(backend, mode, 1e-3, jump));
    }
  }
  const ResultsComparison c =
      compare_results(parse_results(jsonl(steady), "a.jsonl"), parse_results(jsonl(moved), "b.jsonl"));
  ASSERT_TRUE(c.before_pace.has_value());
  ASSERT_TRUE(c.after_pace.has_value());
  EXPECT_EQ(c.after_pace->ticks, 6u);
  // 10th and 90th percentiles of 6 ticks: the lowest and the 5th (rank 4 of 0..5), over the estimate
  EXPECT_NEAR(c.before_pace->spread(), 1.08 / 0.95 - 1, 1e-9);
  EXPECT_NEAR(c.after_pace->spread(), 1.18 / 0.7 - 1, 1e-9);
  std::size_t pace_warnings = 0;
  for (const std::string& w : c.warnings) {
    if (w.find("pace moved") != std::string::npos) {
      ++pace_warnings;
      EXPECT_NE(w.find("within the after file"), std::string::npos) << w;
      EXPECT_NE(w.find("69% slower"), std::string::npos) << w;
    }
  }
  EXPECT_EQ(pace_warnings, 1u);
  // fewer than 8 cells a tick: no pace
  const ResultsComparison few =
      compare_results(parse_results(jsonl({steady[0]}), "a.jsonl"), parse_results(jsonl({moved[0]}), "b.jsonl"));
  EXPECT_FALSE(few.after_pace.has_value());
}

/// rounds_run with the machine's canary read before each round: `canary` seconds x drift[i]
json canary_run(const std::string& backend, double centre, double canary, const std::vector<double>& drift) {
  json r = rounds_run(backend, "eager", centre, drift);
  for (std::size_t i = 0; i < drift.size(); ++i) r["timing"]["rounds"][i]["machine_canary_seconds"] = canary * drift[i];
  return r;
}

TEST(CompareTest, CoresThatSlowedWhileTheMemoryDidNotAreSaid) {
  // this VM, 2026-12-04: every cell 15-25 % slower in a rerun, the memory canary 2 % (the cores'
  // pace moved, not the memory's): the CPU canary, 18 % slower, says it
  json ja = canary_run("jax", 1e-3, 4e-3, kDrift), ta = canary_run("torch", 2e-3, 4e-3, kDrift);
  json jb = canary_run("jax", 1.2e-3, 4.08e-3, kDrift2), tb = canary_run("torch", 2.4e-3, 4.08e-3, kDrift2);
  for (json* r : {&ja, &ta}) {
    for (json& round : (*r)["timing"]["rounds"]) round["cpu_canary_seconds"] = 5e-4;
  }
  for (json* r : {&jb, &tb}) {
    for (json& round : (*r)["timing"]["rounds"]) round["cpu_canary_seconds"] = 5.9e-4;
  }
  const ResultsComparison c =
      compare_results(parse_results(jsonl({ja, ta}), "a.jsonl"), parse_results(jsonl({jb, tb}), "b.jsonl"));
  ASSERT_TRUE(c.cpu.has_value());
  EXPECT_NEAR(c.cpu->change, 0.18, 1e-9);
  EXPECT_EQ(c.cpu->after_rounds, 12u);
  ASSERT_TRUE(c.machine.has_value());
  EXPECT_LT(std::abs(c.machine->change), 0.05);
  ASSERT_EQ(c.warnings.size(), 1u);  // the cores', not the memory's
  EXPECT_NE(c.warnings[0].find("its CPU canary (a chain of multiply-adds before every round) took +18.0%"),
            std::string::npos)
      << c.warnings[0];
}

TEST(CompareTest, AMachineThatChangedBetweenTheFilesIsSaid) {
  // every cell 20% slower in the second file, and the machine's canary 20% slower with it
  const ResultsFile a =
      parse_results(jsonl({canary_run("jax", 1e-3, 4e-3, kDrift), canary_run("torch", 2e-3, 4e-3, kDrift)}), "a.jsonl");
  const ResultsFile b = parse_results(
      jsonl({canary_run("jax", 1.2e-3, 4.8e-3, kDrift2), canary_run("torch", 2.4e-3, 4.8e-3, kDrift2)}), "b.jsonl");
  const ResultsComparison c = compare_results(a, b);
  ASSERT_TRUE(c.machine.has_value());
  EXPECT_EQ(c.machine->before_rounds, 12u);
  EXPECT_EQ(c.machine->after_rounds, 12u);
  // the medians of kDrift (1.015) and kDrift2 (1.005) times the canaries
  EXPECT_NEAR(c.machine->before_seconds, 4e-3 * 1.015, 1e-12);
  EXPECT_NEAR(c.machine->after_seconds, 4.8e-3 * 1.005, 1e-12);
  EXPECT_NEAR(c.machine->change, 4.8 * 1.005 / (4 * 1.015) - 1, 1e-9);
  ASSERT_FALSE(c.warnings.empty());
  EXPECT_NE(c.warnings.back().find("the machine itself changed"), std::string::npos) << c.warnings.back();
  // the same machine: no warning; files without the canary: no machine at all
  const ResultsFile same = parse_results(
      jsonl({canary_run("jax", 1.2e-3, 4e-3, kDrift2), canary_run("torch", 2.4e-3, 4e-3, kDrift2)}), "b.jsonl");
  const ResultsComparison d = compare_results(a, same);
  ASSERT_TRUE(d.machine.has_value());
  EXPECT_TRUE(d.warnings.empty());
  const ResultsComparison e =
      compare_results(a, parse_results(jsonl({rounds_run("jax", "eager", 1e-3, kDrift2)}), "old.jsonl"));
  EXPECT_FALSE(e.machine.has_value());
}

TEST(CompareTest, TheGateAsksForSignificanceOverAllCellsTogether) {
  // one cell 30% slower in every round (p = 0.0022 on 6 vs 6) among 25 unchanged ones: the cell's own
  // test calls it slower, but Holm's threshold for the smallest of 26 p values is 0.05 / 26 = 0.0019
  std::vector<json> before, after;
  for (int i = 0; i < 25; ++i) {
    before.push_back(rounds_run("jax" + std::to_string(i), "eager", 1e-3, kDrift));
    after.push_back(rounds_run("jax" + std::to_string(i), "eager", 1e-3, kDrift2));
  }
  before.push_back(rounds_run("torch", "eager", 1e-3, kDrift));
  after.push_back(rounds_run("torch", "eager", 1.3e-3, kDrift2));
  const ResultsComparison c =
      compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"));
  ASSERT_EQ(c.cells.size(), 26u);
  EXPECT_EQ(tested_cells(c), 26u);
  EXPECT_EQ(c.cells.back().change, Change::kSlower);
  EXPECT_TRUE(slower_than(c, 0.05).empty());
  // at a family-wise alpha of 0.2 (0.1 of it the cells') the threshold is 0.1 / 26 = 0.0038: it fails
  const ResultsComparison loose =
      compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"), 0.2);
  ASSERT_EQ(slower_than(loose, 0.05).size(), 1u);
  EXPECT_EQ(slower_than(loose, 0.05)[0]->cell.backend, "torch");
}

/// Four backends of four cells each (two models, eager and compiled), measured twice: the second
/// study `drift` slower as a whole, each cell by its own factor of `noise` too (each mode takes each
/// factor twice), and `slow_backend`'s cells `slowdown` slower on top.
ResultsComparison four_backends(double drift, double slowdown, const std::string& slow_backend) {
  const std::vector<double> noise = {1.04, 0.97, 1.08, 1.0};
  std::vector<json> before, after;
  int b = 0;
  for (const std::string backend : {"jax", "libtorch", "tensorflow", "torch"}) {
    ++b;
    for (int m = 0; m < 4; ++m) {
      const std::string mode = m % 2 == 0 ? "eager" : "compiled";
      const double f =
          drift * noise[static_cast<std::size_t>((m + b) % 4)] * (backend == slow_backend ? slowdown : 1.0);
      before.push_back(rounds_run(backend, mode, 1e-3, kDrift));
      after.push_back(rounds_run(backend, mode, 1e-3 * f, kDrift2));
      before.back()["model"] = after.back()["model"] = m < 2 ? "ff" : "cnn";
    }
  }
  return compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"));
}

TEST(CompareTest, ABackendSlowerThanTheOthersIsFoundThroughAStudysDrift) {
  // the second study 3% slower as a whole, torch's cells 12% more: each cell alone is too noisy
  // for the gate, and every backend moved, but torch moved against the others
  const ResultsComparison c = four_backends(1.03, 1.12, "torch");
  ASSERT_EQ(c.groups.size(), 6u);  // four backends, then two modes
  for (const GroupChange& g : c.groups) {
    EXPECT_EQ(g.cells, g.dimension == "backend" ? 4u : 8u);
    EXPECT_EQ(g.other_cells, g.dimension == "backend" ? 12u : 8u);
    ASSERT_TRUE(g.test) << g.name;
    const bool torch = g.dimension == "backend" && g.name == "torch";
    EXPECT_EQ(g.change, torch ? Change::kSlower : Change::kNoChange) << g.dimension << " " << g.name;
  }
  const GroupChange& torch = c.groups[3];
  EXPECT_LT(torch.test->p_value, 0.025 / 4);  // all 4 above the 12 others: Holm's smallest threshold
  EXPECT_GT(torch.ratio, 1.08);
  EXPECT_LT(torch.ratio_ci95.low, torch.ratio);
  EXPECT_TRUE(slower_than(c, 0.05).empty());
  const auto slower = groups_slower_than(c, 0.05);
  ASSERT_EQ(slower.size(), 1u);
  EXPECT_EQ(slower[0]->name, "torch");
  EXPECT_TRUE(groups_slower_than(c, 0.2).empty());  // not 20% slower
  // the same drift without the slowdown: no backend is slower than the others
  const ResultsComparison aa = four_backends(1.03, 1.0, "");
  EXPECT_TRUE(groups_slower_than(aa, 0.05).empty());
  for (const GroupChange& g : aa.groups) EXPECT_EQ(g.change, Change::kNoChange) << g.name;
}

// Half the cells slower together (every compiled cell +20 %, both backends): the cells' spread
// around their common shift takes it for what two studies differ by and flags no cell; the
// compiled mode against the eager one is what finds it, and the gate fails on it. The same files
// without the slowdown flag no group.
TEST(CompareTest, AModeSlowerThanTheOtherIsFoundWhenHalfTheCellsMove) {
  const auto study = [](double compiled_slowdown) {
    std::vector<json> before, after;
    const std::vector<double> noise = {1.01, 0.99, 1.02, 0.98, 1.0, 1.015, 0.985, 1.005};
    std::size_t i = 0;
    for (const std::string backend : {"jax", "torch"}) {
      for (const std::string mode : {"eager", "compiled"}) {
        for (const std::string model : {"ff", "cnn", "rnn", "transformer"}) {
          json b = rounds_run(backend, mode, 1e-3, kDrift),
               a = rounds_run(backend, mode, 1e-3 * noise[i++ % 8] * (mode == "compiled" ? compiled_slowdown : 1.0),
                              kDrift2);
          b["model"] = a["model"] = model;
          before.push_back(b);
          after.push_back(a);
        }
      }
    }
    return compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"));
  };
  const ResultsComparison ab = study(1.2);
  const auto slower = groups_slower_than(ab, 0.05);
  ASSERT_EQ(slower.size(), 1u);
  EXPECT_EQ(slower[0]->dimension, "mode");
  EXPECT_EQ(slower[0]->name, "compiled");
  EXPECT_GT(slower[0]->ratio, 1.15);
  EXPECT_TRUE(groups_slower_than(study(1.0), 0.05).empty());
}

TEST(CompareTest, AKnownSlowdownIsFoundAndTheGateFailsOnIt) {
  const ResultsFile a = parse_results(
      jsonl({rounds_run("jax", "eager", 1e-3, kDrift), rounds_run("torch", "eager", 1e-3, kDrift)}), "a.jsonl");
  std::vector<double> slow = kDrift2;
  const ResultsFile b = parse_results(
      jsonl({rounds_run("jax", "eager", 1e-3, kDrift2), rounds_run("torch", "eager", 1.3e-3, kDrift2)}), "b.jsonl");
  const ResultsComparison c = compare_results(a, b);
  ASSERT_EQ(c.cells.size(), 2u);
  EXPECT_EQ(c.cells[0].change, Change::kNoChange);  // jax: the same
  EXPECT_EQ(c.cells[1].change, Change::kSlower);    // torch: 30% slower, every round
  ASSERT_TRUE(c.cells[1].test);
  EXPECT_NEAR(c.cells[1].test->p_value, 0.0021645021645021645, 1e-12);  // scipy: 6 vs 6, all apart
  ASSERT_EQ(slower_than(c, 0.05).size(), 1u);
  EXPECT_EQ(slower_than(c, 0.05)[0]->cell.backend, "torch");
  EXPECT_TRUE(slower_than(c, 0.5).empty());  // not 50% slower
  // below the minimum effect a significant change is no change
  const ResultsComparison lenient = compare_results(a, b, 0.05, 0.4);
  EXPECT_EQ(lenient.cells[1].change, Change::kNoChange);
  EXPECT_THROW(compare_results(a, b, 0.05, 1.5), Error);
}

/// Forty cells (four backends of ten) with tight rounds (1 % apart), measured twice: in the second
/// study each cell moved by its own factor (what two studies of a shared machine differ by, 5 % sd,
/// which neither study's rounds sample), and `slow_backend`'s cells `slowdown` more.
ResultsComparison studies_apart(double slowdown, const std::string& slow_backend) {
  const std::vector<double> tight = {1.0, 1.01, 0.99, 1.005, 0.995, 1.0}, tight2 = {0.995, 1.0, 1.01, 0.99, 1.0, 1.005};
  const std::vector<double> apart = {0.95, 1.0, 1.05, 1.08, 0.93, 1.02, 0.97, 1.06, 0.99, 1.04};
  std::vector<json> before, after;
  for (const std::string backend : {"jax", "libtorch", "tensorflow", "torch"}) {
    for (std::size_t m = 0; m < apart.size(); ++m) {
      const std::string mode = "mode" + std::to_string(m);
      const double f = apart[(m + backend.size()) % apart.size()] * (backend == slow_backend ? slowdown : 1.0);
      before.push_back(rounds_run(backend, mode, 1e-3, tight));
      after.push_back(rounds_run(backend, mode, 1e-3 * f, tight2));
    }
  }
  return compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"));
}

TEST(CompareTest, WhatTwoStudiesDifferByIsNotAChange) {
  // an A/A whose cells each moved by 5 % sd between the studies: every U test on 6 tight rounds a
  // side is significant, but the cells' spread around their median shift says what studies differ by
  const ResultsComparison aa = studies_apart(1.0, "");
  ASSERT_TRUE(aa.studies);
  EXPECT_EQ(aa.studies->cells, 40u);
  EXPECT_NEAR(aa.studies->shift, 0.01, 0.015);
  EXPECT_GT(aa.studies->between, 0.025);
  EXPECT_LT(aa.studies->between, 0.08);
  std::size_t u_significant = 0, flagged = 0;
  for (const CellChange& c : aa.cells) {
    ASSERT_TRUE(c.test);
    u_significant += c.test->p_value < 0.05 && std::abs(c.ratio - 1) >= 0.05;
    flagged += c.change != Change::kNoChange;
    EXPECT_GE(c.p_value(), c.test->p_value);
    EXPECT_LE(c.ratio_ci95.low, c.ratio);  // the interval widened by the between-study spread
    EXPECT_GE(c.ratio_ci95.high, c.ratio);
  }
  EXPECT_GE(u_significant, 12u);  // what the U test alone would flag
  EXPECT_LE(flagged, 2u);
  EXPECT_TRUE(slower_than(aa, 0.05).empty());
  EXPECT_TRUE(groups_slower_than(aa, 0.05).empty());
  // a backend 20 % slower on top: its cells are slower than two studies differ by, and the gate fails
  const ResultsComparison ab = studies_apart(1.2, "torch");
  std::size_t torch_slower = 0, others_slower = 0;
  for (const CellChange& c : ab.cells)
    (c.cell.backend == "torch" ? torch_slower : others_slower) += c.change == Change::kSlower;
  EXPECT_GE(torch_slower, 4u);  // each cell alone is near what studies differ by; the backend is clear
  EXPECT_LE(others_slower, 2u);
  const auto slower = groups_slower_than(ab, 0.05);
  ASSERT_EQ(slower.size(), 1u);
  EXPECT_EQ(slower[0]->name, "torch");
  // too few cells to tell what studies differ by: the U tests alone
  const ResultsFile one = parse_results(jsonl({rounds_run("jax", "eager", 1e-3, kDrift)}), "a.jsonl");
  EXPECT_FALSE(compare_results(one, one).studies);
}

/// Forty cells of tight rounds measured twice, the second study `shift` slower as a whole (each cell
/// by its own few % too); both files carry a machine level of `level` (log units), or none (0).
ResultsComparison shifted_studies(double shift, double level) {
  const std::vector<double> tight = {1.0, 1.01, 0.99, 1.005, 0.995, 1.0}, tight2 = {0.995, 1.0, 1.01, 0.99, 1.0, 1.005};
  const std::vector<double> apart = {0.98, 1.0, 1.02, 1.01, 0.99, 1.0, 0.985, 1.015, 0.995, 1.005};
  std::vector<json> before, after;
  for (const std::string backend : {"jax", "libtorch", "tensorflow", "torch"}) {
    for (std::size_t m = 0; m < apart.size(); ++m) {
      const std::string mode = "mode" + std::to_string(m);
      before.push_back(rounds_run(backend, mode, 1e-3, tight));
      after.push_back(rounds_run(backend, mode, 1e-3 * apart[m] * shift, tight2));
      if (level > 0) {
        before.back()["timing"]["estimate"]["level_spread"] = level;
        after.back()["timing"]["estimate"]["level_spread"] = level;
      }
    }
  }
  return compare_results(parse_results(jsonl(before), "a.jsonl"), parse_results(jsonl(after), "b.jsonl"));
}

TEST(CompareTest, AShiftWithinWhatTheMachinesLevelsExplainDoesNotFailTheGate) {
  // every cell 6 % slower in the second study, whose machine level (and the first's) is 2.5 %: the
  // shift's sd is sqrt(2) x 2.5 % (and the median's small part), z = log(1.06) / 0.0354 = 1.65, p 0.1
  const ResultsComparison aa = shifted_studies(1.06, 0.025);
  ASSERT_TRUE(aa.studies);
  EXPECT_NEAR(aa.studies->shift, 0.06, 0.002);
  EXPECT_DOUBLE_EQ(aa.studies->level_before, 0.025);
  EXPECT_DOUBLE_EQ(aa.studies->level_after, 0.025);
  EXPECT_GT(aa.studies->shift_sd, std::sqrt(2.0) * 0.025);
  EXPECT_LT(aa.studies->shift_sd, std::sqrt(2.0) * 0.025 * 1.01);
  EXPECT_GT(aa.studies->shift_p_value, 0.05);
  EXPECT_LT(aa.studies->shift_ci95.low, 1.0);
  EXPECT_GT(aa.studies->shift_ci95.high, 1.06);
  EXPECT_FALSE(shift_slower_than(aa, 0.05));
  // files without a machine level: the cells' spread alone, and the same shift fails the gate
  const ResultsComparison old = shifted_studies(1.06, 0);
  EXPECT_EQ(old.studies->level_before, 0.0);
  EXPECT_LT(old.studies->shift_p_value, 1e-6);
  EXPECT_TRUE(shift_slower_than(old, 0.05));
  EXPECT_FALSE(shift_slower_than(old, 0.07));  // not 7 % slower
  // a whole study 20 % slower is beyond the levels: it fails
  const ResultsComparison slow = shifted_studies(1.2, 0.025);
  EXPECT_LT(slow.studies->shift_p_value, 1e-6);
  EXPECT_TRUE(shift_slower_than(slow, 0.05));
}

TEST(FindingsTest, AWinnerIsNamedOnlyWhenPairedRoundsSaySo) {
  // torch is 10% faster than jax in every window, while the windows differ by up to 12%: paired
  // rounds decide it, though the two intervals overlap
  std::vector<json> runs = {rounds_run("jax", "eager", 1.1e-3, kDrift), rounds_run("torch", "eager", 1e-3, kDrift)};
  Findings f = find_findings(parse_results(jsonl(runs), "s.jsonl"));
  ASSERT_EQ(f.winners.size(), 1u);
  EXPECT_TRUE(f.winners[0].decided);
  EXPECT_EQ(f.winners[0].pairs, 6u);
  EXPECT_NEAR(f.winners[0].margin_ci95.low, 1.1, 1e-9);
  ASSERT_EQ(f.wins.size(), 1u);
  EXPECT_EQ(f.wins[0].config.backend, "torch");
  // 2% apart with window-to-window noise of its own: a tie, and no win is claimed
  runs = {rounds_run("jax", "eager", 1.02e-3, kDrift2), rounds_run("torch", "eager", 1e-3, kDrift)};
  f = find_findings(parse_results(jsonl(runs), "s.jsonl"));
  ASSERT_EQ(f.winners.size(), 1u);
  EXPECT_FALSE(f.winners[0].decided);
  EXPECT_TRUE(f.wins.empty());
  EXPECT_EQ(f.tied_models, std::vector<std::string>{"ff"});
}

TEST(FindingsTest, TheMachinesLevelIsTheMedianOfTheRunsThatReadIt) {
  std::vector<json> runs = {rounds_run("jax", "eager", 1.1e-3, kDrift), rounds_run("torch", "eager", 1e-3, kDrift),
                            rounds_run("tensorflow", "eager", 1e-3, kDrift)};
  EXPECT_EQ(find_findings(parse_results(jsonl(runs), "s.jsonl")).level_spread, 0.0);  // files before it
  runs[0]["timing"]["estimate"]["level_spread"] = 0.014;
  runs[1]["timing"]["estimate"]["level_spread"] = 0.015;
  runs[2]["timing"]["estimate"]["level_spread"] = 0.02;
  EXPECT_DOUBLE_EQ(find_findings(parse_results(jsonl(runs), "s.jsonl")).level_spread, 0.015);
}

TEST(FindingsTest, ASpeedupCarriesThePairedInterval) {
  std::vector<double> jit_drift = kDrift;
  jit_drift[0] *= 1.02;  // the pairs disagree a little
  const std::vector<json> runs = {rounds_run("jax", "eager", 2e-3, kDrift), rounds_run("jax", "jit", 1e-3, jit_drift)};
  const Findings f = find_findings(parse_results(jsonl(runs), "s.jsonl"));
  ASSERT_EQ(f.speedups.size(), 1u);
  EXPECT_EQ(f.speedups[0].pairs, 6u);
  EXPECT_NEAR(f.speedups[0].ci95.high, 2.0, 1e-9);
  EXPECT_NEAR(f.speedups[0].ci95.low, 2.0 / 1.02, 1e-9);
}

TEST(FindingsTest, SpeedupSourceComparesTimeInsideAndOutsideTheLayers) {
  json eager = run_json("ff", "eager", 1, around(1e-3, 10));
  json jit = run_json("ff", "jit", 1, around(2e-4, 10));
  auto layer = [](double seconds) {
    return json{{"event", 0},
                {"name", "dot"},
                {"ops", json::array()},
                {"flops", 10},
                {"bytes", 10},
                {"lower_bound_seconds", 0.0},
                {"measured_seconds", seconds},
                {"efficiency", 0.0},
                {"bound", nullptr}};
  };
  eager["layers"] = {layer(1.5e-4)};
  eager["unattributed_seconds"] = 8.5e-4;  // dispatch: most of the eager pass
  jit["layers"] = {layer(1.4e-4)};
  jit["unattributed_seconds"] = 0.6e-4;
  const ResultsFile r = parse_results(jsonl({eager, jit}), "s.jsonl");
  const Findings f = find_findings(r);
  ASSERT_EQ(f.speedups.size(), 1u);
  EXPECT_EQ(f.speedups[0].source, SpeedupSource::kDispatch);
}

}  // namespace
}  // namespace neuralcost
