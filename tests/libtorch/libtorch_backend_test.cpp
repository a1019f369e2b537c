// The LibTorch backend against the static model: same parameters, same contraction FLOPs in
// the ops that really ran, eager and compiled outputs equal, and clear errors for bad files.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/libtorch/libtorch_backend.hpp"
#include "backends/libtorch/reference_modules.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

ModelRequest request(const std::string& model, std::int64_t batch = 2) {
  ModelRequest r;
  r.model = model;
  r.batch = batch;
  return r;
}

Analysis analyze_graph(const OpGraph& g) { return analyze(g, HardwareDatabase::builtin().get("h100-sxm")); }

Analysis static_analysis(const ModelRequest& r) {
  ReferenceOptions o;
  o.model = r.model;
  o.batch = r.batch;
  return analyze_graph(build_reference_model(o));
}

class ReferenceNetTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceNetTest, TorchModuleHasTheStaticParameterCount) {
  const ModelRequest r = request(GetParam());
  auto net = libtorch::make_reference_net(r);
  std::int64_t params = 0;
  for (const at::Tensor& p : net->parameters()) params += p.numel();
  EXPECT_EQ(static_cast<std::uint64_t>(params), static_analysis(r).totals.parameter_count);
}

TEST_P(ReferenceNetTest, CapturedContractionFlopsEqualTheStaticModel) {
  const ModelRequest r = request(GetParam());
  const Analysis expected = static_analysis(r);
  for (const std::string mode : {"eager", "compiled"}) {
    auto model = libtorch_backend().prepare(r, mode);
    const Analysis captured = analyze_graph(model->captured_graph());
    EXPECT_EQ(captured.totals.contraction_flops, expected.totals.contraction_flops) << mode;
    EXPECT_TRUE(captured.complete()) << mode << ": "
                                     << (captured.unmodeled.empty() ? "" : captured.unmodeled[0].reason);
  }
}

TEST_P(ReferenceNetTest, EagerCapturesTheStaticParameters) {
  const ModelRequest r = request(GetParam());
  auto model = libtorch_backend().prepare(r, "eager");
  EXPECT_EQ(analyze_graph(model->captured_graph()).totals.parameter_count, static_analysis(r).totals.parameter_count);
}

TEST_P(ReferenceNetTest, EagerAndCompiledOutputsAgree) {
  const ModelRequest r = request(GetParam(), 3);
  auto net = libtorch::make_reference_net(r);
  const at::Tensor x = libtorch::reference_input(r);
  torch::NoGradGuard no_grad;
  const at::Tensor eager = net->forward(x);
  torch::jit::Module scripted = libtorch::script_reference_net(*net);
  const at::Tensor script = scripted.forward({x}).toTensor();
  EXPECT_EQ(eager.sizes(), script.sizes());
  EXPECT_TRUE(torch::allclose(eager, script, 1e-4, 1e-5)) << (eager - script).abs().max().item<float>();
}

TEST_P(ReferenceNetTest, ProfilerSeesEveryCapturedOp) {
  auto model = libtorch_backend().prepare(request(GetParam()), "eager");
  const OpGraph g = model->captured_graph();
  std::int64_t events = 0;
  for (const OpRecord& op : g.ops()) events = std::max(events, op.attributes.get_int("event") + 1);
  const LayerTiming t = model->profile_layers(3);
  ASSERT_EQ(t.wall_seconds.size(), 3u);
  EXPECT_GE(static_cast<std::int64_t>(t.event_names.size()), events);
  for (const auto& per_run : t.seconds) {
    ASSERT_EQ(per_run.size(), 3u);
    for (double s : per_run) EXPECT_GE(s, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReferenceNetTest, ::testing::Values("ff", "cnn", "rnn", "lstm", "transformer"));

std::string error_of(const ModelRequest& r, const std::string& mode = "eager") {
  try {
    libtorch_backend().prepare(r, mode);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LibTorchFileTest, LoadsATorchScriptFileWithItsInputShape) {
  const std::string path = ::testing::TempDir() + "/nc_ff.pt";
  const ModelRequest ff = request("ff");
  auto net = libtorch::make_reference_net(ff);
  libtorch::script_reference_net(*net).save(path);
  ModelRequest r = request(path);
  r.input_shapes = {{4, 784}};
  for (const std::string mode : {"eager", "compiled"}) {
    auto model = libtorch_backend().prepare(r, mode);
    const Analysis a = analyze_graph(model->captured_graph());
    EXPECT_EQ(a.totals.contraction_flops, 4 * 236032u) << mode;
  }
  r.input_shapes = {{4, 100}};
  EXPECT_THAT(error_of(r), HasSubstr(path + ": forward failed for input shape(s) 4x100:"));
  r.input_shapes = {};
  EXPECT_EQ(error_of(r), path +
                             ": a TorchScript file needs its inputs: --input NAME=SHAPE[:DTYPE[:LOW..HIGH]] or "
                             "--input-shape SHAPE (e.g. 32x3x32x32), once per input");
}

TEST(LibTorchFileTest, MissingAndCorruptFilesAreClearErrors) {
  ModelRequest r = request(::testing::TempDir() + "/does_not_exist.pt");
  r.input_shapes = {{1, 4}};
  EXPECT_EQ(error_of(r), "cannot open TorchScript file '" + r.model + "'");
  const std::string corrupt = ::testing::TempDir() + "/nc_corrupt.pt";
  std::ofstream(corrupt) << "this is not a zip archive";
  r.model = corrupt;
  EXPECT_THAT(error_of(r), HasSubstr(corrupt + ": not a loadable TorchScript file:"));
}

TEST(LibTorchBackendTest, BadModeDtypeAndBatch) {
  EXPECT_EQ(error_of(request("ff"), "jit"), "libtorch: unknown mode 'jit' (modes: eager, compiled)");
  ModelRequest half = request("ff");
  half.dtype = DType::kBf16;
  EXPECT_EQ(error_of(half), "libtorch: dtype bf16 is not supported (fp32, fp64)");
  EXPECT_EQ(error_of(request("ff", 0)), "--batch must be at least 1 (got 0)");
}

}  // namespace
}  // namespace neuralcost
