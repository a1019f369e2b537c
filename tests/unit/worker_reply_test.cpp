// Decoding a worker's reply line (backends/python_worker/worker_reply.hpp): replies, the worker's
// own errors, and lines that are not replies, each one error naming the worker and the request.
#include <gtest/gtest.h>

#include "backends/python_worker/worker_reply.hpp"

namespace neuralcost::worker {
namespace {

WorkerFailure failure_of(const std::string& line) {
  try {
    decode_reply(line, "the jax worker", "capture");
  } catch (const WorkerFailure& e) {
    return e;
  }
  ADD_FAILURE() << "decoded: " << line;
  return WorkerFailure(WorkerFailure::Cause::kStart, ErrorCode::kInternal, "");
}

TEST(WorkerReplyTest, AReplyIsAnObjectWithABooleanOk) {
  const auto reply = decode_reply(R"({"ok":true,"ops":[]})", "the jax worker", "capture");
  EXPECT_TRUE(reply["ops"].is_array());
  for (const char* line : {"", "not json", "[1,2]", R"({"ops":[]})", R"({"ok":"yes"})", "{\"ok\":tru"}) {
    const WorkerFailure e = failure_of(line);
    EXPECT_EQ(e.cause(), WorkerFailure::Cause::kGarbage) << line;
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss) << line;
    EXPECT_EQ(std::string(e.what()), "the jax worker answered 'capture' with a line that is not a protocol reply: '" +
                                         std::string(line) + "'");
  }
  // a long line is quoted by its first 200 bytes
  EXPECT_EQ(std::string(failure_of(std::string(5000, 'x')).what()).size(),
            std::string("the jax worker answered 'capture' with a line that is not a protocol reply: ''").size() + 200);
}

TEST(WorkerReplyTest, AFailedReplyCarriesTheWorkersMessageAndKind) {
  WorkerFailure e = failure_of(R"({"ok":false,"error":"no model 'fff'","kind":"not_found"})");
  EXPECT_EQ(e.cause(), WorkerFailure::Cause::kReply);
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_STREQ(e.what(), "the jax worker: no model 'fff'");
  e = failure_of(R"({"ok":false,"error":"RESOURCE_EXHAUSTED","kind":"out_of_memory"})");
  EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  EXPECT_STREQ(e.what(), "the jax worker: RESOURCE_EXHAUSTED (out of memory)");
  // fields of the wrong type are the worker's bug, never an exception of the JSON library
  e = failure_of(R"({"ok":false,"error":42,"kind":["not_found"]})");
  EXPECT_EQ(e.code(), ErrorCode::kInternal);
  EXPECT_STREQ(e.what(), "the jax worker: failed without a message");
  e = failure_of(R"({"ok":false})");
  EXPECT_STREQ(e.what(), "the jax worker: failed without a message");
}

}  // namespace
}  // namespace neuralcost::worker
