// The resident memory of a process, for the samplers that watch a model's process grow.
#pragma once

#include <optional>

namespace neuralcost {

/// The resident memory (RSS) of process `pid` in bytes (/proc/PID/statm); empty when unreadable.
std::optional<double> process_resident_bytes(int pid);

}  // namespace neuralcost
