// The child process and its pipes (see worker_process.hpp).
#include "backends/python_worker/worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "neuralcost/core/interrupt.hpp"

extern char** environ;

namespace neuralcost::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kStderrLines = 20;
constexpr std::size_t kMaxLine = std::size_t{1} << 30;  // a capture of a big model is tens of MB

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string what = fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
    if (sig == SIGKILL) what += ": the kernel's out-of-memory killer does this when memory runs out";
    return what;
  }
  return "stopped";
}

}  // namespace

WorkerProcess::WorkerProcess(std::vector<std::string> argv, std::map<std::string, std::string> env, std::string label)
    : label_(std::move(label)) {
  if (argv.empty())
    throw WorkerFailure(WorkerFailure::Cause::kStart, ErrorCode::kInvalidArgument, "empty worker command");
  if (::access(argv[0].c_str(), X_OK) != 0) {
    throw WorkerFailure(WorkerFailure::Cause::kStart, ErrorCode::kNotFound,
                        fmt::format("{}: cannot run '{}': {}", label_, argv[0], std::strerror(errno)));
  }
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw WorkerFailure(WorkerFailure::Cause::kStart, ErrorCode::kInternal,
                        fmt::format("{}: pipe: {}", label_, std::strerror(errno)));
  }
  // everything the child needs is built before fork: after it, only async-signal-safe calls
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string s(*e);
    if (!env.count(s.substr(0, s.find('=')))) env_strings.push_back(s);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (std::string& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) {
    throw WorkerFailure(WorkerFailure::Cause::kStart, ErrorCode::kInternal,
                        fmt::format("{}: fork: {}", label_, std::strerror(errno)));
  }
  if (pid_ == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::setpgid(0, 0);  // its own process group: a timeout kills the worker and its children
    ::execve(args[0], args.data(), envp.data());
    const char msg[] = "neural-cost: exec of the worker failed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  watch_process_group(pid_);  // Ctrl-C kills its whole group (core/interrupt.hpp)
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  ::fcntl(out_, F_SETFL, O_NONBLOCK);
  ::fcntl(err_, F_SETFL, O_NONBLOCK);
  // a worker that dies makes writes fail with EPIPE, not kill this process
  ::signal(SIGPIPE, SIG_IGN);
}

WorkerProcess::~WorkerProcess() { stop(); }

void WorkerProcess::drain_stderr() {
  char buf[65536];
  while (err_ >= 0) {
    const ssize_t n = ::read(err_, buf, sizeof buf);
    if (n <= 0) {
      if (n == 0) close_fd(err_);
      return;
    }
    err_partial_.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = err_partial_.find('\n')) != std::string::npos) {
      if (nl > 0) err_lines_.push_back(err_partial_.substr(0, std::min<std::size_t>(nl, 500)));
      err_partial_.erase(0, nl + 1);
      if (err_lines_.size() > kStderrLines) err_lines_.pop_front();
    }
    if (err_partial_.size() > 4096) err_partial_.erase(0, err_partial_.size() - 4096);
  }
}

std::string WorkerProcess::stderr_tail() const {
  std::string s;
  for (const std::string& l : err_lines_) s += "\n  | " + l;
  if (!err_partial_.empty()) s += "\n  | " + err_partial_.substr(0, 500);
  return s;
}

bool WorkerProcess::reap(bool block) {
  if (reaped_ || pid_ <= 0) return reaped_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_status_ = status;
    unwatch_process_group(pid_);
  }
  return reaped_;
}

