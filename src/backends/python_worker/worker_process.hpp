// A worker process: a child that speaks JSON lines on its stdin and stdout
// (docs/worker-protocol.md). Every request has a deadline; a worker that exits, is killed, hangs
// past its deadline or answers with something that is not a JSON reply raises WorkerFailure
// saying which, with the last lines it wrote to stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/python_worker/worker_reply.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::worker {

class WorkerProcess {
 public:
  /// Starts `argv` (argv[0] a path) with `env` added to this process's environment.
  /// Throws WorkerFailure (kStart) when it cannot be started.
  WorkerProcess(std::vector<std::string> argv, std::map<std::string, std::string> env, std::string label);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// Sends one request and waits at most `timeout` for its reply. Returns the reply when its
  /// "ok" is true; throws WorkerFailure otherwise (the worker's error, or what happened to it).
  nlohmann::json request(const nlohmann::json& req, std::chrono::duration<double> timeout);

  /// Asks the worker to quit, then makes sure it is gone (SIGKILL after a grace period).
  void stop();
  /// Stops the worker's process group (SIGSTOP) until resume() (SIGCONT) or the next request:
  /// a stopped worker's threads take no CPU while other workers are measured.
  void pause();
  void resume();

  /// Whether the worker can still be asked: started, not exited, not killed.
  bool usable() const { return pid_ > 0 && !reaped_ && in_ >= 0; }
  /// Kills the worker's process group now (after a failure that leaves its replies out of step).
  void kill();

  /// The last lines the worker wrote to stderr.
  std::string stderr_tail() const;
  pid_t pid() const { return pid_; }

 private:
  [[noreturn]] void fail_process(const std::string& doing);
  void drain_stderr();
  bool reap(bool block);

  std::string label_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buffer_, err_partial_;
  std::deque<std::string> err_lines_;
  int exit_status_ = -1;  ///< waitpid status once reaped
  bool reaped_ = false;
  bool paused_ = false;
};

}  // namespace neuralcost::worker
