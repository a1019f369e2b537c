// `train-to-target`: the scoring on scripted runs (olympic mean, bootstrap intervals, cost, each
// configuration against the first), and real runs of the torch worker on scikit-learn's digits:
// every run reaches a reachable target in fp32 and bf16, an unreachable one is recorded as not
// reached with the results kept, and bad input is one error line. Properties only: this machine's
// times are not asserted.
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/to_target.hpp"
#include "neuralcost/report/to_target_views.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;

ToTargetRun scripted(std::size_t config, double seconds, std::int64_t steps, bool reached = true) {
  ToTargetRun r;
  r.config = config;
  r.reached = reached;
  r.seconds = seconds;
  r.steps = steps;
  r.samples = steps * 32;
  r.train_seconds = seconds * 0.9;
  r.final_accuracy = reached ? 0.96 : 0.9;
  return r;
}

TEST(ToTargetTest, ScoresAsMLPerfWithIntervalsAndCost) {
  const std::vector<ToTargetRun> runs{scripted(0, 10, 100), scripted(0, 12, 120), scripted(0, 11, 110),
                                      scripted(0, 30, 300), scripted(0, 9, 90)};
  const ToTargetSummary s = summarize_to_target({}, runs, 3.6);  // 3.6 per hour: 0.001 a second
  EXPECT_EQ(s.reached, 5U);
  ASSERT_TRUE(s.score.valid);
  EXPECT_DOUBLE_EQ(s.score.mean_seconds, 11.0);  // 9 and 30 dropped
  EXPECT_DOUBLE_EQ(s.seconds.mean, 14.4);
  ASSERT_TRUE(s.seconds.ci95.has_value());
  EXPECT_LE(s.seconds.ci95->low, 14.4);
  EXPECT_GE(s.seconds.ci95->high, 14.4);
  EXPECT_GE(s.seconds.ci95->low, 9.0);  // a mean of the runs lies among them
  EXPECT_LE(s.seconds.ci95->high, 30.0);
  EXPECT_DOUBLE_EQ(s.steps.mean, 144.0);
  EXPECT_DOUBLE_EQ(s.samples.mean, 144.0 * 32);
  ASSERT_TRUE(s.cost.has_value());
  EXPECT_NEAR(s.cost->mean, 0.0144, 1e-12);
  EXPECT_NEAR(s.steps_per_second, 720 / (72 * 0.9), 1e-9);
  // the same runs, the same intervals (the bootstrap is seeded)
  EXPECT_EQ(summarize_to_target({}, runs, std::nullopt).seconds.ci95->low, s.seconds.ci95->low);
}

TEST(ToTargetTest, TwoRunsThatDoNotReachTheTargetInvalidateTheOlympicMean) {
  const std::vector<ToTargetRun> one{scripted(0, 10, 100), scripted(0, 12, 120), scripted(0, 0, 500, false)};
  EXPECT_TRUE(summarize_to_target({}, one, std::nullopt).score.valid);
  std::vector<ToTargetRun> two = one;
  two[1].reached = false;
  const ToTargetSummary s = summarize_to_target({}, two, std::nullopt);
  EXPECT_FALSE(s.score.valid);
  EXPECT_THAT(s.score.why_invalid, HasSubstr("2 of 3 runs did not reach the target"));
  ToTargetRun failed = scripted(0, 0, 0, false);
  failed.error = "the worker exited";
  const ToTargetSummary f = summarize_to_target({}, {one[0], one[1], failed}, std::nullopt);
  EXPECT_EQ(f.failed, 1U);
  EXPECT_TRUE(f.score.valid);  // a failed run counts as one that did not reach it
}

