// CallThread (call_thread.hpp): one thread, one call at a time, a deadline on each.
#include "neuralcost/core/call_thread.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"

namespace neuralcost {
namespace {
std::atomic<int> g_abandoned{0};
constexpr auto kSlice = std::chrono::milliseconds(50);  // how often a wait looks for a signal
constexpr auto kSignalGrace = std::chrono::seconds(1);  // a call's time to end after Ctrl-C
}  // namespace

struct CallThread::State {
  std::mutex mutex;
  std::condition_variable wake, done_cv;
  std::function<void()> task;  // the call in progress (it owns or shares what it touches)
  bool has_task = false, done = false, stop = false, abandoned = false;
  std::exception_ptr error;
  std::string hung;  // the call that outlived its deadline
};

CallThread::CallThread(std::string label) : label_(std::move(label)), state_(std::make_shared<State>()) {
  // the thread shares the state: an abandoned thread keeps it alive after this object is gone
  thread_ = std::thread([s = state_] {
    std::unique_lock lock(s->mutex);
    while (true) {
      s->wake.wait(lock, [&] { return s->has_task || s->stop; });
      if (s->stop) return;
      std::function<void()> task = std::move(s->task);
      s->has_task = false;
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      task = nullptr;  // what the call captured is released on this thread, before the caller goes on
      lock.lock();
      s->error = error;
      s->done = true;
      s->done_cv.notify_all();
    }
  });
}

CallThread::~CallThread() {
  bool abandoned;
  {
    std::lock_guard lock(state_->mutex);
    abandoned = state_->abandoned;
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (abandoned) {
    thread_.detach();  // still in its call; the state it shares stays alive with it
  } else {
    thread_.join();
  }
}

void CallThread::run(const std::function<void()>& call, std::chrono::duration<double> timeout,
                     const std::string& doing) {
  std::unique_lock lock(state_->mutex);
  if (state_->abandoned) {
    throw Error(ErrorCode::kDeadlineExceeded,
                fmt::format("{}: not run: an earlier call ({}) did not return and still runs in this process; run "
                            "this model in a command of its own",
                            label_, state_->hung));
  }
  state_->task = call;
  state_->has_task = true;
  state_->done = false;
  state_->error = nullptr;
  state_->wake.notify_all();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  std::optional<std::chrono::steady_clock::time_point> signalled;
  while (!state_->done) {
    state_->done_cv.wait_for(lock, kSlice);
    if (state_->done) break;
    const auto now = std::chrono::steady_clock::now();
    if (interrupted() && !signalled) signalled = now;
    const bool by_signal = signalled && now - *signalled >= kSignalGrace;
    if (now >= deadline || by_signal) {
      state_->abandoned = true;
      state_->hung = doing;
      ++g_abandoned;
      if (by_signal) throw Interrupted(fmt::format("{} was still running and is left behind", doing));
      throw Error(ErrorCode::kDeadlineExceeded,
                  fmt::format("{}: {} did not return within {:.3g} s (--worker-timeout); it is left running in this "
                              "process, and the remaining {} runs of this command are refused",
                              label_, doing, timeout.count(), label_));
    }
  }
  if (std::exception_ptr error = std::exchange(state_->error, nullptr)) std::rethrow_exception(error);
}

bool CallThread::abandoned() const {
  std::lock_guard lock(state_->mutex);
  return state_->abandoned;
}

int abandoned_calls() { return g_abandoned.load(); }

int end_process(int code) {
  if (abandoned_calls() == 0) return code;
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace neuralcost
