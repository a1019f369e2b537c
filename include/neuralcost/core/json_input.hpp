// Reading the JSON files users write for the tool (a routing histogram, a link spec): the whole
// file as text, and a parse that refuses a key given twice in one object, which nlohmann (like
// Python's json) would otherwise settle silently by keeping the last value.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace neuralcost {

/// The whole of file `path` as text. kNotFound when it cannot be opened, kInvalidArgument when it
/// is a directory or cannot be read; each message starts with `what` (e.g. "--routing FILE").
std::string read_input_file(const std::string& path, const std::string& what);

/// `text` parsed as JSON, or a discarded value (is_discarded()) when it is not JSON. `repeated`
/// receives the first key an object gives twice ("layers.5"; empty when none); the value is then
/// still returned, and the caller refuses it.
nlohmann::json parse_json_keys_once(const std::string& text, std::string& repeated);

}  // namespace neuralcost
