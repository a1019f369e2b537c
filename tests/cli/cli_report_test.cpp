// `neural-cost report`, `cost` and `compare` end to end on real results (tests/inputs/results,
// made by make_results.sh), and their answers to bad input: one `error:` line and exit 1 where
// nothing can be reported, a warning naming the line where something can.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/measure/to_target.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kResults = std::string(NEURALCOST_TEST_INPUTS) + "/results/";

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/nc_report_" + std::to_string(::getpid()) + "_" + name;
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

/// The JSON a report page embeds for its charts (and its cost).
json report_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"nc-report-data\">";
  const std::size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const std::size_t end = html.find("</script>", begin);
  return json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

/// Cost per sample against price x median / batch for every measured run of `results`.
void expect_cost_matches(const json& cost, const json& results_runs, double price) {
  ASSERT_EQ(cost["runs"].size(), results_runs.size());
  std::size_t priced = 0;
  for (std::size_t i = 0; i < results_runs.size(); ++i) {
    const json& run = results_runs[i];
    const json& c = cost["runs"][i];
    EXPECT_EQ(c["model"], run["model"]);
    EXPECT_EQ(c["batch"], run["batch"]);
    if (run["failed"].get<bool>()) {
      EXPECT_TRUE(c["cost"].is_null());
      continue;
    }
    const double median = run["timing"]["median_seconds"].get<double>();
    const double batch = run["batch"].get<double>();
    EXPECT_DOUBLE_EQ(c["cost"]["per_sample"]["value"].get<double>(), price / 3600 * median / batch);
    EXPECT_DOUBLE_EQ(c["cost"]["per_sample"]["low"].get<double>(),
                     price / 3600 * run["timing"]["ci95_low_seconds"].get<double>() / batch);
    EXPECT_DOUBLE_EQ(c["cost"]["per_million_samples"]["value"].get<double>(), 1e6 * price / 3600 * median / batch);
    ++priced;
  }
  EXPECT_GT(priced, 0u);
}

