// Views of a training step (`analyze --train`): per forward op its forward, backward and
// optimizer work, the totals per pass, the step's lower bound, and the memory ledger.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include <optional>

#include "neuralcost/report/views.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/step_summary.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {

///   op      kind    fwd FLOPs  bwd FLOPs  bwd/fwd  fwd bytes  bwd bytes  lower bound
///   fc1     linear  8.4 M      16.8 M     2.0      1.1 MB     2.2 MB     1.2 µs
/// then the totals per pass, the step's bound and the memory ledger.
std::string render_training(const TrainingReport& report, Format format);
/// Several steps: render_summary's table of the step totals and one memory line each (JSON:
/// training_json of each).
std::string render_training_summary(const std::vector<TrainingReport>& reports, Format format);
nlohmann::json training_json(const TrainingReport& report);

}  // namespace neuralcost
