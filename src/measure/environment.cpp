// Detection of environment facts for the benchmark contract (see environment.hpp).
#include "neuralcost/measure/environment.hpp"

#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace neuralcost {
namespace {

const char* const kVariables[] = {"OMP_NUM_THREADS",  "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                                  "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS", "GLIBC_TUNABLES"};

long faults_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  return in && std::getline(in, line) ? line : "";
}

/// THP, the governor, NUMA nodes and online CPUs (sysfs), with a warning where one distorts rounds.
void read_machine_hygiene(EnvironmentFacts& f) {
  // "always [madvise] never": the bracketed one is in force
  const std::string thp = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::size_t open = thp.find('['), close = thp.find(']');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    f.transparent_hugepages = thp.substr(open + 1, close - open - 1);
  }
  std::error_code ec;
  const bool cpufreq = std::filesystem::exists("/sys/devices/system/cpu/cpu0/cpufreq", ec);
  const std::string governor = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  f.frequency_governor = !governor.empty() ? governor : cpufreq ? "unknown" : "none";
  int nodes = 0;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) ++nodes;
  }
  f.numa_nodes = nodes;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  f.machine_cpus = online > 0 ? static_cast<int>(online) : 0;
  if (f.transparent_hugepages == "always") {
    f.warnings.push_back(
        "transparent huge pages are 'always': khugepaged compacts memory in the background, and a "
        "pass whose buffers it collapses runs at another speed than the next (rounds disagree); "
        "'madvise' avoids it");
  }
  if (f.frequency_governor != "none" && f.frequency_governor != "unknown" && f.frequency_governor != "performance") {
    f.warnings.push_back(
        fmt::format("CPU frequency governor '{}': the clock follows the load, so rounds run at "
                    "different clocks; 'performance' holds it",
                    f.frequency_governor));
  }
  if (f.numa_nodes > 1 && f.logical_cpus == f.machine_cpus) {
    f.warnings.push_back(
        fmt::format("{} NUMA nodes and the process may run on any CPU: memory on the other node is "
                    "slower, and rounds differ by where they ran; pin with numactl or taskset",
                    f.numa_nodes));
  }
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
    f.warnings.push_back(
        fmt::format("OPENBLAS_CORETYPE={} forces OpenBLAS's kernels for that core type; on other CPUs they can be "
                    "much slower (sgemm about half speed on the reference VM)",
                    f.variables["OPENBLAS_CORETYPE"]));
  }
  if (f.virtual_machine) f.warnings.push_back("running in a virtual machine: other guests can add noise");
  read_machine_hygiene(f);
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
  const bool reference =
      blas_library.find("/blas/libblas") != std::string::npos || blas_library.find("netlib") != std::string::npos;
  if (reference) {
    facts.warnings.push_back("reference BLAS in use (" + blas_library +
                             "): unoptimised netlib kernels; install OpenBLAS (libopenblas0-pthread) or another "
                             "optimised libblas.so.3");
  }
}

namespace {
MallocTuning& last_tuning() {
  static MallocTuning t;
  return t;
}
}  // namespace

const MallocTuning& malloc_tuning() { return last_tuning(); }

namespace {
/// One malloc arena for this process: LibTorch's calls run on a thread of their own (CallThread),
/// and glibc gives such a thread an arena whose heaps (64 MiB each) are unmapped as soon as they
/// fall empty, whatever the trim threshold: a batch-32 CNN faulted 8,193 fresh pages in on every
/// pass (26-31 ms against 23-25 ms with one arena, whose heap is the brk heap the thresholds keep).
/// Kept when the user chose an arena count (MALLOC_ARENA_MAX, or arena_max in GLIBC_TUNABLES).
std::string limit_arenas(const char* tunables) {
  if (const char* chosen = std::getenv("MALLOC_ARENA_MAX"); chosen != nullptr) {
    return fmt::format("MALLOC_ARENA_MAX={} from the environment", chosen);
  }
  if (tunables != nullptr && std::string(tunables).find("arena_max") != std::string::npos) {
    return "the arena count of GLIBC_TUNABLES";
  }
  if (::mallopt(M_ARENA_MAX, 1) != 1) return "glibc refused one arena (mallopt)";
  return "one malloc arena in this process (mallopt), so the thread that runs LibTorch's calls allocates from "
         "the heap the thresholds keep";
}
}  // namespace

MallocTuning tune_malloc_for_measurement() {
  MallocTuning& t = last_tuning();
  t = MallocTuning{};
  const char* given = std::getenv("GLIBC_TUNABLES");
  t.arenas = limit_arenas(given);
  if (given != nullptr) {
    t.description =
        fmt::format("GLIBC_TUNABLES={} from the environment (neural-cost sets no threshold); {}", given, t.arenas);
    return t;
  }
  constexpr int kMmapThreshold = 32 << 20;  // glibc's largest: HEAP_MAX_SIZE / 2 on 64-bit
  constexpr long kTrimThreshold = 1L << 32;
  const bool mmap_set = ::mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_set = ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<long>(kTrimThreshold, 0x7fffffff))) == 1;
  ::setenv("GLIBC_TUNABLES",
           fmt::format("glibc.malloc.mmap_threshold={}:glibc.malloc.trim_threshold={}", kMmapThreshold, kTrimThreshold)
               .c_str(),
           0);
  t.tuned = mmap_set && trim_set;
  t.description = t.tuned ? "glibc malloc keeps freed memory: mmap_threshold 32 MiB, trim_threshold 2 GiB in this "
                            "process (mallopt) and 4 GiB in its workers (GLIBC_TUNABLES), set by neural-cost because "
                            "GLIBC_TUNABLES was unset; " +
                                t.arenas
                          : "glibc malloc's thresholds could not be set (mallopt refused them); " + t.arenas;
  return t;
}

double page_faults_per_iteration(const std::function<void()>& work, int iterations) {
  if (iterations < 1) return 0.0;
  const long before = faults_now();
  for (int i = 0; i < iterations; ++i) work();
  return static_cast<double>(faults_now() - before) / iterations;
}

void check_page_faults(EnvironmentFacts& facts, double faults_per_iteration, const MallocTuning& tuning) {
  if (faults_per_iteration < 8) return;
  const std::string churn = fmt::format(
      "allocator churn: {:.0f} page faults per iteration; freed memory goes back to the OS and is faulted in again on "
      "every run. ",
      faults_per_iteration);
  if (tuning.description.empty()) {
    facts.warnings.push_back(churn +
                             "With glibc malloc try GLIBC_TUNABLES="
                             "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295");
  } else {
    // the thresholds are in force already: the advice above would change nothing
    facts.warnings.push_back(churn +
                             "glibc's thresholds were in force (the contract's malloc), so the pages come from "
                             "elsewhere: blocks above the mmap threshold, a thread's own arena (MALLOC_ARENA_MAX=1 "
                             "for the process), or the framework's own allocator");
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
    facts.warnings.push_back(fmt::format("thread oversubscription: {} intra-op threads x {} BLAS threads on {} CPUs",
                                         intra_op_threads, blas_threads, facts.logical_cpus));
  } else if (facts.logical_cpus > 0 && std::max(intra_op_threads, blas_threads) > facts.logical_cpus) {
    facts.warnings.push_back(fmt::format("thread oversubscription: {} threads on {} CPUs",
                                         std::max(intra_op_threads, blas_threads), facts.logical_cpus));
  }
}

}  // namespace neuralcost
