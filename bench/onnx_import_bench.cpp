// ONNX import benchmark: load + check + shape inference + op mapping + roofline analysis of
// ResNet-50 and a ~1,000-node transformer encoder, with the weights embedded in the model file
// (read and parsed) and in an external file that --structure-only never opens. And the training
// step of the ~1,000-node transformer (import + step graph + analysis + memory ledger) beside its
// forward analysis (issue 14's target: at most 2x).
// Fixtures: /usr/bin/python3 tests/onnx/export_torch_fixtures.py DIR --bench
// Run: bench/onnx_import_bench.sh (adds wall time and peak memory of the whole CLI)
//      or ./build/bench/onnx_import_bench --fixtures=DIR
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/report/training_views.hpp"

namespace {

std::string fixtures = "build/bench/onnx_fixtures";

void import_and_analyze(benchmark::State& state, const std::string& file, bool structure_only, bool train = false) {
  neuralcost::ModelRequest request;
  request.model = fixtures + "/" + file;
  request.dims["batch"] = 1;
  request.structure_only = structure_only;
  if (!std::filesystem::exists(request.model)) {
    state.SkipWithError(("missing fixture " + request.model).c_str());
    return;
  }
  const auto& hw = neuralcost::HardwareDatabase::builtin().get("h100-sxm");
  std::size_t ops = 0;
  for (auto _ : state) {
    const neuralcost::OpGraph graph = neuralcost::importer_for(request).import(request);
    if (train) {
      const neuralcost::TrainingReport r = neuralcost::training_report(graph, hw, {});
      ops = r.step.ops.size();
      benchmark::DoNotOptimize(r.memory.activations.upper_bound_bytes);
    } else {
      const neuralcost::Analysis a = neuralcost::analyze(graph, hw);
      ops = a.ops.size();
      benchmark::DoNotOptimize(a.totals.flops);
    }
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(request.model)) / 1e6;
}

BENCHMARK_CAPTURE(import_and_analyze, resnet50_embedded, "resnet50.onnx", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(import_and_analyze, resnet50_external_structure_only, "resnet50_external.onnx", true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(import_and_analyze, transformer_1k_embedded, "transformer_1k.onnx", false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(import_and_analyze, transformer_1k_external_structure_only, "transformer_1k_external.onnx", true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(import_and_analyze, transformer_1k_training_step, "transformer_1k.onnx", false, true)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fixtures=", 11) == 0) fixtures = argv[i] + 11;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
