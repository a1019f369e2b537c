// TensorFlow loops that are not unrolled in the graph (a While op) are counted as the ops they
// run: the TensorFlow worker unrolls a While's body once per iteration. The reference LSTM
// (shared/reference-models.md) written with tf.while_loop, and as Keras LSTM layers
// (unroll=False), both as SavedModels written by tests/workers/make_tf_loop_model.py. Branches
// (If, Case) are counted as the branch taken on the worker's input: the reference ff with each
// hidden block inside a tf.cond.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/wait.h>

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"
#include "backends/python_worker/worker_backend.hpp"

namespace neuralcost {
namespace {

constexpr std::uint64_t kContractionPerSample = 16779776;  // 2 layers x 32 steps x 2 products, classifier

/// Writes the SavedModel `kind` into the test's temporary directory; its path, or "" (Keras missing).
std::string saved_model(const std::string& kind) {
  const std::string dir = testing::TempDir() + "neuralcost_tf_" + kind;
  const std::string command = worker::python_interpreter() + " " NEURALCOST_SOURCE_DIR
                              "/tests/workers/make_tf_loop_model.py " + kind + " " + dir;
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return "";
  EXPECT_EQ(status, 0) << command;
  return dir;
}

void expect_counted(const std::string& dir, const std::string& mode, std::uint64_t parameters) {
  SCOPED_TRACE(dir + " in mode " + mode);
  constexpr std::int64_t kBatch = 3;
  ModelRequest request;
  request.model = dir;
  request.input_shapes = {{kBatch, 32, 128}};
  request.threads = 1;
  auto model = backend_named("tensorflow").prepare(request, mode);
  const Analysis a = analyze(model->captured_graph(), HardwareDatabase::builtin().get("h100-sxm"), {kBatch});
  EXPECT_TRUE(a.complete()) << a.unmodeled.size() << " op(s) not modeled, e.g. "
                            << a.op_records[a.unmodeled.front().op_index].source_type << ": "
                            << a.unmodeled.front().reason;
  EXPECT_EQ(a.totals.parameter_count, parameters);
  EXPECT_EQ(a.totals.contraction_flops, kBatch * kContractionPerSample);
  // every step's two products are ops of their own: 2 layers x 32 steps x 2, and the classifier
  std::size_t matmuls = 0;
  for (const OpRecord& r : a.op_records) matmuls += r.kind == OpKind::kMatMul;
  EXPECT_EQ(matmuls, 2u * 32 * 2 + 1);
  EXPECT_EQ(model->environment().at("framework_parameters"), std::to_string(parameters));
}

TEST(TfLoopsTest, WhileLoopLstmCountsEveryStep) {
  const std::string dir = saved_model("while_loop");
  for (const char* mode : {"eager", "function"}) expect_counted(dir, mode, 265482);
  std::filesystem::remove_all(dir);
}

TEST(TfLoopsTest, CondFfCountsTheBranchTaken) {
  // shared/reference-models.md: ff, 118,794 parameters, 236,032 contraction FLOPs per sample; each
  // hidden block is the true branch of a tf.cond on all(isfinite(x)), the false branch zeros
  const std::string dir = saved_model("cond");
  for (const char* mode : {"eager", "function"}) {
    SCOPED_TRACE(std::string("mode ") + mode);
    constexpr std::int64_t kBatch = 3;
    ModelRequest request;
    request.model = dir;
    request.input_shapes = {{kBatch, 784}};
    request.threads = 1;
    auto model = backend_named("tensorflow").prepare(request, mode);
    const Analysis a = analyze(model->captured_graph(), HardwareDatabase::builtin().get("h100-sxm"), {kBatch});
    EXPECT_TRUE(a.complete()) << a.unmodeled.size() << " op(s) not modeled, e.g. "
                              << a.op_records[a.unmodeled.front().op_index].source_type << ": "
                              << a.unmodeled.front().reason;
    EXPECT_EQ(a.totals.parameter_count, 118794u);
    EXPECT_EQ(a.totals.contraction_flops, kBatch * 236032u);
    std::size_t matmuls = 0;
    for (const OpRecord& r : a.op_records) matmuls += r.kind == OpKind::kMatMul;
    EXPECT_EQ(matmuls, 3u);  // the two taken branches' Linear and the classifier
    EXPECT_EQ(model->environment().at("framework_parameters"), "118794");
  }
  std::filesystem::remove_all(dir);
}

TEST(TfLoopsTest, KerasLstmLayersCountEveryStep) {
  const std::string dir = saved_model("keras");
  if (dir.empty()) GTEST_SKIP() << "Keras is not installed in the worker's environment";
  // Keras's LSTM has one bias per layer, PyTorch's (the reference) two: 2 x 512 parameters fewer
  for (const char* mode : {"eager", "function"}) expect_counted(dir, mode, 265482 - 2 * 512);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace neuralcost
