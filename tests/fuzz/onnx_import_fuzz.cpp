// libFuzzer target for the ONNX importer: any byte string, read as an .onnx file in full and
// structure-only mode, must end in an analysis or a neuralcost::Error. Anything else (another
// exception escaping, a sanitizer report, a hang) is a bug. Built by tests/fuzz/run_fuzz.sh
// with clang, -fsanitize=fuzzer,address,undefined.
#include <cstdint>
#include <fstream>
#include <string>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // a fixed name in the working folder: error messages (which name the file) are the same in
  // every run, which keeps a seeded run reproducible
  static const std::string path = "neuralcost_fuzz_input.onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  static const neuralcost::HardwareSpec& hw = neuralcost::HardwareDatabase::builtin().get("h100-sxm");
  for (const bool structure_only : {false, true}) {
    // the fixtures' symbolic batch is N or batch; a --dim the graph lacks is an error, so try both
    for (const char* dim : {"N", "batch", ""}) {
      neuralcost::ModelRequest request;
      request.model = path;
      request.structure_only = structure_only;
      if (*dim) request.dims[dim] = 2;
      try {
        neuralcost::analyze(neuralcost::importer_for(request).import(request), hw);
        break;
      } catch (const neuralcost::Error& e) {
        // a clear rejection is the expected outcome for most inputs
        if (std::string(e.what()).find("--dim '") == std::string::npos) break;
      }
    }
  }
  return 0;
}
