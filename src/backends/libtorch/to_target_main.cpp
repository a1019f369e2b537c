// neuralcost-libtorch-to-target: the LibTorch engine of `neural-cost train-to-target`, started
// once a run (src/measure/to_target.cpp) beside the LibTorch plugin. The torch worker's line
// protocol: one JSON request a line on stdin, one JSON reply a line on stdout ({"ok": false,
// "kind", "error"} when a request fails; the process stays usable); "quit" ends it.
#include <iostream>
#include <string>

#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "backends/libtorch/to_target_engine.hpp"
#include "neuralcost/core/error.hpp"

namespace {

using json = nlohmann::json;

json failure(const std::string& kind, const std::string& error) {
  return {{"ok", false}, {"kind", kind}, {"error", error}};
}

json serve(const json& req) {
  const std::string cmd = req.is_object() ? req.value("cmd", "") : "";
  if (cmd == "hello") return {{"ok", true}, {"torch", std::string("LibTorch ") + TORCH_VERSION}};
  if (cmd == "run") return neuralcost::libtorch::run_to_target(req);
  return failure("invalid_argument", "unknown cmd '" + cmd + "' (known: hello, run, quit)");
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    json reply;
    try {
      const json req = json::parse(line);
      if (req.is_object() && req.value("cmd", "") == "quit") {
        std::cout << json{{"ok", true}}.dump() << std::endl;
        return 0;
      }
      reply = serve(req);
    } catch (const json::exception& e) {
      reply = failure("invalid_argument", std::string("a request's JSON: ") + e.what());
    } catch (const neuralcost::Error& e) {
      reply = failure(e.code() == neuralcost::ErrorCode::kInvalidArgument ? "invalid_argument" : "internal", e.what());
    } catch (const std::exception& e) {
      reply = failure("internal", e.what());
    }
    std::cout << reply.dump() << std::endl;
  }
  return 0;
}
