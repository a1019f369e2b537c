// The neural-cost binary end to end: commands, views and files.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/host.hpp"
#include "unit/synthetic_load.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;

const std::string kGood = std::string(NEURALCOST_TEST_INPUTS) + "/good/";

TEST(CliTest, HelpAndVersion) {
  CliResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("analyze"));
  EXPECT_THAT(r.out, HasSubstr("hardware"));
  r = run_cli("analyze --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--hardware"));
  EXPECT_THAT(r.out, HasSubstr("--dtype"));
  EXPECT_EQ(run_cli("hardware show --help").exit_code, 0);
  r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("neural-cost 0.1.0"));
}

TEST(CliTest, AnalyzeWithoutModelSummarisesTheFiveNetworks) {
  const CliResult r = run_cli("analyze");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* m : {"ff ", "cnn ", "rnn ", "lstm ", "transformer "}) EXPECT_THAT(r.out, HasSubstr(m));
  EXPECT_THAT(r.out, HasSubstr("[h100-sxm]"));
}

TEST(CliTest, AnalyzeTransformerPrintsPerLayerTableAndTotals) {
  const CliResult r = run_cli("analyze --model transformer --batch 32 --hardware h100-sxm");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"encoder0.self_attn.in_proj", "encoder0.self_attn.sdpa", "encoder1.norm2", "classifier",
                        "FLOP/B", "lower bound", "share", "32x32x384", "total:"}) {
    EXPECT_THAT(r.out, HasSubstr(s));
  }
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(CliTest, AnalyzeTrainPrintsPassesMemoryAndTheBatchThatFits) {
  const CliResult r =
      run_cli("analyze --model cnn --train --optimizer adamw --checkpoint every:3 --memory-budget 2GB --batch 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"cnn training step (batch 8, fp32, optimizer adamw, precision fp32, checkpointing every:3)",
        "weight_gradient:", "recompute:", "optimizer step (10 tensors)", "step total:", "checkpointing every:3:",
        "fits: budget 2 GB with a 10.0% reserve (1.8 GB usable): largest batch"}) {
    EXPECT_THAT(r.out, HasSubstr(line));
  }
  // the first convolution reads the image, which needs no gradient: no input gradient records
  const nlohmann::json j = nlohmann::json::parse(run_cli("analyze --model cnn --train --format json").out);
  for (const auto& op : j["training"]["ops"]) {
    if (op["name"] == "stage0.conv") EXPECT_EQ(op["input_gradient"]["records"], 0);
    if (op["name"] == "stage1.conv")
      EXPECT_EQ(op["input_gradient"]["contraction_flops"], op["forward"]["contraction_flops"]);
  }
}

TEST(CliTest, JsonCsvAndMarkdownViews) {
  CliResult r = run_cli("analyze --model lstm --batch 4 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["batch"], 4);
  EXPECT_EQ(j["totals"]["contraction_flops"].get<std::uint64_t>(), 4u * 16779776);
  EXPECT_TRUE(j["unmodeled"].is_array());
  r = run_cli("analyze --model cnn --format csv");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::StartsWith("name,kind,output_shape,flops,bytes,arithmetic_intensity,bound,"));
  EXPECT_THAT(r.out, HasSubstr("stage1.conv,conv,32x128x16x16,"));
  r = run_cli("analyze --model ff --format md");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("| block0.linear "));
}

TEST(CliTest, OptionsChangeTheModel) {
  const auto base = nlohmann::json::parse(run_cli("analyze --model transformer --batch 1 --format json").out);
  const auto wide = nlohmann::json::parse(
      run_cli("analyze --model transformer --batch 1 --width 256 --seq 64 --depth 3 --dtype bf16 --format json").out);
  EXPECT_EQ(base["totals"]["parameter_count"], 397834);
  EXPECT_EQ(wide["totals"]["parameter_count"], 3u * (12 * 256 * 256 + 13 * 256) + 2570);
  EXPECT_EQ(wide["model"]["dtype"], "bf16");
  EXPECT_EQ(wide["totals"]["bytes_read"].get<std::uint64_t>() % 2, 0u);
}

