// Throughput of the cost model and the roofline analysis on a synthetic 100,000-op graph:
// repeated transformer-like blocks (linear, attention, residual add, layer norm, activation,
// views) so every op family on the hot path is exercised. And a training step's analysis against
// the forward analysis of the same 1,000-op graph (issue 14: at most 2x).
#include <benchmark/benchmark.h>

#include <string>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/training/training.hpp"
#include "synthetic_graph.hpp"

namespace {

using namespace neuralcost;
using neuralcost::bench::synthetic_graph;

const OpGraph& graph_100k() {
  static const OpGraph g = synthetic_graph(10000);
  return g;
}

void BM_BuildGraph100k(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(synthetic_graph(10000));
  state.counters["ops_per_second"] = benchmark::Counter(100000.0 * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_CostModel100k(benchmark::State& state) {
  const OpGraph& g = graph_100k();
  for (auto _ : state) {
    std::uint64_t flops = 0;
    for (const OpRecord& op : g.ops()) flops += cost_of(op).flops;
    benchmark::DoNotOptimize(flops);
  }
  state.counters["ops_per_second"] =
      benchmark::Counter(static_cast<double>(g.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Analyze100k(benchmark::State& state) {
  const OpGraph& g = graph_100k();
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  for (auto _ : state) benchmark::DoNotOptimize(analyze(g, hw, {8}));
  state.counters["ops_per_second"] =
      benchmark::Counter(static_cast<double>(g.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

const OpGraph& graph_1k() {
  static const OpGraph g = synthetic_graph(100);
  return g;
}

void BM_ForwardAnalysis1k(benchmark::State& state) {
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  for (auto _ : state) benchmark::DoNotOptimize(analyze(graph_1k(), hw, {8}));
}

/// The step graph is built from the forward graph and analysed: what `analyze --train` adds.
void BM_TrainingAnalysis1k(benchmark::State& state) {
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  std::size_t records = 0;
  for (auto _ : state) {
    const Analysis a = analyze(training_step(graph_1k(), {}), hw, {8});
    records = a.ops.size();
    benchmark::DoNotOptimize(records);
  }
  state.counters["step_records"] = static_cast<double>(records);
}

BENCHMARK(BM_ForwardAnalysis1k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainingAnalysis1k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildGraph100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CostModel100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Analyze100k)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
