// libFuzzer target for the ONNX importer: any byte string, read as an .onnx file in full and
// structure-only mode, must end in an analysis (and, for the full read, a training step's
// analysis and memory ledger) or a neuralcost::Error. Anything else (another
// exception escaping, a sanitizer report, a hang) is a bug. Built by tests/fuzz/build_fuzz.sh
// with clang, -fsanitize=fuzzer,address,undefined, from the counting core and the importer only
// (the roof is a fixed H100-like spec: the database is not linked).
#include <cstdint>
#include <fstream>
#include <string>

#include "fuzz_common.hpp"
#include "importers/onnx/onnx_importer.hpp"
#include "neuralcost/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // a fixed name in the working folder: error messages (which name the file) are the same in
  // every run, which keeps a seeded run reproducible
  static const std::string path = "neuralcost_fuzz_input.onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static const neuralcost::OnnxImporter importer;
  for (const bool structure_only : {false, true}) {
    // the fixtures' symbolic batch is N or batch; a --dim the graph lacks is an error, so try both
    for (const char* dim : {"N", "batch", ""}) {
      neuralcost::ModelRequest request;
      request.model = path;
      request.structure_only = structure_only;
      if (*dim) request.dims[dim] = 2;
      try {
        // the training transform and the ledger on whatever the full import accepted
        neuralcost::fuzz::analyze_all(importer.import(request), !structure_only);
        break;
      } catch (const neuralcost::Error& e) {
        // a clear rejection is the expected outcome for most inputs
        if (std::string(e.what()).find("--dim '") == std::string::npos) break;
      }
    }
  }
  return 0;
}
