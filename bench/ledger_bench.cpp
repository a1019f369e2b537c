// The memory ledger of a training step against the forward analysis of the same graph
// (issue 14: training analysis of a 1,000-node graph costs at most 2x its forward analysis).
// A synthetic 1,000-op graph of 100 transformer-like blocks (linear, split, attention, views,
// residual add, layer norm, gelu); every benchmark prints its ops per second, and the ledger's
// counters say how much of the analyze() time it takes.
#include <benchmark/benchmark.h>

#include <string>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/training/memory.hpp"
#include "synthetic_graph.hpp"

namespace {

using namespace neuralcost;
using neuralcost::bench::synthetic_graph;

const OpGraph& graph(std::int64_t ops) {
  static const OpGraph g1k = synthetic_graph(100), g10k = synthetic_graph(1000);
  return ops == 1000 ? g1k : g10k;
}

void BM_Analyze(benchmark::State& state) {
  const OpGraph& g = graph(state.range(0));
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  for (auto _ : state) benchmark::DoNotOptimize(analyze(g, hw, {8}));
  state.counters["ops_per_second"] =
      benchmark::Counter(static_cast<double>(g.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Ledger(benchmark::State& state, const char* checkpoint) {
  const OpGraph& g = graph(state.range(0));
  TrainingOptions options;
  options.precision = Precision::kBf16Mixed;
  options.checkpoint = parse_checkpoint(checkpoint);
  std::uint64_t lower = 0;
  for (auto _ : state) {
    const MemoryLedger l = memory_ledger(g, options);
    lower = l.activations.lower_bound_bytes;
    benchmark::DoNotOptimize(lower);
  }
  state.counters["ops_per_second"] =
      benchmark::Counter(static_cast<double>(g.size()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["lower_bound_bytes"] = static_cast<double>(lower);
}

BENCHMARK(BM_Analyze)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Ledger, none, "none")->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Ledger, full, "full")->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Ledger, selective, "selective")->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
