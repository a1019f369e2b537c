// The launch floor of a GPU roofline. On a GPU every kernel costs at least its launch overhead,
// however little it computes or moves: a 26-kernel transformer whose roofline bound is 1.75 µs on
// an H100 cannot run in 1.75 µs. The floor is its own term beside the roofline: per op (one
// kernel per op that is not a view), per fusion group (one kernel per group), and in the totals,
// so that a view shows which bound the floor lifts. The per-kernel figure is the spec's
// `kernel_launch_seconds`: a documented typical value in data/hardware/*.json, or measured by
// `hardware calibrate --device cuda:N`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"

namespace neuralcost {

struct LaunchFloor {
  double seconds_per_kernel = 0;
  std::string source;                ///< the spec's source for kernel_launch_seconds
  int unfused_kernels = 0;           ///< ops that launch a kernel (views launch none)
  int fused_kernels = 0;             ///< fusion groups with at least one such op
  double unfused_floor_seconds = 0;  ///< unfused_kernels x seconds_per_kernel
  double fused_floor_seconds = 0;    ///< fused_kernels x seconds_per_kernel
  /// Per op of Analysis::ops: max(lower bound, floor) for an op with a kernel, else its bound.
  std::vector<double> op_bound_seconds;
  double unfused_bound_seconds = 0;  ///< sum of op_bound_seconds
  double fused_bound_seconds = 0;    ///< sum over fusion groups of max(group bound, floor)
  int ops_below_floor = 0;           ///< ops whose roofline bound is under the floor
};

/// The launch floor of `analysis` on its hardware; empty when the spec has no
/// kernel_launch_seconds (CPUs, and GPUs of a user file that gives none).
std::optional<LaunchFloor> launch_floor(const Analysis& analysis);

}  // namespace neuralcost
