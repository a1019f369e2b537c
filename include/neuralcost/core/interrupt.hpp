// Ctrl-C and SIGTERM: the run in progress ends, its worker processes die with it, and what
// finished is kept. The first signal is recorded (interrupted()), kills the process groups of
// the workers it watches and makes blocking waits return; long loops check interrupted() and
// throw Interrupted. A second signal ends the process at once.
#pragma once

#include <string>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

/// Installs the SIGINT and SIGTERM handlers (once; later calls do nothing) and makes this
/// process the reaper of its orphaned descendants, so that a worker's own children can be found
/// and ended too.
void install_interrupt_handlers();
/// True once SIGINT or SIGTERM arrived.
bool interrupted();
/// "SIGINT" or "SIGTERM" (empty before any).
std::string interrupt_name();
/// 128 + the signal's number: the exit status of a command ended by it (130 for SIGINT).
int interrupt_exit_code();
/// Throws Interrupted when a signal arrived: the check long loops make between steps.
void throw_if_interrupted();

/// The error a run ends with when it was interrupted.
class Interrupted : public Error {
 public:
  /// "interrupted by SIGINT; its worker processes were ended", or "interrupted by SIGINT: " + what.
  explicit Interrupted(const std::string& what = "");
};

/// Worker process groups the handler kills (SIGKILL) when the signal comes; at most 64 at once.
void watch_process_group(int pgid);
void unwatch_process_group(int pgid);
/// Kills and reaps every child process of this one, adopted orphans included (for the exit of
/// an interrupted command).
void end_child_processes();

}  // namespace neuralcost