TEST(CliTest, ParallelCommandsPrintTheirSteps) {
  CliResult r = run_cli("hardware systems --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 5u);
  r = run_cli("hardware interconnects");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("nvlink4-nvswitch"));
  // a search: 4 ZeRO stages × 2 batches × 1 policy, what fits first and by samples/s
  r = run_cli(
      "analyze transformer --train --parallel dp=8 --system dgx-h100 --search --batch 4,64 --checkpoint none "
      "--format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ranked = nlohmann::json::parse(r.out);
  ASSERT_EQ(ranked.size(), 8u);
  EXPECT_EQ(ranked[0]["fit"], "fits");
  EXPECT_GE(ranked[0]["samples_per_second"].get<double>(), ranked[1]["samples_per_second"].get<double>());
  // 3D-parallel training of a decoder: 16 devices, 4 pipeline stages of 8 layers, 8 micro-batches
  r = run_cli(
      "analyze llama-3-8b --train --precision bf16-mixed --prompt 1024 --parallel dp=2,tp=2,pp=4 --global-batch 16 "
      "--system dgx-h100 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto step3d = nlohmann::json::parse(r.out);
  EXPECT_EQ(step3d["devices"], 16);
  EXPECT_EQ(step3d["micro_batches"], 8);
  ASSERT_EQ(step3d["stages"].size(), 4u);
  EXPECT_EQ(step3d["stages"][1]["layers"][0], nlohmann::json::array({8, 16}));
  EXPECT_GT(step3d["bubble_seconds"].get<double>(), 0);
  EXPECT_GT(step3d["mfu"].get<double>(), 0);
  EXPECT_LT(step3d["mfu"].get<double>(), 1);
  // the table names the links its collectives are timed on, --link's in place of the system's
  r = run_cli(
      "analyze llama-3-8b --train --precision bf16-mixed --prompt 1024 --parallel tp=8 --system dgx-h100 "
      "--link pcie4-x16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("links: inside a node pcie4-x16, between nodes infiniband-ndr\n"));
  // expert parallelism under a measured routing: experts 0 and 1 take half the rows, so with one
  // expert a device the busiest takes 2× an average device's rows and the step waits for it
  const std::string skew = ::testing::TempDir() + "/cli_routing_skew.json";
  std::ofstream(skew) << R"({"tokens": 4096, "all": [2048, 2048, 1024, 1024, 512, 512, 512, 512]})";
  const std::string moe =
      "analyze mixtral-8x7b --train --prompt 1024 --parallel dp=8,tp=1,pp=1,ep=8 --global-batch 16 --system dgx-h100 "
      "--format json";
  r = run_cli(moe);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto uniform = nlohmann::json::parse(r.out);
  r = run_cli(moe + " --routing " + skew);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto skewed = nlohmann::json::parse(r.out);
  EXPECT_NEAR(skewed["stages"][0]["expert_parallel_seconds"].get<double>(),
              2 * uniform["stages"][0]["expert_parallel_seconds"].get<double>(),
              1e-9 * uniform["stages"][0]["expert_parallel_seconds"].get<double>());
  EXPECT_GT(skewed["step_seconds"].get<double>(), uniform["step_seconds"].get<double>());
  EXPECT_THAT(skewed.dump(), HasSubstr("takes 2.00× to 2.00× an average device's rows"));
  r = run_cli(
      "analyze llama-3-8b --train --precision bf16-mixed --prompt 1024 --search --devices 64 --global-batch 64 "
      "--system dgx-h100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layouts of 64 × h100-sxm (dgx-h100)"));
  EXPECT_THAT(r.out, HasSubstr("\nbest: dp="));
  // tensor parallel: the step over 8 devices is faster than on one, and not 8 times
  r = run_cli(
      "analyze llama-3-8b --phase decode --context 1024 --batch 1 --parallel tp=8 --system dgx-h100 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto tp = nlohmann::json::parse(r.out);
  EXPECT_EQ(tp["heads_per_device"], 4);
  EXPECT_GT(tp["speedup"].get<double>(), 1.0);
  EXPECT_LT(tp["speedup"].get<double>(), 8.0);
  // serving capacity: every degree up to the node, the smallest named
  r = run_cli("analyze llama-3-70b --phase decode --context 8191 --memory-budget 80GB --batch 16 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cap = nlohmann::json::parse(r.out);
  EXPECT_EQ(cap["capacity"].size(), 4u);  // tp 1, 2, 4, 8
  EXPECT_FALSE(cap["capacity"][0]["weights_fit"].get<bool>());
  EXPECT_EQ(cap["smallest_tensor_parallel"], 4);
  EXPECT_GT(cap["capacity"][3]["longest_sequence_at_batch"].get<std::uint64_t>(), 8191u);
  // the cheapest system for a latency target, with one price for every device
  r = run_cli("analyze llama-3-8b --phase decode --context 2048 --batch 8 --target-ms-per-token 20 --price-per-hour 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("the cheapest that meets the target:"));
  r = run_cli("analyze llama-3-8b --phase decode --target-ms-per-token 0.000001 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["cheapest"].is_null());
}

TEST(CliTest, HardwareListAndShow) {
  CliResult r = run_cli("hardware list");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* id : {"apple-m3", "h100-pcie", "a100-sxm-80gb", "mi300x", "epyc-9654"})
    EXPECT_THAT(r.out, HasSubstr(id));
  r = run_cli("hardware show h100-sxm --format json");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["id"], "h100-sxm");
  EXPECT_DOUBLE_EQ(j["peak_flops_per_second"]["fp32"].get<double>(), 67e12);
  EXPECT_DOUBLE_EQ(j["memory_bandwidth_bytes_per_second"].get<double>(), 3.35e12);
  r = run_cli("hardware show h100-pcie");
  EXPECT_THAT(r.out, HasSubstr("NVIDIA H100 PCIe"));
  EXPECT_THAT(r.out, HasSubstr("memory_bandwidth_bytes_per_second"));
}

TEST(CliTest, UserHardwareFileIsUsed) {
  const CliResult r = run_cli("analyze --model ff --hardware " + kGood + "fp32_only.json --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hardware"]["id"], "test-fp32-box");
  EXPECT_DOUBLE_EQ(j["hardware"]["ridge_point_flops_per_byte"].get<double>(), 10.0);
}

TEST(CliTest, ABuiltInIdIsNeverReplacedByAFileOfThatName) {
  const std::string dir = ::testing::TempDir() + "/nc_shadow_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kGood + "fp32_only.json", dir + "/h100-sxm",
                             std::filesystem::copy_options::overwrite_existing);
  auto id = [&](const std::string& hardware) {
    const CliResult r =
        run_cli_env("cd " + dir + " &&", "analyze --model ff --hardware " + hardware + " --format json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["hardware"]["id"].get<std::string>();
  };
  EXPECT_EQ(id("h100-sxm"), "h100-sxm");         // the built-in part
  EXPECT_EQ(id("./h100-sxm"), "test-fp32-box");  // the file, asked for as a path
  std::filesystem::remove_all(dir);
}

TEST(CliTest, OutputFileIsWrittenWhole) {
  const std::string path = ::testing::TempDir() + "/nc_result_" + std::to_string(::getpid()) + ".json";
  std::filesystem::remove(path);
  const CliResult r = run_cli("analyze --model rnn --format json -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(nlohmann::json::parse(slurp(path))["model"]["name"], "rnn");
  for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir())) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr("nc_result.json.tmp")));
  }
}

