// A worker's reply line decoded (docs/worker-protocol.md): the one place where bytes a worker
// wrote on stdout become a reply or a WorkerFailure. Apart from the process handling, so that
// the fuzz target tests/fuzz/worker_reply_fuzz.cpp feeds it any bytes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"

namespace neuralcost::worker {

/// Why a request failed: the worker's own error reply, or the process itself.
class WorkerFailure : public Error {
 public:
  enum class Cause { kReply, kExited, kKilled, kTimeout, kGarbage, kStart };
  WorkerFailure(Cause cause, ErrorCode code, std::string message) : Error(code, std::move(message)), cause_(cause) {}
  Cause cause() const { return cause_; }

 private:
  Cause cause_;
};

/// The reply on `line` (without its newline) from worker `label` to request `cmd`, when its
/// "ok" is true. Throws WorkerFailure: kGarbage (kDataLoss) when the line is not a JSON object
/// with a boolean "ok" (its first 200 bytes quoted), kReply with the worker's "error" and the
/// code its "kind" names otherwise.
nlohmann::json decode_reply(const std::string& line, const std::string& label, const std::string& cmd);

}  // namespace neuralcost::worker
