// The cheapest system and tensor-parallel degree that decode at a target latency (see
// parallel/serving_choice.hpp).
#include "neuralcost/parallel/serving_choice.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/interconnect.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"

namespace neuralcost {

ServingChoice choose_serving(const DecoderConfig& config, const DecoderRequest& request, double target_seconds,
                             double reserve, const std::function<std::optional<double>(const std::string&)>& price_of,
                             const std::string& name) {
  if (!(target_seconds > 0) || !std::isfinite(target_seconds)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a target of {} s per output token must be a positive number", target_seconds));
  }
  if (request.phase != DecoderPhase::kDecode || request.tokens != 1) {
    throw Error(ErrorCode::kInvalidArgument, "a serving choice is of decode steps (one token per sequence)");
  }
  ServingChoice out;
  const HardwareDatabase& db = HardwareDatabase::builtin();
  for (const SystemSpec& system : builtin_systems()) {
    const HardwareSpec& hardware = db.get(system.device);
    const InterconnectSpec link = find_interconnect(system.intra_node);
    const std::optional<double> price = price_of(hardware.id);
    for (int tp : tensor_parallel_degrees(config, system.devices_per_node)) {
      ServingOption o;
      o.system = system.id;
      o.device = hardware.id;
      o.tp = tp;
      o.price_per_device_hour = price;
      if (hardware.memory_capacity_bytes) {
        const auto capacity = static_cast<std::uint64_t>(*hardware.memory_capacity_bytes);
        o.fits = serving_capacity(config, request.dtype, request.context + 1, tp, capacity, reserve).sequences >=
                 static_cast<std::uint64_t>(request.batch);
      }
      o.seconds_per_token =
          tensor_parallel_step(config, request, tp, hardware, link, system.devices_per_node, name).step_seconds;
      o.meets_target = o.fits && o.seconds_per_token <= target_seconds;
      if (price) {
        o.cost_per_million_tokens =
            *price * tp * o.seconds_per_token / 3600.0 / static_cast<double>(request.batch) * 1e6;
      }
      out.options.push_back(std::move(o));
    }
  }
  // those meeting the target first, the priced ones by cost, then by time per token
  std::stable_sort(out.options.begin(), out.options.end(), [](const ServingOption& a, const ServingOption& b) {
    if (a.meets_target != b.meets_target) return a.meets_target;
    const bool ap = a.cost_per_million_tokens.has_value(), bp = b.cost_per_million_tokens.has_value();
    if (ap != bp) return ap;
    if (ap && *a.cost_per_million_tokens != *b.cost_per_million_tokens)
      return *a.cost_per_million_tokens < *b.cost_per_million_tokens;
    return a.seconds_per_token < b.seconds_per_token;
  });
  std::set<std::string> unpriced;
  for (std::size_t i = 0; i < out.options.size(); ++i) {
    const ServingOption& o = out.options[i];
    if (!o.meets_target) continue;
    if (o.cost_per_million_tokens && !out.cheapest) out.cheapest = i;
    if (!o.price_per_device_hour) unpriced.insert(o.device);
  }
  out.unpriced_devices.assign(unpriced.begin(), unpriced.end());
  return out;
}

}  // namespace neuralcost
