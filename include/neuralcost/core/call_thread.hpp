// A thread that runs an in-process backend's calls one at a time, each with a deadline. LibTorch
// runs in this process: a TorchScript forward that loops forever would hang the command with no
// timeout at all. On its CallThread, the call that outlives its deadline ends its run with an
// error instead, and the rest of the command goes on. The call itself cannot be stopped (C++
// has no safe way to end a thread): its thread is abandoned, still running, every later call
// on it fails at once, and the process must end with std::_Exit (end_process) rather than run
// static destructors under that thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace neuralcost {

class CallThread {
 public:
  /// `label` names the thread's owner in messages ("libtorch").
  explicit CallThread(std::string label);
  /// Stops and joins the thread; an abandoned one is left running (its state is never freed).
  ~CallThread();
  CallThread(const CallThread&) = delete;
  CallThread& operator=(const CallThread&) = delete;

  /// Runs `call` on the thread and waits for it at most `timeout`; rethrows what it threw.
  /// Past the deadline: throws Error(kDeadlineExceeded) "libtorch: DOING did not return within
  /// N s (--worker-timeout); it is left running in this process ...", and abandons the thread.
  /// A signal (interrupted()) ends the wait after a grace of a second with Interrupted. On an
  /// abandoned thread, throws kDeadlineExceeded at once naming the call that hung.
  void run(const std::function<void()>& call, std::chrono::duration<double> timeout, const std::string& doing);

  /// True once a call outlived its deadline (or a signal's grace).
  bool abandoned() const;

 private:
  struct State;
  std::string label_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

/// The calls abandoned so far in this process (by any CallThread).
int abandoned_calls();

/// Ends the process with `code`: with std::_Exit after flushing stdout and stderr when a call was
/// abandoned (a thread still runs framework code that static destructors would pull from under
/// it), else returns `code` for main to return.
int end_process(int code);

}  // namespace neuralcost