void WorkerProcess::fail_process(const std::string& doing) {
  if (interrupted()) {  // the signal handler killed it
    ::kill(-pid_, SIGKILL);
    reap(true);
    throw Interrupted();
  }
  // the worker is gone (or its stdout closed): wait for its status and last words; a Python
  // that is exiting may take seconds to tear a framework down on a loaded machine
  constexpr int kExitWaitMs = 5000;
  for (int waited = 0; waited < kExitWaitMs && !reap(false); waited += 10) {
    drain_stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drain_stderr();
  const std::string last_words = err_lines_.empty() && err_partial_.empty() ? "" : "; its last output:" + stderr_tail();
  if (!reaped_) {
    // our kill, not the kernel's: do not blame memory for it
    ::kill(-pid_, SIGKILL);
    reap(true);
    throw WorkerFailure(WorkerFailure::Cause::kExited, ErrorCode::kInternal,
                        fmt::format("{} closed its output while {} and had not exited {} s later, so it was killed{}",
                                    label_, doing, kExitWaitMs / 1000, last_words));
  }
  const bool killed = WIFSIGNALED(exit_status_);
  throw WorkerFailure(
      killed ? WorkerFailure::Cause::kKilled : WorkerFailure::Cause::kExited,
      killed && WTERMSIG(exit_status_) == SIGKILL ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
      fmt::format("{} {} while {}{}", label_, describe_status(exit_status_), doing, last_words));
}

nlohmann::json WorkerProcess::request(const nlohmann::json& req, std::chrono::duration<double> timeout) {
  const std::string cmd = req.value("cmd", std::string("?"));
  const std::string doing = fmt::format("answering '{}'", cmd);
  resume();  // a paused worker answers nothing
  if (reaped_ || in_ < 0) fail_process(doing);
  const std::string line = req.dump() + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::write(in_, line.data() + sent, line.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_process(doing);
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  std::size_t nl;
  char buf[65536];
  std::size_t scanned = 0;  // only new bytes are searched: a long line costs linear time
  while ((nl = out_buffer_.find('\n', scanned)) == std::string::npos) {
    scanned = out_buffer_.size();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(-pid_, SIGKILL);
      reap(true);
      drain_stderr();
      throw WorkerFailure(
          WorkerFailure::Cause::kTimeout, ErrorCode::kDeadlineExceeded,
          fmt::format("{} did not answer '{}' within {:.0f} s (--worker-timeout); it was killed{}", label_, cmd,
                      timeout.count(), err_lines_.empty() ? "" : "; its last output:" + stderr_tail()));
    }
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    const int ready = ::poll(fds, err_ >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (interrupted()) fail_process(doing);
    if (ready < 0 && errno != EINTR) fail_process(doing);
    if (err_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) drain_stderr();
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) fail_process(doing);
      if (n > 0) out_buffer_.append(buf, static_cast<std::size_t>(n));
      if (out_buffer_.size() > kMaxLine) {
        ::kill(-pid_, SIGKILL);
        reap(true);
        throw WorkerFailure(WorkerFailure::Cause::kGarbage, ErrorCode::kDataLoss,
                            fmt::format("{} wrote a reply line of more than 1 GiB to '{}'", label_, cmd));
      }
    }
  }
  const std::string reply_line = out_buffer_.substr(0, nl);
  out_buffer_.erase(0, nl + 1);
  try {
    return decode_reply(reply_line, label_, cmd);
  } catch (const WorkerFailure&) {
    drain_stderr();
    throw;
  }
}

void WorkerProcess::pause() {
  if (pid_ <= 0 || reaped_ || paused_) return;
  if (::kill(-pid_, SIGSTOP) == 0) paused_ = true;
}

void WorkerProcess::resume() {
  if (!paused_) return;
  paused_ = false;
  if (pid_ > 0 && !reaped_) ::kill(-pid_, SIGCONT);
}

void WorkerProcess::kill() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  reap(true);
  close_fd(in_);
}

void WorkerProcess::stop() {
  resume();  // a stopped worker cannot hear "quit"
  if (pid_ <= 0 || reaped_) {
    close_fd(in_);
    close_fd(out_);
    close_fd(err_);
    return;
  }
  try {
    if (in_ >= 0) request({{"cmd", "quit"}}, std::chrono::seconds(5));
  } catch (const Error&) {
    // gone already, or not listening: killed below
  }
  close_fd(in_);  // a worker that did not see "quit" sees end of input
  for (int i = 0; i < 100 && !reap(false); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // the worker's process group: the worker if it is still there, and whatever it started and
  // left behind (compiler pools), which would otherwise take CPU from the next run
  ::kill(-pid_, SIGKILL);
  reap(true);
  close_fd(out_);
  close_fd(err_);
}

}  // namespace neuralcost::worker
