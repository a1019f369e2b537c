// Views of a training step (`analyze --train`): per forward op its forward, backward and
// optimizer work, the totals per pass, the step's lower bound, and the memory ledger.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "neuralcost/report/views.hpp"
#include "neuralcost/training/step_summary.hpp"

namespace neuralcost {

/// `step` is analyze(training_step(forward, options)).
///
///   op      kind    fwd FLOPs  bwd FLOPs  bwd/fwd  fwd bytes  bwd bytes  lower bound
///   fc1     linear  8.4 M      16.8 M     2.0      1.1 MB     2.2 MB     1.2 µs
std::string render_training(const Analysis& step, const TrainingOptions& options, Format format);
/// Several steps: render_summary's table of the step totals (JSON: training_json of each).
std::string render_training_summary(const std::vector<Analysis>& steps, const TrainingOptions& options, Format format);
nlohmann::json training_json(const Analysis& step, const TrainingOptions& options);

}  // namespace neuralcost
