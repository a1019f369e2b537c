// Per-kernel traces of the worker backends (docs/worker-protocol.md, "Kernel traces"): every
// mode of JAX and TensorFlow has per-layer times from the framework's profiler, torch.compile
// from its Inductor kernels (and torch.profiler for a graph break), each captured
// record is in at most one layer, and the layers' counted FLOPs with those of the records no
// kernel ran add up to the run's counted total. One profile() per framework (a worker per
// mode), on the transformer (torch.compile: the LSTM), whose product records are all in kernels.
#include <cstdio>
#include <cstdlib>
#include <set>

#include <gtest/gtest.h>

#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

std::vector<ProfileRun> profile_modes(const std::string& backend, std::vector<std::string> modes,
                                      const std::string& model = "transformer") {
  ModelRequest request;
  request.model = model;
  request.batch = 2;
  ProfileOptions options;
  options.modes = std::move(modes);
  options.batches = {2};
  options.layer_runs = 3;
  options.timing.budget_seconds = 0.2;
  options.timing.warmup_seconds = 0;
  options.run.threads = 1;
  // a CPU's spec for these CPU runs, far above this machine's roof
  return profile(backend_named(backend), request, HardwareDatabase::builtin().get("epyc-9654"), options);
}

void expect_kernel_table(const ProfileRun& r, bool fuses) {
  SCOPED_TRACE(r.backend + " " + r.mode);
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  std::string warnings;
  for (const std::string& w : r.warnings) warnings += w + "; ";
  ASSERT_FALSE(r.layers.empty()) << warnings;
  EXPECT_EQ(r.profiled_passes, 3);
  std::uint64_t layer_flops = 0, unattributed_flops = 0;
  std::set<std::size_t> seen;
  bool fused_row = false;
  double measured = 0;
  for (const LayerMeasurement& l : r.layers) {
    layer_flops += l.flops;
    measured += l.measured_seconds;
    std::set<std::string> kinds;
    for (std::size_t i : l.records) {
      EXPECT_TRUE(seen.insert(i).second) << "record " << i << " is in two layers";
      kinds.insert(r.analysis.graph.op(i).source_type);
    }
    fused_row = fused_row || kinds.size() > 1;
  }
  for (const OpRoofline& op : r.analysis.ops) {
    if (r.analysis.graph.op(op.op_index).attributes.get_int("event", -1) < 0) unattributed_flops += op.cost.flops;
  }
  EXPECT_EQ(layer_flops + unattributed_flops, r.analysis.totals.flops);
  // only what XLA folded into constants has no kernel: no product, under 0.1 % of the FLOPs
  EXPECT_LE(unattributed_flops * 1000, r.analysis.totals.flops);
  EXPECT_GT(measured, 0);
  if (fuses) EXPECT_TRUE(fused_row) << "a compiled program's kernels fuse ops: one row names several";
  std::printf("[ overhead ] %s %s: profiled pass %+.1f %% over the plain pass (%zu kernels)\n", r.backend.c_str(),
              r.mode.c_str(), r.profiling_overhead * 100, r.layers.size());
}

TEST(WorkerTracesTest, JaxEagerAndJitHaveATableOfKernelsThatAddsUpToTheCountedTotal) {
  const auto runs = profile_modes("jax", {"eager", "jit"});
  ASSERT_EQ(runs.size(), 2u);
  expect_kernel_table(runs[0], false);
  expect_kernel_table(runs[1], true);
}

TEST(WorkerTracesTest, TensorflowEagerFunctionAndXlaHaveATableOfKernelsThatAddsUpToTheCountedTotal) {
  const auto runs = profile_modes("tensorflow", {"eager", "function", "xla"});
  ASSERT_EQ(runs.size(), 3u);
  expect_kernel_table(runs[0], false);
  expect_kernel_table(runs[1], true);  // grappler's fused MatMul + BiasAdd (+ activation)
  expect_kernel_table(runs[2], true);
}

TEST(WorkerTracesTest, TorchCompileHasATableOfInductorKernelsAndGraphBreaksThatAddsUpToTheCountedTotal) {
  // the LSTM: TorchDynamo leaves nn.LSTM to eager Python (a graph break), Inductor runs the classifier
  const auto runs = profile_modes("torch", {"compile"}, "lstm");
  ASSERT_EQ(runs.size(), 1u);
  expect_kernel_table(runs[0], false);
  bool lstm = false, inductor = false;
  for (const LayerMeasurement& l : runs[0].layers) {
    lstm = lstm || (l.name.rfind("eager:aten::lstm", 0) == 0 && l.flops > 0);
    inductor = inductor || (l.name.rfind("inductor:", 0) == 0 && l.flops > 0);
  }
  EXPECT_TRUE(lstm && inductor);
}

/// A torch eager run's per-op table: one layer per captured op, each named as its op, the
/// layers' FLOPs the run's total; and what timed them.
std::string expect_op_table(const ProfileRun& r) {
  SCOPED_TRACE(r.backend + " " + r.mode);
  EXPECT_FALSE(r.outcome.failed()) << r.outcome.error();
  EXPECT_FALSE(r.layers.empty());
  std::uint64_t flops = 0;
  for (const LayerMeasurement& l : r.layers) {
    flops += l.flops;
    EXPECT_GT(l.profiled_seconds, 0) << l.name;
  }
  EXPECT_EQ(flops, r.analysis.totals.flops);
  std::printf("[ overhead ] %s %s: profiled pass %+.1f %% over the plain pass (%zu ops)\n", r.backend.c_str(),
              r.mode.c_str(), r.profiling_overhead * 100, r.layers.size());
  const auto it = r.contract.find("layer_timer");
  return it == r.contract.end() ? "" : it->second;
}

TEST(WorkerTracesTest, TorchEagerOpsAreTimedByTheCompiledObserverOrTheDispatchModeWhenToldSo) {
  ::unsetenv("NEURALCOST_TORCH_TIMER");
  auto runs = profile_modes("torch", {"eager"}, "lstm");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(
      expect_op_table(runs[0]).rfind("RecordFunction timestamps on the dispatch mode's ops (compiled observer ", 0),
      0u);
  for (const std::string& w : runs[0].warnings)
    EXPECT_EQ(w.find("per-op times by the Python dispatch mode"), std::string::npos) << w;
  const std::size_t ops = runs[0].layers.size();
  ::setenv("NEURALCOST_TORCH_TIMER", "off", 1);
  runs = profile_modes("torch", {"eager"}, "lstm");
  ::unsetenv("NEURALCOST_TORCH_TIMER");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(expect_op_table(runs[0]),
            "TorchDispatchMode timestamps (Python): no compiled timer ($NEURALCOST_TORCH_TIMER=off)");
  EXPECT_EQ(runs[0].layers.size(), ops);
}

}  // namespace
}  // namespace neuralcost