TEST(CliReportTest, CostPerSampleIsPriceTimesMedianOverBatchInTheJsonAndTheReport) {
  const json study = json::parse(slurp(kResults + "study.json"));
  CliResult r = run_cli("cost " + kResults + "study.json --price-per-hour 2.75 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json cost = json::parse(r.out);
  EXPECT_EQ(cost["currency"], "USD");
  EXPECT_THAT(cost["training"].get<std::string>(), HasSubstr("neural-cost train-to-target --price-per-hour P"));
  expect_cost_matches(cost, study["runs"], 2.75);
  // the report carries the same figures (and prints them in its cost table)
  const std::string page = temp_path("cost.html");
  r = run_cli("report " + kResults + "study.json --price-per-hour 2.75 -o " + page);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: wrote"));
  expect_cost_matches(report_data(slurp(page))["cost"], study["runs"], 2.75);
  std::filesystem::remove(page);
}

TEST(CliReportTest, CostTablesAndAPriceFile) {
  const std::string prices = write("prices.json", R"({"currency": "EUR", "price_per_hour": {"host": 1.5}})");
  CliResult r = run_cli("cost " + kResults + "before.jsonl --price-file " + prices);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("per 1M samples"));
  EXPECT_THAT(r.out, HasSubstr("1.5 EUR"));
  EXPECT_THAT(r.out, HasSubstr("A training run (profile --train) is priced per training sample"));
  EXPECT_THAT(r.out, HasSubstr("Training cost to a quality target needs the steps to reach it"));
  r = run_cli("cost " + kResults + "before.jsonl --price-file " + prices + " --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("model,backend,mode,batch,price_per_hour,per_sample,"));
  const std::string other = write("other.json", R"({"price_per_hour": {"h100-sxm": 2.5}})");
  r = run_cli("cost " + kResults + "before.jsonl --price-file " + other + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no price for hardware 'host'"));
  r = run_cli("cost --help");
  EXPECT_THAT(r.out, HasSubstr("Training cost to a quality target needs the steps to reach it"));
  std::filesystem::remove(prices);
  std::filesystem::remove(other);
}

TEST(CliReportTest, BadPricesAreOneErrorLine) {
  for (const auto& [price, message] : std::vector<std::pair<std::string, std::string>>{
           {"-2", "error: --price-per-hour '-2' must not be negative (got -2)\n"},
           {"abc", "error: --price-per-hour 'abc' is not a number\n"},
           {"nan", "error: --price-per-hour 'nan' must be a finite number\n"}}) {
    for (const char* command : {"cost", "report"}) {
      const CliResult r = run_cli(std::string(command) + " " + kResults + "study.json --price-per-hour=" + price +
                                  " -o " + temp_path("never.md"));
      EXPECT_EQ(r.exit_code, 1) << command << " " << price;
      EXPECT_EQ(r.err, message) << command;
      EXPECT_FALSE(std::filesystem::exists(temp_path("never.md")));
    }
  }
  const CliResult r = run_cli("cost " + kResults + "study.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: cost needs a price: --price-per-hour P or --price-file FILE\n");
}

TEST(CliReportTest, EmptyAndUnreadableFilesAreOneErrorLine) {
  const std::string empty = write("empty.jsonl", "");
  for (const char* command : {"report", "cost --price-per-hour 1", "compare "}) {
    const std::string args =
        std::string(command) + " " + empty + (std::string(command).rfind("compare", 0) == 0 ? " " + empty : "");
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err, "error: " + empty + ": empty: no runs to report\n") << args;
    EXPECT_TRUE(r.out.empty());
  }
  CliResult r = run_cli("report /nonexistent/results.jsonl --format md");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: cannot open results file '/nonexistent/results.jsonl'\n");
  // an option that does not apply is an error, not ignored
  r = run_cli("report " + kResults + "after.jsonl --format md --alpha 0.01");
  EXPECT_EQ(r.err, "error: --alpha applies only with --baseline (the comparison's test)\n");
  r = run_cli("report " + kResults + "after.jsonl --format md --currency EUR");
  EXPECT_EQ(r.err, "error: --currency applies only with --price-per-hour or --price-file\n");
  // a directory where a file belongs: said so (it leaked an internal stream error)
  const std::string dir = ::testing::TempDir();
  for (const std::string& args :
       {"report " + dir, "compare " + dir + " " + dir, "cost " + dir + " --price-per-hour 1"}) {
    r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err, "error: '" + dir + "' is a directory, not a results file\n") << args;
  }
  // every line bad: each named, then one error
  const std::string junk = write("junk.jsonl", "hello\n{\"model\": 3}\n");
  r = run_cli("report " + junk + " --format md");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 3u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: " + junk + ":1: not JSON"));
  EXPECT_THAT(r.err, HasSubstr("warning: " + junk + ":2: field 'model' must be a non-empty string; line skipped"));
  EXPECT_THAT(r.err, HasSubstr("error: " + junk + ": no runs to report"));
  std::filesystem::remove(empty);
  std::filesystem::remove(junk);
}

TEST(CliReportTest, ALineTooLargeForTheMemoryLimitIsOneErrorLineNotATerminate) {
  // a million small objects on one line (12 MB) under a 256 MiB address-space limit: the parse
  // runs out of memory, and nlohmann::json's destructor, which allocates, used to fail too
  // while unwinding (std::terminate, exit 134). The limit leaves room for an ordinary report.
  std::string line = "[";
  for (int i = 0; i < 1000000; ++i) line += i == 0 ? "{\"k\":[0,1]}" : ",{\"k\":[0,1]}";
  const std::string big = write("big.jsonl", line + "]\n");
  const std::string limit = "ulimit -v 262144;";
  const CliResult ordinary = run_cli_env(limit, "report " + kResults + "before.jsonl --format md");
  ASSERT_EQ(ordinary.exit_code, 0) << ordinary.err;
  const CliResult r = run_cli_env(limit, "report " + big + " --format md");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "error: out of memory (the model or an input is too large for this machine)\n");
  std::filesystem::remove(big);
}

