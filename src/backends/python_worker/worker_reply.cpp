// Decoding a worker's reply line (see worker_reply.hpp).
#include "backends/python_worker/worker_reply.hpp"

#include <fmt/format.h>

namespace neuralcost::worker {

nlohmann::json decode_reply(const std::string& line, const std::string& label, const std::string& cmd) {
  nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean()) {
    throw WorkerFailure(WorkerFailure::Cause::kGarbage, ErrorCode::kDataLoss,
                        fmt::format("{} answered '{}' with a line that is not a protocol reply: '{}'", label, cmd,
                                    line.substr(0, 200)));
  }
  if (reply["ok"].get<bool>()) return reply;
  const auto text = [&](const char* key, const char* fallback) {
    const auto it = reply.find(key);
    return it != reply.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
  };
  const std::string kind = text("kind", "internal");
  const ErrorCode code = kind == "invalid_argument" ? ErrorCode::kInvalidArgument
                         : kind == "not_found"      ? ErrorCode::kNotFound
                         : kind == "unimplemented"  ? ErrorCode::kUnimplemented
                         : kind == "out_of_memory"  ? ErrorCode::kResourceExhausted
                                                    : ErrorCode::kInternal;
  throw WorkerFailure(WorkerFailure::Cause::kReply, code,
                      fmt::format("{}: {}{}", label, text("error", "failed without a message"),
                                  kind == "out_of_memory" ? " (out of memory)" : ""));
}

}  // namespace neuralcost::worker
