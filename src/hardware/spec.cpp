// Roof lookups on a hardware spec.
#include "neuralcost/hardware/spec.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

double HardwareSpec::flops_per_second(DType dtype, bool contraction) const {
  if (!contraction) {
    auto v = vector_flops_per_second.find(dtype);
    if (v != vector_flops_per_second.end()) return v->second;
  }
  auto it = peak_flops_per_second.find(dtype);
  if (it == peak_flops_per_second.end()) {
    std::string have;
    for (const auto& [d, value] : peak_flops_per_second) {
      have += (have.empty() ? "" : ", ") + std::string(dtype_name(d));
    }
    throw Error(ErrorCode::kNotFound,
                fmt::format("hardware '{}' has no {} peak (it gives: {})", id, dtype_name(dtype), have));
  }
  return it->second;
}

double HardwareSpec::ridge_point(DType dtype) const {
  return flops_per_second(dtype, true) / memory_bandwidth_bytes_per_second;
}

double HardwareSpec::bandwidth_for(double bytes, std::string* level) const {
  for (const CacheLevel& c : caches) {
    if (c.bandwidth_bytes_per_second && *c.bandwidth_bytes_per_second > memory_bandwidth_bytes_per_second &&
        bytes <= c.size_bytes) {
      if (level) *level = c.name;
      return *c.bandwidth_bytes_per_second;
    }
  }
  if (level) *level = "DRAM";
  return memory_bandwidth_bytes_per_second;
}

double HardwareSpec::memory_seconds(double bytes, double state_bytes, double resident_bytes, std::string* level) const {
  std::string from, state_from;
  const double bw = bandwidth_for(bytes, &from);
  // the state stays between passes only in a level that holds all of it (and this op's bytes)
  const double state_bw = bandwidth_for(std::max(bytes, resident_bytes), &state_from);
  const double state = std::min(std::max(state_bytes, 0.0), bytes);
  if (level) *level = 2 * state > bytes ? state_from : from;
  return state / state_bw + (bytes - state) / bw;
}

}  // namespace neuralcost
