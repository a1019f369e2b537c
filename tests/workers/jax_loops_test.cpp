// JAX while loops (lax.while_loop, lax.fori_loop with a bound that is not static) are counted as
// the ops they run: the JAX worker finds the trip count by evaluating the program once on the
// real parameters and input, then unrolls the cond once per test and the body once per step
// (python/neuralcost_worker/jax/capture.py). The worker's hidden test model "lstm_while" is the
// reference LSTM (docs/reference-networks.md) with its time loops written as while loops: layer 0
// a lax.while_loop over a counter, layer 1 a lax.fori_loop up to a bound computed from the input.
// A JAX `cond` (lax.cond, lax.switch) is counted as the branch it takes on the worker's input,
// inlined; "ff_cond" is the reference ff with each hidden block inside a cond on its input.
#include <string>

#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

constexpr std::uint64_t kContractionPerSample = 16779776;  // 2 layers x 32 steps x 2 products, classifier
constexpr std::int64_t kBatch = 3;

Analysis analyzed(const std::string& name, const std::string& mode) {
  ModelRequest request;
  request.model = name;
  request.batch = kBatch;
  RunOptions run;
  run.threads = 1;
  auto model = backend_named("jax").prepare(request, mode, run);
  return analyze(model->captured_graph(), HardwareDatabase::builtin().get("h100-sxm"), {kBatch});
}

std::size_t count_of(const Analysis& a, const std::string& source_type) {
  std::size_t n = 0;
  for (const OpRecord& r : a.graph.ops()) n += r.source_type == source_type;
  return n;
}

TEST(JaxLoopsTest, WhileLoopLstmCountsEveryStepLikeTheScanLstm) {
  const Analysis scan = analyzed("lstm", "jit");
  for (const char* mode : {"eager", "jit"}) {
    SCOPED_TRACE(mode);
    const Analysis a = analyzed("lstm_while", mode);
    EXPECT_TRUE(a.complete()) << a.unmodeled.size() << " op(s) not modeled, e.g. "
                              << a.graph.op(a.unmodeled.front().op_index).source_type << ": "
                              << a.unmodeled.front().reason;
    EXPECT_EQ(count_of(a, "jax::while"), 0u);
    EXPECT_EQ(a.totals.parameter_count, 265482u);
    EXPECT_EQ(a.totals.contraction_flops, kBatch * kContractionPerSample);
    // per layer one input projection before the loop and one product per step; the classifier
    EXPECT_EQ(count_of(a, "jax::dot_general"), 2u * (1 + 32) + 1);
    EXPECT_EQ(a.totals.contraction_flops, scan.totals.contraction_flops);
    EXPECT_EQ(a.totals.parameter_count, scan.totals.parameter_count);
    // layer 0's counter folds away; layer 1's bound is data: its compare runs at every test, 32 + 1
    EXPECT_EQ(count_of(a, "jax::lt"), 33u);
  }
}

TEST(JaxLoopsTest, CondFfCountsTheTakenBranchLikeTheFf) {
  // "ff_cond": the reference ff with each hidden block the real branch of a lax.cond on whether its
  // input is finite (the other branch returns zeros); on the worker's input the block always runs
  const Analysis ff = analyzed("ff", "jit");
  for (const char* mode : {"eager", "jit"}) {
    SCOPED_TRACE(mode);
    const Analysis a = analyzed("ff_cond", mode);
    EXPECT_TRUE(a.complete()) << a.unmodeled.size() << " op(s) not modeled, e.g. "
                              << a.graph.op(a.unmodeled.front().op_index).source_type << ": "
                              << a.unmodeled.front().reason;
    EXPECT_EQ(count_of(a, "jax::cond"), 0u);
    EXPECT_EQ(a.totals.parameter_count, 118794u);
    EXPECT_EQ(a.totals.contraction_flops, kBatch * 236032u);
    EXPECT_EQ(count_of(a, "jax::dot_general"), 3u);  // both hidden blocks' products and the classifier
    EXPECT_EQ(a.totals.contraction_flops, ff.totals.contraction_flops);
    EXPECT_EQ(a.totals.parameter_count, ff.totals.parameter_count);
    // the predicate of each cond is counted too: is_finite, reduce_and, convert_element_type
    EXPECT_EQ(count_of(a, "jax::is_finite"), 2u);
  }
}

}  // namespace
}  // namespace neuralcost