TEST(ToTargetTest, FasterPerStepButMoreStepsIsDearerToTheTarget) {
  // the brief's worked question: 20 % more steps a second, 25 % more steps: about 4 % dearer
  std::vector<ToTargetRun> a, b;
  for (int i = 0; i < 6; ++i) {
    a.push_back(scripted(0, 100 + i, 1000 + 20 * i));
    b.push_back(scripted(1, (100 + i) * 1.25 / 1.2, (1000 + 20 * i) * 5 / 4));
  }
  const ToTargetContrast c = contrast_to_target(0, 1, a, b, 10.0, 12.0);
  ASSERT_TRUE(c.seconds_ratio.has_value());
  EXPECT_NEAR(c.seconds_ratio->mean, 1.25 / 1.2, 1e-9);
  EXPECT_NEAR(c.steps_ratio->mean, 1.25, 1e-9);
  EXPECT_DOUBLE_EQ(c.throughput_ratio, 1.2);
  EXPECT_EQ(c.verdict, "dearer to the target, though faster per step");
  const ToTargetContrast same = contrast_to_target(0, 1, a, a, 10.0, 10.0);
  EXPECT_THAT(same.verdict, HasSubstr("no clear difference"));
  const ToTargetContrast none = contrast_to_target(0, 1, a, {b[0]}, 10.0, 12.0);
  EXPECT_THAT(none.verdict, HasSubstr("not comparable"));
}

TEST(ToTargetTest, BackendsThatStartASeedApartAreWarnedAbout) {
  ToTargetOptions o;
  o.runs = 3;
  o.configs = {{"torch", "eager", "fp32", 32, 0.05},
               {"libtorch", "eager", "fp32", 32, 0.05},
               {"libtorch", "eager", "bf16-mixed", 32, 0.05}};
  std::vector<ToTargetRun> runs;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    for (std::size_t c = 0; c < 3; ++c) {
      ToTargetRun r = scripted(c, 10, 100);
      r.seed = seed;
      r.first_loss = 2.3 + 0.01 * static_cast<double>(seed) + (c == 2 ? 0.5 : 0.0);  // bf16 is not compared
      runs.push_back(r);
    }
  }
  ToTargetStudy s = score_to_target(o, runs, std::nullopt, "USD");
  ASSERT_TRUE(s.start.has_value());
  EXPECT_EQ(s.start->pairs, 3U);  // a seed's torch fp32 against its LibTorch fp32
  EXPECT_TRUE(s.start->same);
  EXPECT_THAT(render_to_target(s, Format::kTable), HasSubstr("same start: a seed's first batch has the same loss"));
  runs[4].first_loss = *runs[4].first_loss * 1.01;  // seed 2's LibTorch run started elsewhere
  s = score_to_target(o, runs, std::nullopt, "USD");
  EXPECT_FALSE(s.start->same);
  EXPECT_NEAR(s.start->largest_relative_difference, 0.01, 1e-9);
  EXPECT_THAT(render_to_target(s, Format::kTable),
              HasSubstr("warning: torch and libtorch did not start a seed alike: its first batch's loss differs by up "
                        "to 1.0e-02 relative over 3 pair(s)"));
  o.configs.pop_back();
  o.configs[1].backend = "torch";  // one backend: nothing to compare
  runs.erase(std::remove_if(runs.begin(), runs.end(), [](const ToTargetRun& r) { return r.config == 2; }), runs.end());
  EXPECT_FALSE(score_to_target(o, runs, std::nullopt, "USD").start.has_value());
}