TEST(CliReportTest, ATruncatedOrForeignLineIsAWarningAndTheGoodLinesAreReported) {
  std::string text = slurp(kResults + "after.jsonl");
  const std::size_t lines = count_lines(text);
  text.insert(text.find('\n') + 1, "{\"benchmark\": \"something else\"}\n");  // a foreign line 2
  text.resize(text.size() - 200);                                             // the last line cut short
  const std::string cut = write("cut.jsonl", text);
  const CliResult r = run_cli("report " + cut + " --format md");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: " + cut + ":2: not a results line"));
  EXPECT_THAT(r.err, HasSubstr(fmt::format("warning: {}:{}: truncated", cut, lines + 1)));
  EXPECT_EQ(count_lines(r.err), 2u) << r.err;
  // the report names them too, and shows the 7 runs that were read
  EXPECT_THAT(r.out, HasSubstr("## Lines skipped"));
  EXPECT_THAT(r.out, HasSubstr("7 runs: "));
  std::filesystem::remove(cut);
}

TEST(CliReportTest, MarkdownReportEscapesNamesFromOutside) {
  const CliResult r = run_cli("report " + kResults + "study.json --format md --price-per-hour 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# neural-cost report"));
  EXPECT_THAT(r.out, HasSubstr("## Findings"));
  EXPECT_THAT(r.out, HasSubstr("## Failed cells"));
  EXPECT_THAT(r.out, HasSubstr("## Cost"));
  EXPECT_THAT(r.out, HasSubstr("&lt;script&gt;window.ncInjected=1&lt;/script&gt;"));
  EXPECT_THAT(r.out, Not(HasSubstr("<script")));
  EXPECT_THAT(r.out, Not(HasSubstr("<b>")));
}

TEST(CliReportTest, HtmlReportIsOnePageWithOnlyItsOwnScripts) {
  const std::string page = temp_path("study.html");
  const CliResult r = run_cli("report " + kResults + "study.json -o " + page);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(page);
  // Vega, the data and the page script: no other script element, no file or network fetch
  std::size_t scripts = 0;
  for (std::size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 3u);
  EXPECT_THAT(html, Not(HasSubstr("<b>bold")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;window.ncInjected=1&lt;/script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("src=\"http")));
  EXPECT_THAT(html, Not(HasSubstr("sourceMappingURL")));
  const json data = report_data(html);
  EXPECT_EQ(data["charts"].size(), 5u);  // roofline, latency, efficiency, scaling, speedup
  EXPECT_EQ(data["charts"][0]["expected"], 16) << "a point per measured run";
  // hovering a layer of the chosen run shows its figures
  const json& spec = data["charts"][0]["spec"];
  ASSERT_EQ(spec["data"][3]["name"], "layers");
  ASSERT_FALSE(spec["data"][3]["values"].empty());
  for (const char* key : {"layer", "kind", "FLOPs", "bytes", "arithmetic intensity", "time", "efficiency", "limit"}) {
    EXPECT_TRUE(spec["data"][3]["values"][0]["tooltip"].contains(key)) << key;
  }
  std::filesystem::remove(page);
}

