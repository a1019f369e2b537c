// `hardware calibrate --collectives` with the real torch.distributed (gloo, local processes):
// a small sweep's points and fit, its interconnect spec, and a rank that dies mid-sweep (one
// error line, nothing left running); `profile --train --data-parallel 2`'s real DDP and FSDP
// steps against their prediction from a calibrated link (tests/inputs/calibration, this VM's).
// Properties only: this machine's times are not asserted.
#include <dirent.h>
#include <unistd.h>
#include <chrono>

#include <filesystem>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/hardware/interconnect.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;

/// Processes whose environment holds `mark` (the CLI, the worker and its ranks inherit it).
std::set<int> marked_processes(const std::string& mark) {
  std::set<int> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = ::readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::ifstream env(std::string("/proc/") + e->d_name + "/environ");
    const std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (text.find(mark) != std::string::npos) found.insert(pid);
  }
  ::closedir(proc);
  return found;
}

/// The worker's process group was killed as the command ended; a killed rank (torch in its address
/// space) can take the kernel a moment to tear down on a loaded machine, and a clean clone's test
/// run once saw one there. Nothing may linger: give the kernel up to 10 s, then none may be left.
void expect_none_left(const std::string& mark) {
  std::set<int> left = marked_processes(mark);
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    ::usleep(100 * 1000);
    left = marked_processes(mark);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left, the first " << *left.begin();
}

