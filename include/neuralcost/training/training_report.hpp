// What `analyze --train` finds for one model: the step's analysis, its memory ledger and, with a
// memory budget, the largest batch that fits. The views of it are report/training_views.hpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

/// One model's training step: analyze(training_step(forward, options)), its memory ledger, and,
/// with a budget, the largest batch that fits.
struct TrainingReport {
  Analysis step;
  TrainingOptions options;
  MemoryLedger memory;
  std::optional<BatchFit> fit;
  std::vector<std::string> op_names;  ///< the forward graph's, which the ledger's op indices index
};

/// The step analysis and the ledger of `forward` (analyze_models adds the budget search).
TrainingReport training_report(const OpGraph& forward, const HardwareSpec& hardware, const TrainingOptions& options);

}  // namespace neuralcost
