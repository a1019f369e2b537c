#include "neuralcost/core/interrupt.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace neuralcost {
namespace {

std::atomic<int> g_signal{0};
constexpr int kSlots = 64;
std::atomic<int> g_groups[kSlots];

void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) {
    // the second signal: the user means it
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  for (auto& slot : g_groups) {
    const int pgid = slot.load();
    if (pgid > 0) ::kill(-pgid, SIGKILL);
  }
}

}  // namespace

Interrupted::Interrupted(const std::string& what)
    : Error(ErrorCode::kCancelled, "interrupted by " + interrupt_name() +
                                       (what.empty() ? "; its worker processes were ended" : ": " + what)) {}

void install_interrupt_handlers() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocked poll or read returns EINTR
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return true;
  }();
  (void)installed;
}

bool interrupted() { return g_signal.load() != 0; }

std::string interrupt_name() {
  const int sig = g_signal.load();
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == 0 ? "" : "signal " + std::to_string(sig);
}

int interrupt_exit_code() { return 128 + g_signal.load(); }

void throw_if_interrupted() {
  if (interrupted()) throw Interrupted();
}

void watch_process_group(int pgid) {
  for (auto& slot : g_groups) {
    int expected = 0;
    if (slot.compare_exchange_strong(expected, pgid)) break;
  }
  if (interrupted()) ::kill(-pgid, SIGKILL);  // started as the signal came
}

void unwatch_process_group(int pgid) {
  for (auto& slot : g_groups) {
    int expected = pgid;
    if (slot.compare_exchange_strong(expected, 0)) break;
  }
}

void end_child_processes() {
  const std::string self = std::to_string(::getpid());
  for (int round = 0; round < 3; ++round) {
    bool any = false;
    if (DIR* proc = ::opendir("/proc")) {
      while (const dirent* e = ::readdir(proc)) {
        const std::string name = e->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat("/proc/" + name + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        char state = 0;
        int ppid = 0;
        if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
        if (std::to_string(ppid) != self) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(name));
        ::kill(pid, SIGKILL);
        any = true;
      }
      ::closedir(proc);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!any) break;
    ::usleep(20000);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

}  // namespace neuralcost
