// Throughput of the cost model and the roofline analysis on a synthetic 100,000-op graph:
// repeated transformer-like blocks (linear, attention, residual add, layer norm, activation,
// views) so every op family on the hot path is exercised. And a training step's analysis against
// the forward analysis of the same 1,000-op graph (issue 14: at most 2x).
#include <benchmark/benchmark.h>

#include <string>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/training/training.hpp"

namespace {

using namespace neuralcost;

/// `blocks` blocks of 10 ops each, chained through tensor names.
OpGraph synthetic_graph(std::int64_t blocks) {
  OpGraph g("synthetic");
  const std::int64_t b = 8, t = 128, d = 512, h = 8;
  auto tensor = [&](const std::string& name, Shape s) { return TensorDesc{name, std::move(s), DType::kBf16}; };
  auto param = [&](const std::string& id, Shape s) { return ParameterDesc{id, std::move(s), DType::kBf16, true}; };
  std::string x = "x0";
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::string p = "b" + std::to_string(i) + ".";
    auto add = [&](OpKind kind, const std::string& name, std::vector<TensorDesc> in, std::vector<TensorDesc> out,
                   std::vector<ParameterDesc> params = {}, const char* function = nullptr) {
      OpRecord op;
      op.name = p + name;
      op.kind = kind;
      op.inputs = std::move(in);
      op.outputs = std::move(out);
      op.parameters = std::move(params);
      if (function) op.attributes.set("function", std::string(function));
      g.add(std::move(op));
    };
    add(OpKind::kLinear, "qkv", {tensor(x, {b, t, d})}, {tensor(p + "qkv", {b, t, 3 * d})},
        {param(p + "wqkv", {3 * d, d}), param(p + "bqkv", {3 * d})});
    add(OpKind::kSplit, "split", {tensor(p + "qkv", {b, t, 3 * d})},
        {tensor(p + "q", {b, h, t, d / h}), tensor(p + "k", {b, h, t, d / h}), tensor(p + "v", {b, h, t, d / h})});
    add(OpKind::kAttention, "sdpa", {tensor(p + "q", {b, h, t, d / h}), tensor(p + "k", {b, h, t, d / h}),
                                     tensor(p + "v", {b, h, t, d / h})},
        {tensor(p + "att", {b, h, t, d / h})});
    add(OpKind::kReshape, "merge", {tensor(p + "att", {b, h, t, d / h})}, {tensor(p + "merged", {b, t, d})});
    add(OpKind::kLinear, "out", {tensor(p + "merged", {b, t, d})}, {tensor(p + "o", {b, t, d})},
        {param(p + "wo", {d, d})});
    add(OpKind::kBinary, "res1", {tensor(x, {b, t, d}), tensor(p + "o", {b, t, d})}, {tensor(p + "r1", {b, t, d})}, {},
        "add");
    add(OpKind::kLayerNorm, "ln", {tensor(p + "r1", {b, t, d})}, {tensor(p + "n", {b, t, d})},
        {param(p + "g", {d}), param(p + "beta", {d})});
    add(OpKind::kLinear, "up", {tensor(p + "n", {b, t, d})}, {tensor(p + "u", {b, t, 4 * d})},
        {param(p + "wu", {4 * d, d})});
    add(OpKind::kActivation, "gelu", {tensor(p + "u", {b, t, 4 * d})}, {tensor(p + "a", {b, t, 4 * d})}, {}, "gelu");
    add(OpKind::kLinear, "down", {tensor(p + "a", {b, t, 4 * d})}, {tensor(p + "x", {b, t, d})},
        {param(p + "wd", {d, 4 * d})});
    x = p + "x";
  }
  g.finalize();
  return g;
}

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
