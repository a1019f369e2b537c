// Process isolation for calls into the ONNX library. ONNX 1.12's shape inference reads out of
// bounds or divides by zero on some models its checker accepts (tests/fuzz finds a new case
// every few minutes: conv ranks, zero strides, a scalar given to LayerNormalization...). The
// sweep therefore runs in a forked child: a crash there becomes an error naming the node, and
// the caller's process is never taken down.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::onnx_import {
namespace {

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

[[noreturn]] void child(int fd, const std::function<std::string(std::int64_t&)>& work, std::int64_t& progress) {
  std::string reply;
  try {
    reply = "R" + work(progress);
  } catch (const Error& e) {
    reply = fmt::format("E{:02d}{}", static_cast<int>(e.code()), e.what());
  } catch (const std::exception& e) {
    reply = fmt::format("E{:02d}{}", static_cast<int>(ErrorCode::kInternal), e.what());
  }
  const bool ok = write_all(fd, reply.data(), reply.size());
  ::_exit(ok ? 0 : 3);
}

}  // namespace

std::string run_isolated(const std::function<std::string(std::int64_t& progress)>& work,
                         const std::function<std::string(std::int64_t progress, const std::string& how)>& on_crash) {
  void* shared = ::mmap(nullptr, sizeof(std::int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int fds[2];
  if (shared == MAP_FAILED || ::pipe(fds) != 0) {
    throw Error(ErrorCode::kInternal, fmt::format("cannot isolate ONNX shape inference: {}", std::strerror(errno)));
  }
  auto& progress = *static_cast<std::int64_t*>(shared);
  progress = -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    // no process to spare (a sandbox that forbids fork, a process limit): run in this process,
    // without the protection
    ::munmap(shared, sizeof(std::int64_t));
    ::close(fds[0]);
    ::close(fds[1]);
    std::int64_t inline_progress = -1;
    return work(inline_progress);
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], work, progress);
  }
  ::close(fds[1]);
  std::string reply;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::int64_t at = progress;
  ::munmap(shared, sizeof(std::int64_t));
  const bool exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (exited && !reply.empty() && reply[0] == 'R') return reply.substr(1);
  if (exited && reply.size() >= 3 && reply[0] == 'E') {
    throw Error(static_cast<ErrorCode>(std::stoi(reply.substr(1, 2))), reply.substr(3));
  }
  const std::string how = WIFSIGNALED(status) ? fmt::format("crashed ({})", ::strsignal(WTERMSIG(status)))
                                              : fmt::format("failed (exit status {})", WEXITSTATUS(status));
  throw Error(ErrorCode::kInvalidArgument, on_crash(at, how));
}

}  // namespace neuralcost::onnx_import
