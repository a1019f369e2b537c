// Reading a config.json's fields with one clear error each (decoder_config.cpp), shared by the
// architectures' readers. Private to src/models.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost::detail {

/// kInvalidArgument: "WHERE: WHAT".
Error bad(const std::string& where, const std::string& what);
/// A positive integer below 2^31; `fallback` when absent or null (an error without one).
std::int64_t size_field(const nlohmann::json& c, const std::string& where, const std::string& field,
                        std::optional<std::int64_t> fallback);
/// true or false; `fallback` when absent or null.
bool flag_field(const nlohmann::json& c, const std::string& where, const std::string& field, bool fallback);
/// The weights' storage from the config's quantization_config; nullopt without one.
std::optional<WeightQuantization> quantization_of(const nlohmann::json& c, const std::string& where);

/// deepseek_v3 and deepseek_v2 (deepseek_config.cpp).
DecoderConfig parse_deepseek_v3(const nlohmann::json& c, const std::string& where);
DecoderConfig parse_deepseek_v2(const nlohmann::json& c, const std::string& where);

}  // namespace neuralcost::detail
