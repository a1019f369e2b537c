// Names of error codes, for messages and tests.
#include "neuralcost/core/error.hpp"

namespace neuralcost {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kUnimplemented: return "unimplemented";
    case ErrorCode::kDataLoss: return "data loss";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kDeadlineExceeded: return "deadline exceeded";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace neuralcost
