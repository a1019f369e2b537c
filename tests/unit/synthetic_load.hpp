// A synthetic load for tests: a busy loop in a process of its own, pinned to one CPU, started by
// the test and stopped by it. The process is not a descendant of the test (it is forked twice,
// and the middle process exits), so the load readers count its CPU time as another process's,
// never as the test's own. It stops by itself when the test's end of a pipe closes (the test
// exited or crashed) and after `limit_seconds` at most, so it cannot outlive a broken test.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "neuralcost/measure/load.hpp"

namespace neuralcost::load_testing {

class SyntheticLoad {
 public:
  /// Starts the loop on the first CPU this process may use; waits until it spins.
  explicit SyntheticLoad(double limit_seconds = 120) {
    const std::vector<int> cpus = affinity_cpus();
    const int cpu = cpus.empty() ? 0 : cpus.front();
    int alive[2], report[2];
    if (pipe2(alive, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) return;
    const pid_t middle = fork();
    if (middle == 0) {
      const pid_t loop = fork();
      if (loop == 0) {
        close(alive[1]);
        close(report[0]);
        fcntl(alive[0], F_SETFL, O_NONBLOCK);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
        const pid_t self = getpid();
        (void)!write(report[1], &self, sizeof self);
        close(report[1]);
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_seconds);
        volatile unsigned long spin = 0;
        for (;;) {
          for (int i = 0; i < 1'000'000; ++i) spin = spin + 1;
          char c;
          if (read(alive[0], &c, 1) == 0 || std::chrono::steady_clock::now() > end) _exit(0);  // EOF: the test is gone
        }
      }
      _exit(loop > 0 ? 0 : 1);
    }
    close(alive[0]);
    close(report[1]);
    alive_ = alive[1];
    if (middle > 0) {
      waitpid(middle, nullptr, 0);
      if (read(report[0], &pid_, sizeof pid_) != sizeof pid_) pid_ = -1;
    }
    close(report[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it start spinning
  }
  ~SyntheticLoad() { stop(); }
  SyntheticLoad(const SyntheticLoad&) = delete;
  SyntheticLoad& operator=(const SyntheticLoad&) = delete;

  bool running() const { return pid_ > 0; }

  /// Stops the loop (its parent is init now, which reaps it).
  void stop() {
    if (pid_ > 0) kill(pid_, SIGKILL);
    pid_ = -1;
    if (alive_ >= 0) close(alive_);
    alive_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int alive_ = -1;
};

}  // namespace neuralcost::load_testing
