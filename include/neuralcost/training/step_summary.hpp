// A training step's analysis read per forward op and per pass: what the views print for
// `analyze --train` (forward, backward and optimizer FLOPs and bytes of each op, the step's totals
// per pass, and the ops whose gradient is not modeled).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

struct StepWork {
  std::uint64_t flops = 0;
  std::uint64_t contraction_flops = 0;
  std::uint64_t bytes = 0;
  double lower_bound_seconds = 0;
  std::size_t records = 0;
};

/// One forward op of the step (or the loss, or the gradient accumulations of its outputs).
struct StepOpRow {
  std::string name;
  std::string kind;
  StepWork forward;          ///< its forward record (and its recomputation, if any)
  StepWork input_gradient;   ///< gradients of its activation inputs (and the accumulation of them)
  StepWork weight_gradient;  ///< gradients of its parameters
  bool modeled = true;       ///< false when a record of it (forward or gradient) is unmodeled
};

struct PassTotal {
  Pass pass = Pass::kForward;
  StepWork work;
};

struct StepSummary {
  std::vector<StepOpRow> ops;     ///< in forward order, then the loss rows
  std::vector<PassTotal> passes;  ///< every pass with at least one record, in step order
  StepWork optimizer;             ///< all optimizer records
  std::size_t optimizer_parameters = 0;
  /// forward ops whose gradient has no rule (op name and reason), in forward order
  std::vector<std::pair<std::string, std::string>> unmodeled_gradients;
};

/// Groups the records of a step analysis (analyze(training_step(...))) by forward op and pass.
StepSummary summarize_step(const Analysis& step);

}  // namespace neuralcost
