// The cheapest way to serve a decoder at a target latency per output token (issue 25): every
// built-in system (its device, its node's devices and link) at every tensor-parallel degree the
// model's heads allow, the decode step's lower bound there (tensor_parallel_step), whether the
// weights and the batch's KV cache fit each device's memory (serving_capacity), and what a
// million output tokens cost at the user's price per device-hour. The bound is a lower bound, so
// an option that misses the target misses it for certain; one that meets it may still miss when
// measured (the output says so).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

struct ServingOption {
  std::string system;  ///< a built-in system id
  std::string device;  ///< its hardware id
  int tp = 1;
  bool fits = false;             ///< weights and `batch` sequences' KV cache fit each device
  double seconds_per_token = 0;  ///< the decode step's bound: each sequence's time per output token
  std::optional<double> price_per_device_hour;
  std::optional<double> cost_per_million_tokens;  ///< price · tp · step / batch, per 10^6 tokens
  bool meets_target = false;                      ///< fits and seconds_per_token <= the target
};

struct ServingChoice {
  std::vector<ServingOption> options;         ///< the cheapest first among those meeting the target, then the rest
  std::optional<std::size_t> cheapest;        ///< the index of the cheapest priced option that meets the target
  std::vector<std::string> unpriced_devices;  ///< devices of options that meet the target without a price
};

/// The options of decoding `request` (phase decode: its batch, context and dtype) under a target
/// of `target_seconds` per output token, each device keeping `reserve` of its memory free, priced by
/// `price_of(hardware id)` (per device-hour; empty: no price). kInvalidArgument for a target that is
/// not positive or a request that is not a decode step.
ServingChoice choose_serving(const DecoderConfig& config, const DecoderRequest& request, double target_seconds,
                             double reserve, const std::function<std::optional<double>(const std::string&)>& price_of,
                             const std::string& name);

}  // namespace neuralcost
