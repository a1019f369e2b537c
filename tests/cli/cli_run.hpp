// Runs the real neural-cost binary and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace neuralcost::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `--hardware` for tests that are not about the roof: a fixed spec, so that no command calibrates
/// (a calibration on a busy machine, as under `ctest -j2`, is not cached, so every command measured
/// again: 5-20 s each). The calibration path and the default `host` have their own tests.
inline const std::string kTestRoof = " --hardware " NEURALCOST_TEST_INPUTS "/good/test_cpu_2core.json";

/// Runs `ENV neural-cost ARGS` through the shell (both shell syntax; ENV: "NAME=value ...").
inline CliResult run_cli_env(const std::string& env, const std::string& args) {
  const std::string dir = ::testing::TempDir();
  // per-process names: ctest runs tests in parallel, one process each
  const std::string stem = dir + "/nc_cli_" + std::to_string(::getpid());
  const std::string out = stem + ".out", err = stem + ".err";
  const std::string cmd =
      env + " " + std::string(NEURALCOST_CLI) + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

/// Runs `neural-cost ARGS` through the shell (ARGS is shell syntax).
inline CliResult run_cli(const std::string& args) { return run_cli_env("", args); }

}  // namespace neuralcost::testing
