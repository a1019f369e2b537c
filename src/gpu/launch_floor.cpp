// The launch floor (see launch_floor.hpp).
#include "neuralcost/gpu/launch_floor.hpp"

#include <algorithm>

#include "neuralcost/cost/op_kinds.hpp"

namespace neuralcost {

std::optional<LaunchFloor> launch_floor(const Analysis& a) {
  if (!a.hardware.kernel_launch_seconds) return std::nullopt;
  LaunchFloor f;
  f.seconds_per_kernel = *a.hardware.kernel_launch_seconds;
  const auto source = a.hardware.sources.find("kernel_launch_seconds");
  f.source = source == a.hardware.sources.end() ? "not stated" : source->second;
  std::vector<bool> launches(a.graph.ops().size(), false);
  for (const OpRoofline& r : a.ops) {
    const bool kernel = !is_view(a.graph.op(r.op_index));
    if (r.op_index < launches.size()) launches[r.op_index] = kernel;
    const double bound = kernel ? std::max(r.lower_bound_seconds, f.seconds_per_kernel) : r.lower_bound_seconds;
    if (kernel) ++f.unfused_kernels;
    if (kernel && r.lower_bound_seconds < f.seconds_per_kernel) ++f.ops_below_floor;
    f.op_bound_seconds.push_back(bound);
    f.unfused_bound_seconds += bound;
  }
  for (const FusionGroup& g : a.fusion_groups) {
    const bool kernel =
        std::any_of(g.ops.begin(), g.ops.end(), [&](std::size_t i) { return i < launches.size() && launches[i]; });
    if (kernel) ++f.fused_kernels;
    f.fused_bound_seconds += kernel ? std::max(g.lower_bound_seconds, f.seconds_per_kernel) : g.lower_bound_seconds;
  }
  f.unfused_floor_seconds = f.unfused_kernels * f.seconds_per_kernel;
  f.fused_floor_seconds = f.fused_kernels * f.seconds_per_kernel;
  return f;
}

}  // namespace neuralcost
