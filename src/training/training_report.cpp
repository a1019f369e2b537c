// A model's training step analysed, with its memory ledger (training_report.hpp).
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {

TrainingReport training_report(const OpGraph& forward, const HardwareSpec& hardware, const TrainingOptions& options) {
  TrainingReport r{
      analyze(training_step(forward, options), hardware), options, memory_ledger(forward, options), std::nullopt, {}};
  if (r.memory.batch == 0) r.memory.batch = r.step.batch;
  for (const OpRecord& op : forward.ops()) r.op_names.push_back(op.name);
  return r;
}

}  // namespace neuralcost
