// The LibTorch train-to-target engine on data made here (two clusters of 4 x 4 images): ff and
// cnn reach a target eager and compiled, fp32 and bf16-mixed; a seed decides the run (the same
// seed, the same curve); the compiled mode's warm-up leaves nothing behind (its first loss and
// first evaluation are eager's); bad requests are errors naming what is wrong. Python's torch
// worker is not needed: tests/workers/to_target_test.cpp runs both backends on the digits.
#include <cmath>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/libtorch/to_target_engine.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

/// n images of 1 x 4 x 4 pixels a split, class c's pixels drawn around 0.25 + 0.5 c.
json clusters(int n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0F, 0.15F);
  json data{{"image", {1, 4, 4}}, {"classes", 2}};
  for (const char* split : {"train", "val"}) {
    std::vector<float> x;
    std::vector<int> y;
    for (int i = 0; i < n; ++i) {
      const int c = i % 2;
      for (int k = 0; k < 16; ++k) x.push_back(0.25F + 0.5F * static_cast<float>(c) + noise(rng));
      y.push_back(c);
    }
    data[std::string(split) + "_x"] = x;
    data[std::string(split) + "_y"] = y;
  }
  return data;
}

json request(const std::string& model, const std::string& mode, const std::string& precision) {
  return {{"cmd", "run"}, {"model", model}, {"mode", mode},    {"precision", precision}, {"batch", 16},
          {"lr", 0.05},   {"target", 0.95}, {"eval_every", 5}, {"max_steps", 400},       {"seed", 3},
          {"width", 8},   {"depth", 2},     {"threads", 1},    {"optimizer", "sgd"},     {"data", clusters(96)}};
}

class LibTorchToTargetTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LibTorchToTargetTest, ReachesTheTargetEagerAndCompiledInFp32AndBf16) {
  for (const std::string precision : {"fp32", "bf16-mixed"}) {
    const json eager = libtorch::run_to_target(request(GetParam(), "eager", precision));
    const json compiled = libtorch::run_to_target(request(GetParam(), "compiled", precision));
    for (const json& r : {eager, compiled}) {
      EXPECT_TRUE(r.at("reached").get<bool>()) << precision << " " << r.dump();
      EXPECT_GE(r.at("curve").back().at("accuracy").get<double>(), 0.95);
      EXPECT_EQ(r.at("steps").get<int>() % 5, 0);  // reached at an evaluation
      EXPECT_EQ(r.at("train_images"), 96);
      EXPECT_THAT(r.at("torch").get<std::string>(), HasSubstr("LibTorch"));
      EXPECT_GT(r.at("peak_rss_bytes").get<std::int64_t>(), 0);
    }
    EXPECT_EQ(eager.at("compile_seconds"), 0.0);
    EXPECT_GT(compiled.at("compile_seconds").get<double>(), 0.0);
    // the warm-up put the initial weights, batch-norm statistics and optimizer back: the compiled
    // run starts where the eager one does and evaluates alike after its first steps
    EXPECT_NEAR(compiled.at("first_loss").get<double>(), eager.at("first_loss").get<double>(), 1e-4) << precision;
    EXPECT_NEAR(compiled.at("curve")[0].at("accuracy").get<double>(), eager.at("curve")[0].at("accuracy").get<double>(),
                0.05)
        << precision;
  }
}

TEST_P(LibTorchToTargetTest, TheSeedDecidesTheRun) {
  const json a = libtorch::run_to_target(request(GetParam(), "eager", "fp32"));
  const json b = libtorch::run_to_target(request(GetParam(), "eager", "fp32"));
  json other_req = request(GetParam(), "eager", "fp32");
  other_req["seed"] = 4;
  const json other = libtorch::run_to_target(other_req);
  ASSERT_EQ(a.at("curve").size(), b.at("curve").size());
  for (std::size_t i = 0; i < a.at("curve").size(); ++i) {
    EXPECT_EQ(a.at("curve")[i].at("accuracy"), b.at("curve")[i].at("accuracy"));
    EXPECT_EQ(a.at("curve")[i].at("loss"), b.at("curve")[i].at("loss"));
  }
  EXPECT_NE(a.at("first_loss"), other.at("first_loss"));  // other weights, other batches
}

INSTANTIATE_TEST_SUITE_P(Models, LibTorchToTargetTest, ::testing::Values("ff", "cnn"));

TEST(LibTorchToTargetBadInputTest, IsAnErrorNamingWhatIsWrong) {
  const auto expect_bad = [](const std::function<void(json&)>& change, const std::string& message) {
    json r = request("ff", "eager", "fp32");
    change(r);
    try {
      libtorch::run_to_target(r);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << message;
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  };
  expect_bad([](json& r) { r["batch"] = 97; }, "--batch 97 is larger than the 96 training images");
  expect_bad([](json& r) { r["model"] = "lstm"; },
             "--model lstm: not ff or cnn, nor a TorchScript file LibTorch can load");
  expect_bad([](json& r) { r["precision"] = "fp16-mixed"; }, "fp32 or bf16-mixed");
  expect_bad([](json& r) { r["mode"] = "jit"; }, "eager or compiled");
  expect_bad([](json& r) { r["data"]["val_y"][0] = 2; }, "the data's val_y holds class 2 of 2");
  expect_bad([](json& r) { r["data"]["train_x"].erase(0); },
             "the data's train_x holds 1535 values, not 96 images of 16");
  expect_bad([](json& r) { r["data"]["val_y"] = json::array(); }, "the data's val_y is empty");
  expect_bad(
      [](json& r) {
        r["model"] = "cnn";
        r["depth"] = 4;
      },
      "cnn of depth 4 pools 4 x 4 images below one pixel");
}

}  // namespace
}  // namespace neuralcost
