// Captured ops as JSON: how a Python worker sends the ops of one forward pass
// (docs/worker-protocol.md, "capture"). Parsing checks every field and names the op and
// field of the first one that is wrong.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backends/capture/captured_op.hpp"

namespace neuralcost::capture {

/// Parses an array of op objects {"op", "in", "out", "attrs", "event"}. Throws Error (kDataLoss) naming
/// `source`, the op's index and name, and the field.
std::vector<CapturedOp> captured_ops_from_json(const nlohmann::json& ops, const std::string& source);

}  // namespace neuralcost::capture
