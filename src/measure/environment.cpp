// Detection of environment facts for the benchmark contract (see environment.hpp).
#include "neuralcost/measure/environment.hpp"

#include <sched.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace neuralcost {
namespace {

const char* const kVariables[] = {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                                  "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS",
                                  "GLIBC_TUNABLES"};

long faults_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

}  // namespace

EnvironmentFacts detect_environment() {
  EnvironmentFacts f;
  f.cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && f.cpu_model == "unknown") f.cpu_model = value;
    if (key == "flags" && value.find("hypervisor") != std::string::npos) f.virtual_machine = true;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  f.logical_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                                : static_cast<int>(std::thread::hardware_concurrency());
  for (const char* name : kVariables) {
    const char* v = std::getenv(name);
    f.variables[name] = v ? v : "";
  }
  if (!f.variables["OPENBLAS_CORETYPE"].empty()) {
    f.warnings.push_back(fmt::format(
        "OPENBLAS_CORETYPE={} forces OpenBLAS's kernels for that core type; on other CPUs they can be "
        "much slower (sgemm about half speed on the reference VM)",
        f.variables["OPENBLAS_CORETYPE"]));
  }
  if (f.virtual_machine) f.warnings.push_back("running in a virtual machine: other guests can add noise");
  return f;
}

std::string loaded_blas_library() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (file.find("blas") != std::string::npos || file.find("mkl_rt") != std::string::npos) {
      std::error_code ec;
      const auto real = std::filesystem::canonical(path, ec);
      return ec ? path : real.string();
    }
  }
  return "";
}

void check_blas(EnvironmentFacts& facts, const std::string& blas_library) {
  facts.variables["blas_library"] = blas_library;
  const bool reference = blas_library.find("/blas/libblas") != std::string::npos ||
                         blas_library.find("netlib") != std::string::npos;
  if (reference) {
    facts.warnings.push_back("reference BLAS in use (" + blas_library +
                             "): unoptimised netlib kernels; install OpenBLAS (libopenblas0-pthread) or another "
                             "optimised libblas.so.3");
  }
}

double page_faults_per_iteration(const std::function<void()>& work, int iterations) {
  if (iterations < 1) return 0.0;
  const long before = faults_now();
  for (int i = 0; i < iterations; ++i) work();
  return static_cast<double>(faults_now() - before) / iterations;
}

void check_page_faults(EnvironmentFacts& facts, double faults_per_iteration) {
  if (faults_per_iteration >= 8) {
    facts.warnings.push_back(fmt::format(
        "allocator churn: {:.0f} page faults per iteration; freed memory goes back to the OS and is "
        "faulted in again on every run. With glibc malloc try GLIBC_TUNABLES="
        "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295",
        faults_per_iteration));
  }
}

void check_oversubscription(EnvironmentFacts& facts, int intra_op_threads, int blas_threads) {
  const auto policy = facts.variables.find("OMP_WAIT_POLICY");
  if (intra_op_threads > 1 && blas_threads > 1 &&
      (policy == facts.variables.end() || (policy->second != "PASSIVE" && policy->second != "passive"))) {
    facts.warnings.push_back(
        "OpenMP and OpenBLAS thread pools are both active without OMP_WAIT_POLICY=PASSIVE: idle OpenMP "
        "threads spin on the CPUs OpenBLAS needs");
  }
  if (facts.logical_cpus > 0 && intra_op_threads > 1 && blas_threads > 1 &&
      intra_op_threads * blas_threads > facts.logical_cpus) {
    facts.warnings.push_back(fmt::format(
        "thread oversubscription: {} intra-op threads x {} BLAS threads on {} CPUs", intra_op_threads,
        blas_threads, facts.logical_cpus));
  } else if (facts.logical_cpus > 0 && std::max(intra_op_threads, blas_threads) > facts.logical_cpus) {
    facts.warnings.push_back(fmt::format("thread oversubscription: {} threads on {} CPUs",
                                         std::max(intra_op_threads, blas_threads), facts.logical_cpus));
  }
}

}  // namespace neuralcost