TEST(CliTest, OutputKeepsTheModeAndHardLinksOfTheFileItReplaces) {
  const std::string path = ::testing::TempDir() + "/nc_mode_" + std::to_string(::getpid()) + ".json";
  const std::string link = path + ".link";
  std::filesystem::remove(path);
  std::filesystem::remove(link);
  { std::ofstream(path) << "old"; }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::create_hard_link(path, link);
  ASSERT_EQ(run_cli("analyze rnn -o " + path).exit_code, 0);
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(slurp(link), slurp(path));  // the other name sees the new result
  std::filesystem::remove(link);
  ASSERT_EQ(run_cli("analyze rnn -o " + path).exit_code, 0);  // one link: replaced by a rename
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::remove(path);
}

TEST(CliTest, TheOutputFormatFollowsTheExtensionUnlessFormatIsGiven) {
  const std::string base = ::testing::TempDir() + "/nc_ext_" + std::to_string(::getpid());
  ASSERT_EQ(run_cli("analyze rnn -o " + base + ".json").exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(slurp(base + ".json"))["model"]["name"], "rnn");
  ASSERT_EQ(run_cli("analyze rnn -o " + base + ".csv").exit_code, 0);
  EXPECT_THAT(slurp(base + ".csv"), ::testing::StartsWith("name,kind,"));
  ASSERT_EQ(run_cli("analyze rnn --format table -o " + base + ".json").exit_code, 0);
  EXPECT_THAT(slurp(base + ".json"), ::testing::StartsWith("rnn (batch 32, fp32)"));
  for (const char* ext : {".json", ".csv"}) std::filesystem::remove(base + ext);
}