TEST(ToTargetTest, BadOptionsAreErrors) {
  ToTargetOptions o;
  o.configs = {{}};
  EXPECT_NO_THROW(validate(o));
  auto expect_bad = [&](const std::function<void(ToTargetOptions&)>& change, const std::string& fragment) {
    ToTargetOptions b = o;
    change(b);
    try {
      validate(b);
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  expect_bad([](auto& b) { b.runs = 2; }, "--runs 2: at least 3");
  expect_bad([](auto& b) { b.val_fraction = 0; }, "--val-fraction 0");
  expect_bad([](auto& b) { b.model = "lstm"; }, "--model lstm");
  expect_bad([](auto& b) { b.dataset = "mnist"; }, "--dataset mnist");
  expect_bad([](auto& b) { b.target = 1.5; }, "--target 1.5");
  expect_bad([](auto& b) { b.configs[0].precision = "fp16"; }, "needs a GPU");
  expect_bad([](auto& b) { b.model = "cnn", b.depth = 5; }, "below one pixel");
}

TEST(ToTargetCliTest, EveryRunReachesAReachableTargetInFp32AndBf16AndTheFileKeepsThem) {
  const std::string path = ::testing::TempDir() + "/to_target_" + std::to_string(::getpid()) + ".json";
  const CliResult r = run_cli(
      "train-to-target --model ff --target 0.9 --runs 3 --eval-every 20 --max-steps 1000 --precision fp32,bf16-mixed "
      "--price-per-hour 3.6 -o " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("eager fp32 batch 32 lr 0.05"));
  EXPECT_THAT(r.out, HasSubstr("eager bf16-mixed batch 32 lr 0.05"));
  EXPECT_THAT(r.out, HasSubstr("3 of 3"));
  EXPECT_THAT(r.out, HasSubstr("against torch eager fp32 batch 32 lr 0.05:"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 6U);
  for (const auto& run : j.at("runs")) {
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    EXPECT_GE(run.at("final_accuracy").get<double>(), 0.9);
    EXPECT_EQ(run.at("steps").get<int>() % 20, 0);  // reached at an evaluation
    EXPECT_EQ(run.at("samples").get<int>(), 32 * run.at("steps").get<int>());
    EXPECT_LE(run.at("train_seconds").get<double>(), run.at("seconds").get<double>());
    EXPECT_GT(run.at("train_images").get<int>() + run.at("val_images").get<int>(), 1700);  // digits: 1,797
  }
  for (const auto& s : j.at("summaries")) {
    EXPECT_TRUE(s.at("olympic").at("valid").get<bool>());
    EXPECT_TRUE(s.contains("cost_to_target"));
  }
  // seeds decide the runs: the same seed, the same steps to the target
  EXPECT_EQ(j.at("runs")[0].at("seed"), 1);
  EXPECT_EQ(j.at("runs")[1].at("seed"), 1);  // seed-major: seed 1 of every configuration first
}

#ifdef NEURALCOST_WITH_LIBTORCH
TEST(ToTargetCliTest, LibTorchTrainsTheSameSplitFromTheSameStartAsTorch) {
  // LibTorch's engine draws a seed's weights and batch order as the torch worker does, from the
  // same generator, on the split the worker makes: a seed's first batch has the same loss in both
  const std::string path = ::testing::TempDir() + "/to_target_both_" + std::to_string(::getpid()) + ".json";
  const CliResult r = run_cli(
      "train-to-target --model cnn --width 16 --backend torch,libtorch --mode eager,compiled --target 0.8 "
      "--runs 3 --eval-every 20 --max-steps 1000 -o " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("libtorch compiled fp32 batch 32 lr 0.05"));
  EXPECT_THAT(r.out, HasSubstr("3 of 3"));
  EXPECT_THAT(r.out, HasSubstr("same start: a seed's first batch has the same loss in torch and libtorch (12 pair(s)"));
  EXPECT_THAT(r.out, HasSubstr("LibTorch"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 12U);
  EXPECT_TRUE(j.at("same_start").at("same").get<bool>());
  EXPECT_EQ(j.at("configs")[2].at("backend"), "libtorch");
  std::map<std::uint64_t, double> first;  // seed -> torch eager's first loss
  for (const auto& run : j.at("runs")) {
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    EXPECT_EQ(run.at("val_images"), 359);  // the worker's split, in both
    const auto seed = run.at("seed").get<std::uint64_t>();
    if (!first.count(seed)) first[seed] = run.at("first_loss").get<double>();
    // eager or compiled, torch or LibTorch: the seed's weights on the seed's first batch
    EXPECT_NEAR(run.at("first_loss").get<double>(), first[seed], 1e-4 * first[seed]) << run.dump();
    const bool libtorch = j.at("configs")[run.at("config").get<int>()].at("backend") == "libtorch";
    EXPECT_EQ(run.at("torch").get<std::string>().rfind("LibTorch", 0) == 0, libtorch);
  }
  // read back, the same study
  const ToTargetStudy read = read_to_target_study(j, path);
  ASSERT_TRUE(read.start.has_value());
  EXPECT_EQ(read.start->pairs, 12U);  // each seed: 2 torch configurations x 2 LibTorch ones
  EXPECT_EQ(read.options.configs[3].backend, "libtorch");
}

TEST(ToTargetCliTest, AUsersTorchScriptTrainsInBothBackends) {
  // tests/workers/make_to_target_models.py: an MLP that takes the digits flattened, a convnet
  // that takes them as images; each run redraws their weights from its seed, in both backends alike
  const std::string models = NEURALCOST_TO_TARGET_MODELS;
  for (const std::string model : {"mlp.pt", "convnet.pt"}) {
    const std::string path = ::testing::TempDir() + "/to_target_user_" + std::to_string(::getpid()) + ".json";
    const CliResult r = run_cli("train-to-target --model " + models + "/" + model +
                                " --backend torch,libtorch --target 0.85 --runs 3 --max-steps 1500 -o " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(model + " (TorchScript, "));
    EXPECT_THAT(r.out, HasSubstr("3 of 3"));
    EXPECT_THAT(r.out,
                HasSubstr("same start: a seed's first batch has the same loss in torch and libtorch (3 pair(s)"));
    const nlohmann::json j = nlohmann::json::parse(slurp(path));
    for (const auto& run : j.at("runs")) EXPECT_TRUE(run.at("reached").get<bool>()) << model << run.dump();
    EXPECT_EQ(j.at("runs")[0].at("parameters"), j.at("runs")[1].at("parameters"));
  }
}
#endif

TEST(ToTargetCliTest, AUsersTorchExportProgramTrainsInTorchEagerAndCompiled) {
  // tests/workers/make_digits_programs.py: an MLP over the digits flattened, exported with a
  // dynamic batch; the torch worker trains ExportedProgram.module(), torch.compile'd in compiled
  const std::string program = std::string(NEURALCOST_MODEL_FILES) + "/digits_mlp.pt2";
  const std::string path = ::testing::TempDir() + "/to_target_program_" + std::to_string(::getpid()) + ".json";
  const CliResult r =
      run_cli("train-to-target --model " + program +
              " --backend torch --mode eager,compiled --target 0.85 --runs 3 --max-steps 1500 -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("digits_mlp.pt2 (torch.export program, 2,410 parameters)"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 6U);
  std::map<std::uint64_t, std::vector<std::int64_t>> steps;  // per seed: eager's and compiled's
  for (const auto& run : j.at("runs")) {
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    EXPECT_EQ(run.at("parameters"), 2410);  // 64 x 32 + 32 + 32 x 10 + 10
    steps[run.at("seed").get<std::uint64_t>()].push_back(run.at("steps").get<std::int64_t>());
  }
  // the seed draws the weights and the batches: both modes train the same steps to the target
  for (const auto& [seed, s] : steps) {
    ASSERT_EQ(s.size(), 2U);
    EXPECT_EQ(s[0], s[1]) << "seed " << seed;
  }
}

TEST(ToTargetCliTest, JaxTrainsTheSameNetworkFromTheSameStartAsTorch) {
  // the jax engine copies the torch module's seeded weights and follows the same batch order: a
  // seed's first batch has the same loss in torch and jax, fp32 and bf16-mixed (the contractions
  // rounded as torch.autocast rounds them), and both reach the target
  const std::string path = ::testing::TempDir() + "/to_target_jax_" + std::to_string(::getpid()) + ".json";
  const CliResult r = run_cli(
      "train-to-target --model ff --width 16 --backend torch,jax --mode compiled --precision fp32,bf16-mixed "
      "--target 0.75 --runs 3 --eval-every 10 --max-steps 2000 -o " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("jax compiled bf16-mixed batch 32 lr 0.05"));
  EXPECT_THAT(r.out, HasSubstr("JAX 0."));
  // per seed and precision: one torch and one jax configuration
  EXPECT_THAT(r.out, HasSubstr("same start: a seed's first batch has the same loss in torch and jax (6 pair(s)"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 12U);
  EXPECT_TRUE(j.at("same_start").at("same").get<bool>());
  for (const auto& run : j.at("runs")) {
    const auto& config = j.at("configs")[run.at("config").get<int>()];
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    // two blocks of linear and layer norm, then the classifier
    EXPECT_EQ(run.at("parameters"), (64 * 16 + 16) + 2 * 16 + (16 * 16 + 16) + 2 * 16 + (16 * 10 + 10));
    EXPECT_EQ(run.at("torch").get<std::string>().rfind("JAX ", 0) == 0, config.at("backend") == "jax");
    EXPECT_GT(run.at("compile_seconds").get<double>(), 0) << run.dump();  // before the clock
  }
  const ToTargetStudy read = read_to_target_study(j, path);
  ASSERT_TRUE(read.start.has_value());
  EXPECT_EQ(read.start->pairs, 6U);

  // eager jax (primitive by primitive: about 100 times slower a step here) starts alike too
  const CliResult e = run_cli(
      "train-to-target --model cnn --width 8 --backend torch,jax --target 0.99 --runs 3 --eval-every 5 "
      "--max-steps 10 -o " +
      path);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("same start: a seed's first batch has the same loss in torch and jax (3 pair(s)"));
  EXPECT_THAT(e.out, HasSubstr("jax eager fp32 batch 32 lr 0.05: 3 of 3 runs did not reach 0.99"));
}

TEST(ToTargetCliTest, TensorFlowTrainsTheSameNetworkFromTheSameStartAsTorch) {
  // the tensorflow engine copies the torch module's seeded weights into TF's layouts (NHWC images,
  // HWIO kernels): a seed's first batch has the same loss in torch and TensorFlow, eager and
  // tf.function, and both reach the target
  const std::string path = ::testing::TempDir() + "/to_target_tf_" + std::to_string(::getpid()) + ".json";
  const CliResult r = run_cli(
      "train-to-target --model cnn --width 8 --backend torch,tensorflow --mode eager,compiled --target 0.75 --runs 3 "
      "--eval-every 10 --max-steps 2000 -o " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tensorflow compiled fp32 batch 32 lr 0.05"));
  EXPECT_THAT(r.out, HasSubstr("TensorFlow 2."));
  // per seed: 2 torch x 2 tensorflow configurations
  EXPECT_THAT(r.out,
              HasSubstr("same start: a seed's first batch has the same loss in torch and tensorflow (12 pair(s)"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 12U);
  for (const auto& run : j.at("runs")) {
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    EXPECT_EQ(run.at("parameters"), j.at("runs")[0].at("parameters"));
  }
}

TEST(ToTargetCliTest, AUsersSavedModelTrainsInTensorFlow) {
  // tests/workers/make_digits_saved_models.py: a tf.Module MLP over the digits flattened and a Keras
  // export of a convnet over NHWC images; each run redraws their variables from its seed
  const std::string files = NEURALCOST_MODEL_FILES;
  std::vector<std::string> models{"digits_saved"};
  if (std::filesystem::exists(files + "/digits_keras")) models.push_back("digits_keras");
  for (const std::string& model : models) {
    const std::string path = ::testing::TempDir() + "/to_target_saved_" + std::to_string(::getpid()) + ".json";
    const CliResult r = run_cli("train-to-target --model " + files + "/" + model +
                                " --backend tensorflow --mode eager,compiled --target 0.85 --runs 3 --max-steps 1500 "
                                "-o " +
                                path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(model + " (SavedModel, "));
    const nlohmann::json j = nlohmann::json::parse(slurp(path));
    EXPECT_EQ(j.at("contract").at("model_kind"), "SavedModel");
    ASSERT_EQ(j.at("runs").size(), 6U);
    std::map<std::uint64_t, std::vector<double>> first;  // per seed: eager's and compiled's first loss
    for (const auto& run : j.at("runs")) {
      EXPECT_TRUE(run.at("reached").get<bool>()) << model << run.dump();
      first[run.at("seed").get<std::uint64_t>()].push_back(run.at("first_loss").get<double>());
    }
    for (const auto& [seed, f] : first) {
      ASSERT_EQ(f.size(), 2U);
      EXPECT_NEAR(f[0], f[1], 1e-5 * f[0]) << model << " seed " << seed;  // the seed decides the variables
    }
    EXPECT_NE(first[1][0], first[2][0]) << model;  // and another seed other ones
    if (model == "digits_saved") {
      EXPECT_EQ(j.at("runs")[0].at("parameters"), 64 * 32 + 32 + 32 * 10 + 10);
    }
  }
  // a trainable variable the output does not depend on gets no gradient: it is left alone (as
  // torch's optimizers skip one), not counted, and the rest trains
  const std::string path = ::testing::TempDir() + "/to_target_unused_" + std::to_string(::getpid()) + ".json";
  const CliResult r =
      run_cli("train-to-target --model " + files +
              "/digits_saved_unused --backend tensorflow --target 0.85 --runs 3 --max-steps 1500 -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  for (const auto& run : j.at("runs")) {
    EXPECT_TRUE(run.at("reached").get<bool>()) << run.dump();
    EXPECT_EQ(run.at("parameters"), 64 * 32 + 32 + 32 * 10 + 10);
  }
}

TEST(ToTargetCliTest, AUsersModelThatCannotTrainIsOneErrorLine) {
  const std::string models = NEURALCOST_TO_TARGET_MODELS;
  std::vector<std::string> backends{"torch"};
#ifdef NEURALCOST_WITH_LIBTORCH
  backends.push_back("libtorch");
#endif
  for (const std::string& backend : backends) {
    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {"five.pt", "five.pt: its output for [2, 64] is [2, 5], not [2, 10] logits"},
             {"frozen.pt", "frozen.pt: it has no trainable parameters"},
             {"junk.pt", "junk.pt: not ff or cnn, nor a TorchScript file"},
             {"nothing.pt",
              "nothing.pt: train-to-target trains ff, cnn, a TorchScript file, a torch.export .pt2 or a SavedModel "
              "directory, and there is no such file"},
             {"mlp.pt --width 8", "--width and --depth size ff and cnn; " + models + "/mlp.pt has its own sizes"},
             {"mlp.pt --mode compiled", "--mode compiled: " + models +
                                            "/mlp.pt is TorchScript, which runs as it is in both modes; give --mode "
                                            "eager"},
         }) {
      const CliResult r = run_cli("train-to-target --runs 3 --backend " + backend + " --model " + models + "/" + args +
                                  " -o " + ::testing::TempDir() + "/to_target_bad.json");
      EXPECT_EQ(r.exit_code, 1) << backend << " " << args << "\n" << r.err;
      EXPECT_THAT(r.err, HasSubstr("error: "));
      EXPECT_THAT(r.err, HasSubstr(message)) << backend;
      const std::string error = r.err.substr(std::min(r.err.find("error: "), r.err.size()));
      EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << r.err;  // one line
    }
  }
  // torch.export programs: a batch exported fixed, LibTorch (which cannot load one), not a program
  const std::string files = NEURALCOST_MODEL_FILES, junk = ::testing::TempDir() + "/to_target_junk.pt2";
  { std::ofstream(junk) << "not a program\n"; }
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--backend torch --model " + files + "/digits_static.pt2",
            "digits_static.pt2: its batch dimension was exported fixed (Guard failed: input.size()[0] == 4); export "
            "it with a dynamic batch"},
           {"--backend libtorch --model " + files + "/digits_mlp.pt2",
            "--backend libtorch: " + files + "/digits_mlp.pt2 is a torch.export program, which LibTorch cannot load"},
           {"--backend torch --model " + junk, "to_target_junk.pt2: not a torch.export program torch can load"},
           {"--backend jax --model " + files + "/digits_mlp.pt2",
            "--backend jax: " + files +
                "/digits_mlp.pt2 is a torch.export program; train it with --backend torch (jax trains ff and cnn)"},
           {"--backend tensorflow --model " + files + "/digits_saved_fixed",
            "digits_saved_fixed: input 'pixels' has a fixed batch of 4; save it with a batch of None"},
           {"--backend torch --model " + files + "/digits_saved",
            "--backend torch: " + files +
                "/digits_saved is a SavedModel; train it with --backend tensorflow (torch "
                "trains ff and cnn)"},
           {"--backend tensorflow --precision bf16-mixed --model " + files + "/digits_saved",
            "--precision bf16-mixed: " + files +
                "/digits_saved is a SavedModel, whose graph has its own dtypes; give --precision fp32"},
           {"--backend tensorflow --model " + files,
            "--model " + files + ": a directory, but not a SavedModel (it has no saved_model.pb)"},
           {"--backend tensorflow --model " + files + "/digits_mlp.pt2",
            "--backend tensorflow: " + files +
                "/digits_mlp.pt2 is a torch.export program; train it with --backend torch (tensorflow trains ff and "
                "cnn, and SavedModels)"},
       }) {
    const CliResult r =
        run_cli("train-to-target --runs 3 " + args + " -o " + ::testing::TempDir() + "/to_target_bad.json");
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    const std::string error = r.err.substr(std::min(r.err.find("error: "), r.err.size()));
    EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << r.err;  // one line
  }
}

TEST(ToTargetCliTest, AnUnreachableTargetIsRecordedAsNotReachedWithItsRunsKept) {
  // without -o, into to-target.json of the working directory, which a second study never replaces
  const std::string dir = ::testing::TempDir() + "/to_target_far_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/to-target.json";
  const std::string args = "train-to-target --model cnn --width 16 --target 1.0 --runs 3 --eval-every 5 --max-steps 10";
  const CliResult r = run_cli_env("cd " + dir + " &&", args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string kept = slurp(path);
  const CliResult again = run_cli_env("cd " + dir + " &&", args);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("error: to-target.json exists (an earlier train-to-target's runs): name another "
                                   "file with -o, or -o to-target.json to replace it"));
  EXPECT_EQ(slurp(path), kept);
  EXPECT_THAT(r.out, HasSubstr("0 of 3"));
  EXPECT_THAT(r.out, HasSubstr("no olympic mean: 3 of 3 runs did not reach the target"));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(j.at("runs").size(), 3U);
  for (const auto& run : j.at("runs")) {
    EXPECT_FALSE(run.at("reached").get<bool>());
    EXPECT_EQ(run.at("steps"), 10);
    EXPECT_EQ(run.at("curve").size(), 2U);  // evaluations at steps 5 and 10
    // its own process's peak resident memory: torch and the data at least, far below the machine's
    EXPECT_GT(run.at("peak_rss_bytes").get<std::int64_t>(), 50LL << 20);
    EXPECT_LT(run.at("peak_rss_bytes").get<std::int64_t>(), 16LL << 30);
  }
}

TEST(ToTargetCliTest, BadInputIsOneErrorLine) {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--runs 2", "--runs 2: at least 3 (the olympic mean drops the fastest and the slowest run), at most 1000"},
           {"--val-fraction 0", "--val-fraction 0: a fraction strictly between 0 and 1"},
           {"--model lstm",
            "--model lstm: train-to-target trains ff, cnn, a TorchScript file, a torch.export .pt2 or a SavedModel "
            "directory, and there is no such file"},
           {"--dataset mnist", "--dataset mnist: the offline datasets are: digits"},
           {"--batch 5000", "--batch 5000 is larger than the 1438 training images"},
           {"--backend libtorch --batch 5000", "--batch 5000 is larger than the 1438 training images"},
           {"--backend mxnet", "--backend mxnet: train-to-target trains in torch, libtorch, jax or tensorflow"},
           {"--backend tensorflow --batch 5000", "--batch 5000 is larger than the 1438 training images"},
           {"--backend jax --batch 5000", "--batch 5000 is larger than the 1438 training images"},
       }) {
    const CliResult r = run_cli("train-to-target " + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.substr(r.err.find("error: ")), "error: " + message + "\n") << args;
  }
}

}  // namespace
}  // namespace neuralcost