TEST(CollectivesCalibrationTest, ASmallSweepFitsEverySizeAndWritesASpec) {
  const std::string dir = ::testing::TempDir();
  const std::string json_path = dir + "/collectives_" + std::to_string(::getpid()) + ".json";
  const std::string spec_path = dir + "/link_" + std::to_string(::getpid()) + ".json";
  const CliResult r =
      run_cli("hardware calibrate --collectives --ranks 2 --max-bytes 256B --rounds 3 --format json -o " + json_path +
              " --spec-output " + spec_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
  // all-reduce and broadcast at 4, 8, ..., 256 B; the chunked ones from one element a rank (8 B)
  ASSERT_EQ(j.at("points").size(), 2u * 7 + 3u * 6);
  int held_back = 0;
  for (const auto& p : j.at("points")) {
    EXPECT_EQ(p.at("seconds").size(), 3u);
    EXPECT_GT(p.at("median_seconds").get<double>(), 0.0);
    EXPECT_GT(p.at("predicted_seconds").get<double>(), 0.0);
    EXPECT_GE(p.at("calls").get<int>(), 1);
    held_back += p.at("held_back").get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(held_back, 5 * 3);
  const InterconnectSpec link = find_interconnect(spec_path);
  EXPECT_EQ(link.kind, "loopback");
  EXPECT_EQ(link.measured.size(), 5u);
  EXPECT_GT(link.bus_bandwidth_bytes_per_second, 0.0);
  for (const auto& m : link.measured) {
    EXPECT_EQ(m.ranks, 2);
    EXPECT_TRUE(m.held_back_max_error.has_value());
  }
  std::remove(json_path.c_str());
  std::remove(spec_path.c_str());
}

TEST(CollectivesCalibrationTest, ARankThatDiesEndsTheSweepWithOneErrorAndNoProcessLeft) {
  const std::string mark = "NEURALCOST_TEST_MARK=collectives" + std::to_string(::getpid());
  const CliResult r = run_cli_env(mark + " NEURALCOST_COLLECTIVES_FAULT=exit:1:2",
                                  "hardware calibrate --collectives --ranks 2 --max-bytes 128B --rounds 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: the sweep over 2 ranks failed: "));
  EXPECT_THAT(r.err, ::testing::HasSubstr("exit code 3"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  expect_none_left(mark);
}

// Ctrl-C or SIGTERM mid-sweep ends the command with the signal's status at once, and the
// workers and their ranks with it (they ran on to the sweep's end, or for ever, as orphans).
TEST(CollectivesCalibrationTest, ASignalMidSweepEndsItAndItsProcesses) {
  for (const char* signal : {"INT", "TERM"}) {
    const std::string mark = "NEURALCOST_TEST_MARK=collectives_signal" + std::to_string(::getpid());
    const auto start = std::chrono::steady_clock::now();
    const CliResult r =
        run_cli_env(std::string("timeout --foreground --preserve-status --signal=") + signal + " 8 env " + mark,
                    "hardware calibrate --collectives --ranks 2 --max-bytes 64MiB --rounds 50");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, std::string(signal) == "INT" ? 130 : 143) << r.err;
    EXPECT_THAT(r.err, ::testing::HasSubstr(std::string("error: interrupted by SIG") + signal));
    EXPECT_LT(took, 60) << "the signal, not the sweep's end, ended the command";
    expect_none_left(mark);
  }
}

const std::string kLink = std::string(NEURALCOST_TEST_INPUTS) + "/calibration/gloo_loopback_2ranks.json";
// the roofline whose op times, scaled to the measured compute, give the timeline: a built-in CPU,
// so that no run calibrates this host first (and prints a note of it) on a fresh machine
const std::string kTimeline = " --hardware epyc-9654 ";
// the decoder checks analyse their graphs on a built-in CPU spec of their own: no --hardware
const std::string kDecoder = " ";

// Real steps: DDP's one all-reduce a bucket and FSDP's gathers and reduce-scatters are counted
// as the prediction counts them; the network is the graph's (its parameters); the prediction is
// the measured compute plus a non-negative exposed time.
TEST(CollectivesCalibrationTest, DataParallelStepsAreMeasuredAndPredicted) {
  for (const char* mode : {"ddp", "fsdp"}) {
    const CliResult r = run_cli(std::string("profile --train --data-parallel 2 --model cnn --batch 8 --rounds 2 ") +
                                "--zero " + mode + " --link " + kLink + kTimeline + "--format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["mode"], mode);
    EXPECT_EQ(j["step_seconds"]["rounds"].size(), 2u);
    EXPECT_GT(j["step_seconds"]["median"].get<double>(), 0);
    EXPECT_GT(j["compute_seconds"]["median"].get<double>(), 0);
    EXPECT_EQ(j["collectives_per_step"], j["predicted_calls"]) << mode;
    EXPECT_GE(j["predicted_step_seconds"].get<double>(), j["compute_seconds"]["median"].get<double>());
    EXPECT_GT(j["predicted_link_seconds"].get<double>(), 0);
    for (const auto& note : j["notes"])
      EXPECT_EQ(note.get<std::string>().find("not the same model"), std::string::npos);
    if (std::string(mode) == "ddp") {
      EXPECT_EQ(j["collectives"], nlohmann::json::array({"all_reduce"}));
      EXPECT_EQ(j["ddp_bucket_bytes"][0].get<double>(), 4.0 * j["parameters"].get<double>());  // one bucket, fp32
    } else {
      EXPECT_GT(j["fsdp_unit_parameters"].size(), 1u);
    }
  }
}

TEST(CollectivesCalibrationTest, DataParallelStepsRefuseWhatDoesNotApply) {
  const std::string base = "profile --train --data-parallel 2 --model cnn ";
  const auto error_of = [](const std::string& args) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r.err;
  };
  EXPECT_THAT(error_of(base), ::testing::StartsWith("error: --data-parallel needs --link SPEC.json"));
  EXPECT_EQ(error_of("profile --train --data-parallel 1 --link " + kLink),
            "error: --data-parallel 1: a data-parallel step needs at least 2 ranks\n");
  EXPECT_EQ(error_of(base + "--link " + kLink + " --zero zero2"),
            "error: --zero zero2 with --data-parallel: ddp (DistributedDataParallel) or fsdp (fully_shard) run\n");
  EXPECT_THAT(error_of(base + "--link nvlink4-nvswitch"),
              ::testing::StartsWith("error: --link nvlink4-nvswitch has no measured all_reduce over 2 ranks"));
  EXPECT_THAT(error_of(base + "--link " + kLink + " --backend torch"),
              ::testing::StartsWith("error: --backend does not apply with --data-parallel"));
  EXPECT_EQ(error_of("profile --model cnn --link " + kLink),
            "error: --link applies only with --data-parallel, --tensor-parallel or --pipeline-parallel\n");
  EXPECT_EQ(error_of("profile --data-parallel 2 --model cnn --link " + kLink),
            "error: --data-parallel applies only with --train\n");
}

TEST(CollectivesCalibrationTest, ARankThatDiesEndsTheStepsWithOneErrorAndNoProcessLeft) {
  const std::string mark = "NEURALCOST_TEST_MARK=steps" + std::to_string(::getpid());
  const CliResult r =
      run_cli_env(mark + " NEURALCOST_COLLECTIVES_FAULT=exit:1:2",
                  "profile --train --data-parallel 2 --model ff --batch 4 --rounds 3 --link " + kLink + kTimeline);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: the data-parallel steps over 2 ranks failed: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  expect_none_left(mark);
}

// Real tensor-parallel steps (Megatron's split in the worker): the collectives a step makes, their
// sizes and each rank's parameters are the ones the model counts, for the built-in Llama and for
// decoders with what the split must handle (qwen2: tied embeddings, q/k/v biases and a vocabulary
// of 1,001 padded to 1,002; qwen3: q and k norms, head_dim apart from hidden / heads; llama with
// attention and MLP biases, the row-parallel ones added once).
TEST(CollectivesCalibrationTest, TensorParallelStepsAreMeasuredAndPredicted) {
  const std::string dir = ::testing::TempDir() + "tp_configs" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, nlohmann::json>> configs = {
      {"qwen2",
       {{"model_type", "qwen2"}, {"vocab_size", 1001}, {"tie_word_embeddings", true}, {"num_key_value_heads", 2}}},
      {"qwen3", {{"model_type", "qwen3"}, {"head_dim", 64}, {"num_key_value_heads", 2}}},
      {"llama", {{"model_type", "llama"}, {"attention_bias", true}, {"mlp_bias", true}}}};
  std::vector<std::string> models = {""};
  for (const auto& [name, fields] : configs) {
    nlohmann::json config = {{"hidden_size", 128},
                             {"num_hidden_layers", 2},
                             {"num_attention_heads", 4},
                             {"num_key_value_heads", 4},
                             {"intermediate_size", 352},
                             {"vocab_size", 1000},
                             {"max_position_embeddings", 512}};
    config.update(fields);
    models.push_back(dir + "/" + name + ".json");
    std::ofstream(models.back()) << config.dump();
  }
  for (const std::string& model : models) {
    const CliResult r = run_cli("profile --train --tensor-parallel 2 --batch 2 --prompt 32 --rounds 2 --link " + kLink +
                                kDecoder + "--format json" + (model.empty() ? "" : " --model " + model));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const double hidden = model.empty() ? 256 : 128;
    EXPECT_EQ(j["collectives_per_step"], j["predicted_calls"]) << model;
    EXPECT_EQ(j["collectives_per_step"], model.empty() ? 21 : 13) << model;  // 4 a layer, 5 at the ends
    EXPECT_EQ(j["call_bytes"], nlohmann::json::array({2 * 32 * 4.0, 2 * 32 * hidden * 4})) << model;
    EXPECT_EQ(j["parameters_per_rank"], j["predicted_parameters_per_rank"]) << model;
    EXPECT_EQ(j["calls_equal"], true);
    EXPECT_EQ(j["step_seconds"]["rounds"].size(), 2u);
    EXPECT_GT(j["compute_seconds"]["median"].get<double>(), 0);
    EXPECT_GT(j["link_seconds"]["median"].get<double>(), 0);
    EXPECT_GT(j["predicted_link_seconds"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(j["predicted_step_seconds"].get<double>(),
                     j["compute_seconds"]["median"].get<double>() + j["predicted_link_seconds"].get<double>());
    for (const auto& note : j["notes"])
      EXPECT_EQ(note.get<std::string>().find("not the same model"), std::string::npos) << model;
  }
  std::filesystem::remove_all(dir);
  // sequence parallelism: each all-reduce of the hidden states a reduce-scatter and an all-gather
  const CliResult r = run_cli(
      "profile --train --tensor-parallel 2 --sequence-parallel --batch 2 --prompt 32 "
      "--rounds 2 --format json --link " +
      kLink + kDecoder);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sequence_parallel"], true);
  EXPECT_EQ(j["collectives_per_step"], 2 * (4 * 4 + 2) + 3);
  EXPECT_EQ(j["collectives_per_step"], j["predicted_calls"]);
  EXPECT_EQ(j["collectives"], nlohmann::json::array({"all_gather", "all_reduce", "reduce_scatter"}));
  EXPECT_EQ(j["call_bytes"], nlohmann::json::array({2 * 32 * 4.0, 2 * 32 * 256 * 4.0}));
  EXPECT_EQ(j["parameters_per_rank"], j["predicted_parameters_per_rank"]);
}

TEST(CollectivesCalibrationTest, TensorParallelStepsRefuseWhatDoesNotApply) {
  const std::string base = "profile --train --tensor-parallel 2 ";
  const auto error_of = [](const std::string& args) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r.err;
  };
  EXPECT_THAT(error_of(base), ::testing::StartsWith("error: --tensor-parallel needs --link SPEC.json"));
  EXPECT_EQ(error_of("profile --train --tensor-parallel 1 --link " + kLink),
            "error: --tensor-parallel 1: a tensor-parallel step needs at least 2 ranks\n");
  EXPECT_EQ(error_of(base + "--model mixtral-8x7b --link " + kLink),
            "error: --tensor-parallel runs Llama-family decoders split as Megatron-LM splits them; mixtral-8x7b has "
            "a mixture of experts\n");
  EXPECT_THAT(error_of(base + "--model cnn --link " + kLink),
              ::testing::StartsWith("error: --tensor-parallel: the model 'cnn' is not a decoder LLM"));
  EXPECT_THAT(error_of(base + "--link " + kLink + " --zero fsdp"),
              ::testing::StartsWith("error: --zero does not apply with --tensor-parallel"));
  EXPECT_EQ(error_of(base + "--link " + kLink + " --optimizer momentum"),
            "error: --optimizer momentum with --tensor-parallel: sgd or adam run\n");
  EXPECT_THAT(error_of(base + "--data-parallel 2 --link " + kLink),
              ::testing::StartsWith("error: --data-parallel, --tensor-parallel and --pipeline-parallel are separate"));
  EXPECT_EQ(error_of("profile --tensor-parallel 2 --link " + kLink),
            "error: --tensor-parallel applies only with --train\n");
  EXPECT_EQ(
      error_of(base + "--sequence-parallel --prompt 127 --link " + kLink),
      "error: --sequence-parallel: --tensor-parallel 2 does not divide the 127 tokens of a sequence (--prompt)\n");
  EXPECT_EQ(error_of("profile --model cnn --sequence-parallel"),
            "error: --sequence-parallel applies only with --tensor-parallel\n");
  EXPECT_THAT(error_of("profile --train --pipeline-parallel 2 --sequence-parallel --link " + kLink),
              ::testing::StartsWith("error: --sequence-parallel does not apply with --pipeline-parallel"));
  EXPECT_EQ(error_of("profile --model cnn --zero fsdp"), "error: --zero applies only with --data-parallel\n");
}

TEST(CollectivesCalibrationTest, ARankThatDiesEndsTheTensorParallelStepsAndLeavesNoProcess) {
  const std::string mark = "NEURALCOST_TEST_MARK=tp_steps" + std::to_string(::getpid());
  const CliResult r =
      run_cli_env(mark + " NEURALCOST_COLLECTIVES_FAULT=exit:1:2",
                  "profile --train --tensor-parallel 2 --batch 2 --prompt 16 --rounds 3 --link " + kLink + kDecoder);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: the tensor-parallel steps over 2 ranks failed: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  expect_none_left(mark);
}

// Real 1F1B pipeline steps: the transfers a step and their size, and each stage's parameters, are
// the model's; with tied embeddings (qwen2 here) each end holds a copy and their gradients are
// all-reduced, as the prediction adds; the predicted step is at least the busiest stage's work.
TEST(CollectivesCalibrationTest, PipelineParallelStepsAreMeasuredAndPredicted) {
  const std::string dir = ::testing::TempDir() + "pp_configs" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string tied = dir + "/qwen2.json";
  std::ofstream(tied) << nlohmann::json{{"model_type", "qwen2"},      {"hidden_size", 128},
                                        {"num_hidden_layers", 2},     {"num_attention_heads", 4},
                                        {"num_key_value_heads", 2},   {"intermediate_size", 352},
                                        {"vocab_size", 1000},         {"max_position_embeddings", 512},
                                        {"tie_word_embeddings", true}}
                             .dump();
  for (const std::string& model : {std::string(), tied}) {
    const CliResult r = run_cli("profile --train --pipeline-parallel 2 --batch 2 --prompt 32 --micro-batches 3 " +
                                std::string("--rounds 2 --link ") + kLink + kDecoder + "--format json" +
                                (model.empty() ? "" : " --model " + model));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const double hidden = model.empty() ? 256 : 128;
    EXPECT_EQ(j["transfers_per_step"], 2 * 1 * 3) << model;
    EXPECT_EQ(j["transfers_per_step"], j["predicted_transfers"]) << model;
    EXPECT_EQ(j["transfer_bytes"].get<double>(), 2 * 32 * hidden * 4) << model;
    EXPECT_EQ(j["transfer_bytes"], j["predicted_transfer_bytes"]) << model;
    ASSERT_EQ(j["per_stage"].size(), 2u);
    for (const auto& stage : j["per_stage"]) {
      EXPECT_EQ(stage["parameters"], stage["predicted_parameters"]) << model;
      EXPECT_GT(stage["passes_seconds"]["median"].get<double>(), 0);
    }
    EXPECT_EQ(j["predicted_tied_seconds"].get<double>() > 0, !model.empty()) << model;
    double busiest = 0;
    for (const auto& stage : j["per_stage"])
      busiest = std::max(busiest, stage["passes_seconds"]["median"].get<double>());
    EXPECT_GT(j["predicted_step_seconds"].get<double>(), busiest);
    EXPECT_GT(j["step_seconds"]["median"].get<double>(), 0);
    for (const auto& note : j["notes"])
      EXPECT_EQ(note.get<std::string>().find("not the same model"), std::string::npos) << model;
  }
  std::filesystem::remove_all(dir);
}

TEST(CollectivesCalibrationTest, PipelineParallelStepsRefuseWhatDoesNotApply) {
  const auto error_of = [](const std::string& args) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r.err;
  };
  const std::string base = "profile --train --pipeline-parallel ";
  EXPECT_THAT(error_of(base + "2"), ::testing::StartsWith("error: --pipeline-parallel needs --link SPEC.json"));
  EXPECT_EQ(error_of(base + "3 --link " + kLink),
            "error: --pipeline-parallel 3: the built-in decoder has 4 layers, which 3 stages do not share evenly\n");
  EXPECT_EQ(error_of(base + "2 --micro-batches 0 --link " + kLink), "error: --micro-batches 0: at least 1\n");
  EXPECT_THAT(error_of(base + "2 --zero fsdp --link " + kLink),
              ::testing::StartsWith("error: --zero does not apply with --pipeline-parallel"));
  EXPECT_EQ(error_of("profile --model cnn --micro-batches 4"),
            "error: --micro-batches applies only with --pipeline-parallel\n");
  EXPECT_EQ(error_of(base + "2 --link nvlink4-nvswitch"),
            "error: --link nvlink4-nvswitch was not calibrated on this machine (it has no measured collectives): "
            "`neural-cost hardware calibrate --collectives --spec-output FILE`\n");
  EXPECT_THAT(error_of(base + "2 --hardware epyc-9654 --link " + kLink),
              ::testing::StartsWith("error: --hardware does not apply with --pipeline-parallel"));
  EXPECT_EQ(error_of(base + "2 --micro-batches 3000000000 --link " + kLink),
            "error: --micro-batches 3000000000 of --batch 4: the sequences a step must stay below 2^31\n");
  EXPECT_THAT(error_of(base + "2 --model llama-3-8b --link " + kLink),
              ::testing::StartsWith("error: llama-3-8b at this size needs about"));
  EXPECT_EQ(error_of(base + "2 --link " + kLink + " -o " + kLink),
            "error: -o " + kLink + " is an input of this command: writing there would replace it\n");
  EXPECT_THAT(error_of(base + "2 --model nosuch.json --link " + kLink),
              ::testing::StartsWith("error: --pipeline-parallel: the model 'nosuch.json'"));
  EXPECT_THAT(error_of(base + "2 --tensor-parallel 2 --link " + kLink),
              ::testing::StartsWith("error: --data-parallel, --tensor-parallel and --pipeline-parallel are separate"));
}

TEST(CollectivesCalibrationTest, ARankThatDiesEndsThePipelineStepsAndLeavesNoProcess) {
  const std::string mark = "NEURALCOST_TEST_MARK=pp_steps" + std::to_string(::getpid());
  const CliResult r =
      run_cli_env(mark + " NEURALCOST_COLLECTIVES_FAULT=exit:1:2",
                  "profile --train --pipeline-parallel 2 --batch 2 --prompt 16 --rounds 3 --link " + kLink + kDecoder);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: the pipeline-parallel steps over 2 stages failed: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  expect_none_left(mark);
}

}  // namespace
}  // namespace neuralcost