TEST(CliTest, ADecodersLlmPageHasItsChartsAndData) {
  const std::string page = ::testing::TempDir() + "/nc_llm_" + std::to_string(::getpid()) + ".html";
  const CliResult r = run_cli("analyze llama-3-8b --batch 1,8,64 --context 512 --hardware h100-sxm -o " + page);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = slurp(page);
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  for (const char* part : {"chart-llm-roofline", "chart-llm-latency", "chart-llm-throughput", "chart-llm-memory",
                           "8,030,261,248 parameters", "decode at context 512: time per output token"}) {
    EXPECT_THAT(html, HasSubstr(part)) << part;
  }
  // --format html without a file: the page on stdout; other formats keep analyze's views
  const CliResult out = run_cli("analyze llama-3-8b --batch 1 --format html");
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("chart-llm-memory"));
  std::filesystem::remove(page);
}

TEST(CliTest, AnalyzeTakesListsOfModelsAndBatches) {
  const CliResult r = run_cli("analyze --model ff,cnn --batch 1,8 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["analyses"].size(), 4u);
  EXPECT_EQ(j["analyses"][0]["model"]["name"], "ff");
  EXPECT_EQ(j["analyses"][1]["model"]["batch"], 8);
  EXPECT_EQ(j["analyses"][3]["model"]["name"], "cnn");
  // an option that applies to some of the models shapes those only
  const auto seq = nlohmann::json::parse(run_cli("analyze --model ff,lstm --seq 7 --format json").out);
  EXPECT_EQ(seq["analyses"].size(), 2u);
}

TEST(CliTest, OutputThroughASymlinkReplacesItsTargetAndDevicesAreWrittenInPlace) {
  const std::string dir = ::testing::TempDir() + "/nc_link_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/target.json") << "old";
  std::filesystem::create_symlink(dir + "/target.json", dir + "/link.json");
  CliResult r = run_cli("analyze --model ff --format json -o " + dir + "/link.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.json"));
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/target.json"))["model"]["name"], "ff");
  r = run_cli("analyze --model ff --format csv -o /dev/stdout");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("name,kind,"));
  std::filesystem::remove_all(dir);
}

