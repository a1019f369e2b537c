// Uses the installed library the way a C++ user would: build a network, analyze it, print JSON.
#include <iostream>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"

int main() {
  neuralcost::ReferenceOptions options;
  options.model = "lstm";
  const auto analysis = neuralcost::analyze(neuralcost::build_reference_model(options),
                                            neuralcost::HardwareDatabase::builtin().get("a100-sxm-80gb"));
  std::cout << analysis.totals.contraction_flops << " " << analysis.totals.parameter_count << "\n";
  return analysis.totals.contraction_flops == 16779776 && analysis.totals.parameter_count == 265482 ? 0 : 1;
}
