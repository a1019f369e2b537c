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

namespace {

using namespace neuralcost;

/// `blocks` blocks of 10 ops each, chained through tensor names (as analysis_bench).
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
