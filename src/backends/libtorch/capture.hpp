// Recording what LibTorch executes: a RecordFunction observer that keeps the top-level ATen
// calls of one forward pass with their arguments, and the legacy profiler for per-op times.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "backends/capture/captured_op.hpp"
#include "neuralcost/backend.hpp"

namespace neuralcost::libtorch {

using capture::CapturedOp;
using capture::CapturedTensor;
using capture::CapturedValue;

/// Parameter names by data pointer, so captured weights carry their module names.
using ParameterNames = std::unordered_map<const void*, std::string>;

/// Runs `forward` once and returns its top-level ATen calls. `inputs` are the model inputs
/// (named input0, input1, ...); tensors that are neither inputs nor produced by a call are
/// parameters (weights, frozen constants), named from `names` when known.
std::vector<CapturedOp> capture_calls(const std::function<void()>& forward, const std::vector<at::Tensor>& inputs,
                                      const ParameterNames& names);

/// Runs `forward` once untimed (to learn which top-level operators call several others), then
/// `runs` times, each after a plain pass, with a RecordFunction observer that only timestamps the
/// entry and exit of top-level operators (names from the first timed pass; no shapes, no
/// allocations after it) and switches RecordFunction off inside those that call several ops, so
/// that nested calls cost no callback. Same result layout as profile_calls().
LayerTiming time_calls(const std::function<void()>& forward, int runs);

/// Runs `forward` `runs` times under the legacy autograd profiler and returns the duration of
/// every top-level call and of each whole pass. `op_names` are the names capture_calls()
/// reported: profiler ranges with other names (TorchScript "forward", ...) are not ops.
LayerTiming profile_calls(const std::function<void()>& forward, int runs, const std::set<std::string>& op_names);

}  // namespace neuralcost::libtorch
