// JSON files users write (include/neuralcost/core/json_input.hpp).
#include "neuralcost/core/json_input.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

std::string read_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: is a directory, not a file", what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, fmt::format("{}: cannot be read", what));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: cannot be read", what));
  return text.str();
}

nlohmann::json parse_json_keys_once(const std::string& text, std::string& repeated) {
  using json = nlohmann::json;
  repeated.clear();
  // one entry per open object: its keys so far and the key it is the value of (for the path)
  struct Open {
    std::set<std::string> keys;
    std::string path;
  };
  std::vector<Open> open;
  std::string last_key;  // the key whose value comes next
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.push_back({{},
                        open.empty()               ? std::string()
                        : open.back().path.empty() ? last_key
                                                   : open.back().path + "." + last_key});
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!open.empty() && !open.back().keys.insert(last_key).second && repeated.empty()) {
          repeated = open.back().path.empty() ? last_key : open.back().path + "." + last_key;
        }
        break;
      default: break;
    }
    return true;
  };
  return json::parse(text, check, false);
}

}  // namespace neuralcost