TEST(CliReportTest, HtmlNeedsVegaAndSaysWhere) {
  const CliResult r = run_cli_env("NEURALCOST_VEGA_DIR=/nonexistent",
                                  "report " + kResults + "study.json -o " + temp_path("novega.html"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u);
  EXPECT_THAT(r.err, HasSubstr("error: the HTML report needs Vega, and /nonexistent/vega-util.min.js is missing: "
                               "install Debian's libjs-vega"));
  EXPECT_FALSE(std::filesystem::exists(temp_path("novega.html")));
  // Markdown needs none
  EXPECT_EQ(run_cli_env("NEURALCOST_VEGA_DIR=/nonexistent", "report " + kResults + "study.json --format md").exit_code,
            0);
}

TEST(CliReportTest, CompareTablesJsonAndAReportSection) {
  const std::string before = kResults + "before.jsonl", after = kResults + "after.jsonl";
  CliResult r = run_cli("compare " + before + " " + after);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ff, torch eager, batch 1"));
  EXPECT_THAT(r.out, HasSubstr("Mann-Whitney U"));
  r = run_cli("compare " + before + " " + after + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["cells"].size(), 8u);
  for (const json& c : j["cells"]) {
    EXPECT_TRUE(c["u_test"].is_object());
    const double p = c["u_test"]["p_value"].get<double>();
    const std::string result = c["result"];
    // significant: p below alpha and a change of at least the minimum effect (5% by default)
    const double change = std::abs(c["ratio"].get<double>() - 1);
    EXPECT_EQ(result == "faster" || result == "slower", p < 0.05 && change >= 0.05) << result << " p " << p;
    EXPECT_DOUBLE_EQ(c["ratio"].get<double>(),
                     c["after"]["median_seconds"].get<double>() / c["before"]["median_seconds"].get<double>());
  }
  EXPECT_DOUBLE_EQ(j["min_effect"].get<double>(), 0.05);
  // the CI gate: exits 1 naming the cells slower by more than 5%, after printing the table
  r = run_cli("compare " + before + " " + after + " --fail-if-slower 5%");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("ff, torch eager, batch 1"));
  EXPECT_THAT(r.err, HasSubstr("error: --fail-if-slower 5%: 4 cell(s) and 0 group(s) slower by more than that at a "
                               "family-wise alpha of 0.05 (Holm over 8 tested cells, and over 4 groups of backends "
                               "and modes)"));
  EXPECT_THAT(r.err, HasSubstr("ff, torch compiled, batch 4 (+19.1%)"));
  // a gate below the minimum effect lowers it (else it could not fail on what it asks for); both given
  // and disagreeing is an error
  r = run_cli("compare " + before + " " + after + " --fail-if-slower 2% --format json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_DOUBLE_EQ(json::parse(r.out)["min_effect"].get<double>(), 0.02);
  r = run_cli("compare " + before + " " + after + " --fail-if-slower 2% --min-effect 5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "error: --fail-if-slower 2% is below --min-effect 5%: a change below the minimum effect is no significant "
            "change, so the gate could not fail on it\n");
  r = run_cli("compare " + before + " " + after + " --fail-if-slower 80");  // none is 80% slower
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("compare " + before + " " + before + " --fail-if-slower 5%");  // A/A: passes
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("compare " + before + " " + after + " --fail-if-slower fast");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: --fail-if-slower 'fast' must be a percentage from 0 to below 100 (e.g. 5%)\n");
  r = run_cli("compare " + before + " " + after + " --fail-if-slower ''");  // an unset variable: not "no gate"
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: --fail-if-slower '' must be a percentage from 0 to below 100 (e.g. 5%)\n");
  // the gate vouches only for what it compared: a line it skipped, or a cell the after file lacks,
  // fails it; and -o never replaces an input
  std::string text = slurp(after);
  const std::size_t first = text.find("\"median_seconds\"");
  ASSERT_NE(first, std::string::npos);
  text.replace(first, 16, "\"median_secondz\"");
  const std::string damaged = write("gate_damaged.jsonl", text);
  r = run_cli("compare " + before + " " + damaged + " --fail-if-slower 80");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: --fail-if-slower 80%: 1 line(s) of the files were skipped (the warnings "
                               "above): the gate cannot vouch for cells it could not compare"));
  r = run_cli("compare " + before + " " + damaged);  // without the gate: warnings, the rest compared
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("compare " + before + " " + after + " -o " + after);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("is an input of this command: writing there would replace it"));
  r = run_cli("compare " + before + " " + after + " --min-effect 120");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("minimum effect 120% must be at least 0 and below 100%"));
  r = run_cli("compare " + before + " " + after + " --alpha 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: significance level 2 must be between 0 and 1\n");
  r = run_cli("report " + after + " --baseline " + before + " --format md");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("## Compared with"));
  EXPECT_THAT(r.out, HasSubstr("| cell "));
  // a profile document and JSON Lines compare alike: the study's ff cells match
  r = run_cli("compare " + kResults + "study.json " + after + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["cells"].size(), 8u);
}

// A train-to-target study (its JSON file) gets a page of its own: the text view and the validation
// accuracy of every run against time and cost; read back, it scores as the file says.
/// `results` (a JSON Lines file of runs timed before rounds existed) with each sample made a round
/// whose CPU canary took `seconds`.
std::string with_cpu_canary(const std::string& results, double seconds, const std::string& name) {
  std::ifstream in(results);
  std::string line, out;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j.contains("timing") && j["timing"].contains("samples_seconds")) {
      json rounds = json::array();
      int index = 0;
      for (const json& sample : j["timing"]["samples_seconds"]) {
        rounds.push_back({{"process", index++},
                          {"sweep", 0},
                          {"pass", 0},
                          {"median_seconds", sample},
                          {"cpu_canary_seconds", seconds}});
      }
      j["timing"]["rounds"] = rounds;
    }
    out += j.dump() + "\n";
  }
  return write(name, out);
}

