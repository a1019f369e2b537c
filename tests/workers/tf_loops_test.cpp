// TensorFlow loops that are not unrolled in the graph (a While op) are counted as the ops they
// run: the TensorFlow worker unrolls a While's body once per iteration. The reference LSTM
// (docs/reference-networks.md) written with tf.while_loop, and as Keras LSTM layers
// (unroll=False), both as SavedModels written by tests/workers/make_tf_loop_model.py. Branches
// (If, Case) are counted as the branch taken on the worker's input: the reference ff with each
// hidden block inside a tf.cond.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/wait.h>

#include <gtest/gtest.h>

#include "backends/python_worker/worker_backend.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

constexpr std::uint64_t kContractionPerSample = 16779776;  // 2 layers x 32 steps x 2 products, classifier

/// The SavedModel `kind`, written once per test run by CTest's fixture worker_model_files
/// (tests/workers/make_model_files.sh); "" when it is not there (tf_keras: Keras missing).
std::string saved_model(const std::string& kind) {
  const std::string dir = std::string(NEURALCOST_MODEL_FILES) + "/tf_" + kind;
  if (kind != "keras")
    EXPECT_TRUE(std::filesystem::exists(dir)) << dir << " (run through ctest: its fixture writes it)";
  return std::filesystem::exists(dir) ? dir : "";
}

/// Captures the SavedModel in `dir` with input `shape` in `mode` and checks that it is counted
/// completely, with `parameters` weights (the framework agreeing), `contraction` FLOPs per sample
/// and `matmuls` products.
void expect_counted(const std::string& dir, const Shape& shape, const std::string& mode, std::uint64_t parameters,
                    std::uint64_t contraction, std::size_t matmuls) {
  SCOPED_TRACE(dir + " in mode " + mode);
  ModelRequest request;
  request.model = dir;
  request.input_shapes = {shape};
  RunOptions run;
  run.threads = 1;
  auto model = backend_named("tensorflow").prepare(request, mode, run);
  const std::int64_t batch = shape[0];
  const Analysis a = analyze(model->captured_graph(), HardwareDatabase::builtin().get("h100-sxm"), {batch});
  EXPECT_TRUE(a.complete()) << a.unmodeled.size() << " op(s) not modeled, e.g. "
                            << a.graph.op(a.unmodeled.front().op_index).source_type << ": "
                            << a.unmodeled.front().reason;
  EXPECT_EQ(a.totals.parameter_count, parameters);
  EXPECT_EQ(a.totals.contraction_flops, static_cast<std::uint64_t>(batch) * contraction);
  std::size_t products = 0;
  for (const OpRecord& r : a.graph.ops()) products += r.kind == OpKind::kMatMul;
  EXPECT_EQ(products, matmuls);
  EXPECT_EQ(model->environment().at("framework_parameters"), std::to_string(parameters));
}

// every step's two products are ops of their own: 2 layers x 32 steps x 2, and the classifier
constexpr std::size_t kLstmMatmuls = 2 * 32 * 2 + 1;
const Shape kLstmInput = {3, 32, 128};

TEST(TfLoopsTest, WhileLoopLstmCountsEveryStep) {
  const std::string dir = saved_model("while_loop");
  for (const char* mode : {"eager", "function"}) {
    expect_counted(dir, kLstmInput, mode, 265482, kContractionPerSample, kLstmMatmuls);
  }
}

TEST(TfLoopsTest, CondFfCountsTheBranchTaken) {
  // docs/reference-networks.md: ff, 118,794 parameters, 236,032 contraction FLOPs per sample; each
  // hidden block is the true branch of a tf.cond on all(isfinite(x)), the false branch zeros
  const std::string dir = saved_model("cond");
  // 3 products: the two taken branches' Linear and the classifier
  for (const char* mode : {"eager", "function"}) expect_counted(dir, {3, 784}, mode, 118794, 236032, 3);
}

TEST(TfLoopsTest, KerasLstmLayersCountEveryStep) {
  const std::string dir = saved_model("keras");
  if (dir.empty()) GTEST_SKIP() << "Keras is not installed in the worker's environment";
  // Keras's LSTM has one bias per layer, PyTorch's (the reference) two: 2 x 512 parameters fewer
  for (const char* mode : {"eager", "function"}) {
    expect_counted(dir, kLstmInput, mode, 265482 - 2 * 512, kContractionPerSample, kLstmMatmuls);
  }
}

}  // namespace
}  // namespace neuralcost
