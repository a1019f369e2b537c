// Error type of the library. Library code throws neuralcost::Error; the CLI catches it at its
// boundary and prints "error: <message>" with a non-zero exit. Messages name the file, op and
// field at fault, e.g. "op 'conv1': attribute 'stride' must have 2 values, got 3".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace neuralcost {

/// The most specific kind of failure (modelled on abseil's status codes).
enum class ErrorCode {
  kInvalidArgument,    ///< input that can never be valid (batch 0, malformed shape, bad JSON field)
  kNotFound,           ///< a named thing does not exist (hardware id, model name, file)
  kOutOfRange,         ///< a count that does not fit (a FLOP count that would overflow 64 bits)
  kUnimplemented,      ///< valid input this version cannot handle
  kDataLoss,           ///< a file that exists but cannot be read or parsed
  kInternal,           ///< an invariant of ours broke (a bug, or a framework that behaved unexpectedly)
  kResourceExhausted,  ///< out of memory (a worker's MemoryError, or killed by the OOM killer)
  kDeadlineExceeded,   ///< a worker did not answer in time
  kCancelled,          ///< the user interrupted it (SIGINT, SIGTERM)
};

std::string_view to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace neuralcost
