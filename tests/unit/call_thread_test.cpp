// CallThread (core/call_thread.hpp): a call's result and exception come back; a call past its
// deadline fails at the deadline and the thread refuses every later call. The hung call here
// waits on a promise the test keeps, and is released at the end so that no thread outlives it.
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "neuralcost/core/call_thread.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CallThreadTest, RunsTheCallOnItsThreadAndRethrowsWhatItThrew) {
  CallThread thread("test");
  std::thread::id ran_on;
  int value = 0;
  thread.run(
      [&] {
        ran_on = std::this_thread::get_id();
        value = 42;
      },
      std::chrono::seconds(5), "a call");
  EXPECT_EQ(value, 42);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  try {
    thread.run([] { throw Error(ErrorCode::kInvalidArgument, "bad shape"); }, std::chrono::seconds(5), "a call");
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "bad shape");
  }
  // the same thread again: thread-local state (a framework's thread pool) persists between calls
  std::thread::id again;
  thread.run([&] { again = std::this_thread::get_id(); }, std::chrono::seconds(5), "a call");
  EXPECT_EQ(again, ran_on);
  EXPECT_FALSE(thread.abandoned());
}

TEST(CallThreadTest, ACallPastItsDeadlineFailsThenAndLaterCallsAreRefusedAtOnce) {
  const int before = abandoned_calls();
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  {
    CallThread thread("libtorch");
    const auto start = Clock::now();
    try {
      thread.run([released] { released.wait(); }, std::chrono::milliseconds(300), "a forward pass of hang.pt");
      ADD_FAILURE() << "the call was waited for";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
      EXPECT_NE(std::string(e.what()).find("libtorch: a forward pass of hang.pt did not return within 0.3 s"),
                std::string::npos)
          << e.what();
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(waited, 0.3);
    EXPECT_LT(waited, 5.0);  // the deadline, not the call, ended the wait
    EXPECT_TRUE(thread.abandoned());
    EXPECT_EQ(abandoned_calls(), before + 1);
    bool ran = false;
    try {
      thread.run([&] { ran = true; }, std::chrono::seconds(5), "another pass");
      ADD_FAILURE() << "an abandoned thread took a call";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
      EXPECT_NE(std::string(e.what()).find("an earlier call (a forward pass of hang.pt) did not return"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(ran);
  }                      // destroyed while its call still runs: the thread is left, with the state it shares
  release->set_value();  // the call returns; the detached thread sees it was stopped and ends
}

}  // namespace
}  // namespace neuralcost
