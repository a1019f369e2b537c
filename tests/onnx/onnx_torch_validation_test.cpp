// The ONNX importer against PyTorch: networks exported by Debian's torch and torchvision
// (tests/onnx/export_torch_fixtures.py, random weights) must give the multiply-accumulates
// counted by forward hooks on the PyTorch modules, PyTorch's parameter count, torchvision's
// published MACs, and, for the five reference networks, the built-in model's counts. A training
// step's contraction FLOPs (forward + backward) must equal the products autograd dispatches.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {
namespace {

const std::string kFixtures = NEURALCOST_TORCH_FIXTURES;
constexpr std::int64_t kBatch = 2;

const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(kFixtures + "/expected.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

Analysis analyze_fixture(const std::string& name, bool structure_only = false) {
  ModelRequest request;
  request.model = kFixtures + "/" + name + ".onnx";
  request.dims["batch"] = kBatch;
  request.structure_only = structure_only;
  return analyze(importer_for(request).import(request), HardwareDatabase::builtin().get("h100-sxm"));
}

class TorchExportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchExportTest, CountsMatchThePyTorchModule) {
  const auto& e = expected().at(GetParam());
  const Analysis a = analyze_fixture(GetParam());
  EXPECT_TRUE(a.complete()) << (a.unmodeled.empty() ? "" : a.unmodeled[0].reason);
  const auto macs = e.at("macs_per_sample").get<std::uint64_t>();
  EXPECT_EQ(a.totals.contraction_flops, 2 * macs * kBatch);
  EXPECT_EQ(a.totals.parameter_count,
            e.at("torch_parameters").get<std::uint64_t>() - e.at("folded_batchnorm_channels").get<std::uint64_t>());
  if (e.contains("published_gmacs")) {
    // torchvision publishes GMACs to 3 decimals
    EXPECT_NEAR(static_cast<double>(a.totals.contraction_flops) / (2.0 * kBatch * 1e9),
                e["published_gmacs"].get<double>(), 5e-4);
    EXPECT_EQ(e["torch_parameters"], e["published_parameters"]);
  }
  std::printf("%-22s opset %2d: %4zu ops, %.6g contraction FLOPs/sample, %llu parameters\n", GetParam().c_str(),
              e.at("opset").get<int>(), a.ops.size(), static_cast<double>(a.totals.contraction_flops) / kBatch,
              static_cast<unsigned long long>(a.totals.parameter_count));
}

/// Contraction FLOPs of the step other than the optimizer's (which has none).
std::uint64_t step_contractions(const OpGraph& forward) {
  const Analysis step = analyze(training_step(forward, {}), HardwareDatabase::builtin().get("h100-sxm"));
  EXPECT_TRUE(step.complete()) << (step.unmodeled.empty() ? "" : step.unmodeled[0].reason);
  return step.totals.contraction_flops;
}

TEST_P(TorchExportTest, TrainingStepContractionsMatchWhatAutogradRuns) {
  // autograd skips the input gradient of the first layer (the image needs none) and of an RNN's
  // first step (h0 needs none); depthwise convolutions count per group
  const auto macs = expected().at(GetParam()).at("training_macs_per_sample").get<std::uint64_t>();
  ModelRequest request;
  request.model = kFixtures + "/" + GetParam() + ".onnx";
  request.dims["batch"] = kBatch;
  EXPECT_EQ(step_contractions(importer_for(request).import(request)), 2 * macs * kBatch);
}

TEST_P(TorchExportTest, StructureOnlyCountsTheSameWithoutReadingWeights) {
  const Analysis full = analyze_fixture(GetParam());
  const Analysis structure = analyze_fixture(GetParam(), true);
  EXPECT_EQ(structure.totals.flops, full.totals.flops);
  EXPECT_EQ(structure.totals.parameter_count, full.totals.parameter_count);
  EXPECT_EQ(structure.totals.parameter_bytes, full.totals.parameter_bytes);
  EXPECT_EQ(structure.totals.bytes_read, full.totals.bytes_read);
  EXPECT_EQ(structure.ops.size(), full.ops.size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchExportTest,
                         ::testing::Values("reference_ff", "reference_cnn", "reference_rnn", "reference_lstm",
                                           "reference_transformer", "resnet18", "resnet18_folded", "mobilenet_v2",
                                           "transformer_encoder"),
                         [](const auto& info) { return info.param; });

class ReferenceExportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceExportTest, TheExportedNetworkCountsLikeTheBuiltInOne) {
  const Analysis onnx = analyze_fixture("reference_" + GetParam());
  ReferenceOptions options;
  options.model = GetParam();
  options.batch = kBatch;
  const Analysis builtin = analyze(build_reference_model(options), HardwareDatabase::builtin().get("h100-sxm"));
  EXPECT_EQ(onnx.totals.flops, builtin.totals.flops);
  EXPECT_EQ(onnx.totals.contraction_flops, builtin.totals.contraction_flops);
  EXPECT_EQ(onnx.totals.transcendentals, builtin.totals.transcendentals);
  EXPECT_EQ(onnx.totals.parameter_count, builtin.totals.parameter_count);
  // the export adds layout ops (ONNX's recurrent output layout, attention's head split), so
  // it moves at least the built-in bytes
  EXPECT_GE(onnx.totals.bytes_read + onnx.totals.bytes_written,
            builtin.totals.bytes_read + builtin.totals.bytes_written);
  // and its training step: the built-in network against autograd on the PyTorch module
  const auto macs = expected().at("reference_" + GetParam()).at("training_macs_per_sample").get<std::uint64_t>();
  EXPECT_EQ(step_contractions(build_reference_model(options)), 2 * macs * kBatch);
}

INSTANTIATE_TEST_SUITE_P(Networks, ReferenceExportTest, ::testing::Values("ff", "cnn", "rnn", "lstm", "transformer"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace neuralcost
