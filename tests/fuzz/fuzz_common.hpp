// What both libFuzzer targets do with a graph they got: analyse it on fixed roofs (an H100-like
// spec: the hardware database is not linked), then as a training step, and build its memory ledger.
// Anything but a neuralcost::Error escaping is a bug.
#pragma once

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost::fuzz {

inline const HardwareSpec& fixed_roofs() {
  static const HardwareSpec hw = [] {
    HardwareSpec s;
    s.id = "fuzz";
    s.name = "fixed roofs";
    for (const DType d : compute_dtypes()) s.peak_flops_per_second[d] = 1e15;
    s.memory_bandwidth_bytes_per_second = 3e12;
    s.caches.push_back({"L2", 5e7, 1e13});
    return s;
  }();
  return hw;
}

/// The forward analysis; with `training`, also the step (selective checkpointing) and the ledger.
inline void analyze_all(const OpGraph& graph, bool training) {
  analyze(graph, fixed_roofs());
  if (!training) return;
  TrainingOptions options;
  options.checkpoint.kind = CheckpointKind::kSelective;
  analyze(training_step(graph, options), fixed_roofs());
  memory_ledger(graph, options);
}

}  // namespace neuralcost::fuzz