// The CI gate cannot tell the machine's pace from the code's: when the CPU canary itself ran
// slower in the after file by more than the threshold, the failing gate says so (and to rerun on a
// steady machine); when it did not, it says nothing of the machine.
TEST(CliReportTest, TheGateSaysWhenTheMachineItselfWasSlower) {
  const std::string before = with_cpu_canary(kResults + "before.jsonl", 200e-6, "canary_before.jsonl");
  const std::string slow = with_cpu_canary(kResults + "after.jsonl", 220e-6, "canary_after_slow.jsonl");
  const std::string steady = with_cpu_canary(kResults + "after.jsonl", 200e-6, "canary_after_steady.jsonl");
  CliResult r = run_cli("compare " + before + " " + slow + " --fail-if-slower 5%");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr(". The machine itself was 10.0% slower in the after file by its CPU canary: these may "
                               "be the machine's, not the code's; rerun both on a steady machine"));
  r = run_cli("compare " + before + " " + steady + " --fail-if-slower 5%");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, Not(HasSubstr("The machine itself")));
}

TEST(CliReportTest, ATrainToTargetStudyIsDrawnAgainstTimeAndCost) {
  const std::string study = std::string(NEURALCOST_TEST_INPUTS) + "/to_target/ff-digits.json";
  const json file = json::parse(std::ifstream(study));
  // the library reads the study back and scores it again: the same summaries
  const ToTargetStudy read = read_to_target_study(file, study);
  EXPECT_EQ(to_json(read)["summaries"], file["summaries"]);
  EXPECT_EQ(to_json(read)["contrasts"], file["contrasts"]);
  EXPECT_GT(read.summaries[0].median_peak_rss_bytes, 0);
  // a study written before runs recorded their peak memory still reads, without it
  json older = file;
  for (json& run : older["runs"]) run.erase("peak_rss_bytes");
  EXPECT_EQ(read_to_target_study(older, study).summaries[0].median_peak_rss_bytes, 0);
  // ... and one written before LibTorch trained names no backend: the torch worker ran it
  for (json& c : older["configs"]) c.erase("backend");
  EXPECT_EQ(read_to_target_study(older, study).options.configs[1].backend, "torch");
  std::size_t points = 0;
  for (const json& r : file["runs"]) points += r["curve"].size();
  const std::string page = temp_path("to-target.html");
  CliResult r = run_cli("report " + study + " -o " + page);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(page);
  EXPECT_THAT(html, HasSubstr("Validation accuracy against time"));
  EXPECT_THAT(html, HasSubstr("eager fp32 batch 64 lr 0.05"));
  const json data = report_data(html);
  ASSERT_EQ(data["charts"].size(), 2u);  // the study is priced: time and cost
  for (const json& c : data["charts"]) EXPECT_EQ(c["expected"], points);
  // Markdown, and another price
  r = run_cli("report " + study + " --format md --price-per-hour 360");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| configuration "));
  EXPECT_THAT(r.out, HasSubstr("cost to target (USD)"));
  EXPECT_THAT(r.out, HasSubstr("peak RSS (median)"));
  // what applies to results files only, and a study that is not as train-to-target writes it
  r = run_cli("report " + study + " --baseline " + kResults + "before.jsonl");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + study +
                       " is a train-to-target study: --baseline and --price-file apply to results files "
                       "(--price-per-hour prices the study)\n");
  json broken = file;
  broken["runs"][1]["seconds"] = "fast";
  const std::string bad = write("broken-to-target.json", broken.dump());
  r = run_cli("report " + bad + " -o " + temp_path("broken.html"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + bad +
                       ": field 'runs[1].seconds' must be a number (a train-to-target study as `neural-cost "
                       "train-to-target` writes it)\n");
  std::filesystem::remove(page);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace neuralcost