/// A scratch calibration cache for one test.
struct ScratchCache {
  ScratchCache() : dir(std::filesystem::temp_directory_path() / ("nc_cli_cache_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~ScratchCache() { std::filesystem::remove_all(dir); }
  std::string env() const { return "NEURALCOST_CACHE_DIR=" + dir.string(); }
  std::filesystem::path dir;
};

TEST(CliTest, HostRoofsAreForTheThreadsAsked) {
  // a canned 1-thread calibration of this CPU in a scratch cache: `--threads 1` shows it (and
  // says it is one thread's), and host-spec gives one core's theoretical peak
  ScratchCache cache;
  const HostDescription host = describe_host();
  nlohmann::json c = nlohmann::json::parse(slurp(std::string(NEURALCOST_TEST_INPUTS) + "/calibration/zen4_vm.json"));
  c["fingerprint"] = host_fingerprint(host);
  c["threads"] = 1;
  std::ofstream(cache.dir / "host-calibration-1t.json") << c.dump();
  CliResult r = run_cli_env(cache.env(), "hardware show host --threads 1 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json spec = nlohmann::json::parse(r.out);
  EXPECT_THAT(spec["name"].get<std::string>(), HasSubstr("(calibrated, 1 thread)"));
  EXPECT_DOUBLE_EQ(spec["peak_flops_per_second"]["fp32"].get<double>(), 230e9);
  r = run_cli_env(cache.env(), "hardware show host-spec --threads 1 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  spec = nlohmann::json::parse(r.out);
  EXPECT_THAT(spec["name"].get<std::string>(), HasSubstr("(theoretical, 1 thread)"));
  EXPECT_DOUBLE_EQ(spec["peak_flops_per_second"]["fp32"].get<double>(),
                   theoretical_host_spec(host, 1).peak_flops_per_second.at(DType::kFp32));
}

TEST(CliTest, CalibrateOnABusyMachinePrintsButDoesNotSave) {
  ScratchCache cache;
  load_testing::SyntheticLoad load;
  ASSERT_TRUE(load.running());
  const CliResult r = run_cli_env(cache.env(), "hardware calibrate --quick --format json");
  load.stop();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: calibration not saved: other processes used"));
  EXPECT_THAT(r.err, HasSubstr("rerun on an idle machine"));
  EXPECT_THAT(r.err, HasSubstr("Add --force to save it anyway"));
  const nlohmann::json printed = nlohmann::json::parse(r.out);  // still printed, whole
  EXPECT_FALSE(printed["load"]["busy"].empty());
  // nothing saved: the calibrations' lock (host-calibration-<N>t.lock) is all there is
  for (const auto& e : std::filesystem::directory_iterator(cache.dir))
    EXPECT_EQ(e.path().extension(), ".lock") << e.path();
}

TEST(CliTest, CalibrateKeepsItsResultFileWhenTheCacheCannotBeWrittenAndCapsAbsurdThreads) {
  // one calibration for both (they are slow): a cache folder that cannot be made (a file is in
  // its way) and 4096 threads on this machine's few CPUs (they died in libgomp)
  ScratchCache cache;
  std::ofstream(cache.dir / "file") << "not a folder";
  const std::string out = (cache.dir / "calibration.json").string();
  const CliResult r = run_cli_env("NEURALCOST_CACHE_DIR=" + (cache.dir / "file" / "cache").string(),
                                  "hardware calibrate --quick --force --threads 4096 --format json -o " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            fmt::format("error: calibration not saved: cannot create '{}': Not a directory (the result is in {})\n",
                        (cache.dir / "file" / "cache").string(), out));
  const nlohmann::json c = nlohmann::json::parse(slurp(out));  // kept, whole
  EXPECT_EQ(c["threads"], describe_host().logical_cpus);
  EXPECT_THAT(c["warnings"].dump(), HasSubstr(fmt::format("4096 threads asked for on {} CPUs: calibrated with {}",
                                                          describe_host().logical_cpus, describe_host().logical_cpus)));
}

}  // namespace
}  // namespace neuralcost
