// libFuzzer target for the ONNX importer: any byte string, read as an .onnx file in full and
// structure-only mode, must end in an analysis (and, for the full read, a training step's
// analysis and memory ledger) or a neuralcost::Error. Anything else (another
// exception escaping, a sanitizer report, a hang) is a bug. Built by tests/fuzz/build_fuzz.sh
// with clang, -fsanitize=fuzzer,address,undefined, from the counting core and the importer only
// (the roof is a fixed H100-like spec: the database is not linked).
#include <cstdint>
#include <fstream>
#include <string>

#include "importers/onnx/onnx_importer.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // a fixed name in the working folder: error messages (which name the file) are the same in
  // every run, which keeps a seeded run reproducible
  static const std::string path = "neuralcost_fuzz_input.onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static const neuralcost::HardwareSpec hw = [] {
    neuralcost::HardwareSpec s;
    s.id = "fuzz";
    s.name = "fixed roofs";
    for (const neuralcost::DType d : neuralcost::compute_dtypes()) s.peak_flops_per_second[d] = 1e15;
    s.memory_bandwidth_bytes_per_second = 3e12;
    s.caches.push_back({"L2", 5e7, 1e13});
    return s;
  }();
  static const neuralcost::OnnxImporter importer;
  for (const bool structure_only : {false, true}) {
    // the fixtures' symbolic batch is N or batch; a --dim the graph lacks is an error, so try both
    for (const char* dim : {"N", "batch", ""}) {
      neuralcost::ModelRequest request;
      request.model = path;
      request.structure_only = structure_only;
      if (*dim) request.dims[dim] = 2;
      try {
        const neuralcost::OpGraph graph = importer.import(request);
        neuralcost::analyze(graph, hw);
        if (!structure_only) {
          // the training transform and the ledger on whatever the importer accepted
          neuralcost::TrainingOptions training;
          training.checkpoint.kind = neuralcost::CheckpointKind::kSelective;
          neuralcost::analyze(neuralcost::training_step(graph, training), hw);
          neuralcost::memory_ledger(graph, training);
        }
        break;
      } catch (const neuralcost::Error& e) {
        // a clear rejection is the expected outcome for most inputs
        if (std::string(e.what()).find("--dim '") == std::string::npos) break;
      }
    }
  }
  return 0;
}
