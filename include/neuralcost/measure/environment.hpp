// Facts about the machine and process that belong in every benchmark contract, and the ones
// that distort measurements: allocator churn (page faults per iteration), a forced OpenBLAS
// core type, thread oversubscription.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace neuralcost {

struct EnvironmentFacts {
  std::string cpu_model;         ///< from /proc/cpuinfo ("unknown" when unreadable)
  int logical_cpus = 0;          ///< CPUs this process may run on
  bool virtual_machine = false;  ///< the "hypervisor" CPU flag
  /// Environment variables that change how numeric libraries behave, as set ("" = unset).
  std::map<std::string, std::string> variables;
  /// What makes rounds disagree on a shared machine (docs/profiling.md §2a, "Machine hygiene"):
  /// transparent huge pages ("always", "madvise", "never"), the CPU frequency governor ("none":
  /// no cpufreq, the hypervisor or firmware sets the clock), NUMA nodes, whether this process is
  /// pinned to fewer CPUs than the machine has; "unknown" where unreadable.
  std::string transparent_hugepages = "unknown";
  std::string frequency_governor = "unknown";
  int numa_nodes = 0;                 ///< 0: unknown
  int machine_cpus = 0;               ///< online CPUs of the machine (0: unknown)
  std::vector<std::string> warnings;  ///< facts that distort measurements, one sentence each
};

/// Reads /proc/cpuinfo, the affinity mask and the environment. Never throws: what cannot be
/// read is reported as unknown.
EnvironmentFacts detect_environment();

/// The BLAS shared library mapped into this process (from /proc/self/maps, symlinks resolved),
/// or "" when none is loaded.
std::string loaded_blas_library();
/// Adds the BLAS in use to the facts, with a warning for the unoptimised reference BLAS.
void check_blas(EnvironmentFacts& facts, const std::string& blas_library);

/// Page faults (minor + major, getrusage) per call of `work`, averaged over `iterations`.
double page_faults_per_iteration(const std::function<void()>& work, int iterations);

/// What tune_malloc_for_measurement() did, one sentence for the contract.
struct MallocTuning {
  bool tuned = false;       ///< this process set the thresholds (and GLIBC_TUNABLES for its workers)
  std::string description;  ///< "mmap_threshold 32 MiB, trim_threshold 4 GiB, set by neural-cost ..."
  std::string arenas;       ///< what became of this process's malloc arenas ("one malloc arena ...")
};

/// Keeps freed memory in the processes a measurement runs (docs/profiling.md §2a, "Machine
/// hygiene"): glibc's default malloc returns freed blocks to the OS and a framework that frees its
/// activations after a pass touches fresh pages on the next one (thousands of page faults a pass
/// for a batch-32 CNN in LibTorch; on a VM their cost swings from round to round). Unless
/// GLIBC_TUNABLES is already set (the user's choice, kept), sets this process's mmap threshold to
/// glibc's largest (32 MiB) and its trim threshold to 4 GiB with mallopt, and GLIBC_TUNABLES with
/// the same values for the worker processes it starts. Whatever GLIBC_TUNABLES says, limits this
/// process to one malloc arena (unless the user chose a count): the thread that runs LibTorch's
/// calls would otherwise get an arena of its own, whose heaps are unmapped whenever they empty.
/// Call before any thread starts.
MallocTuning tune_malloc_for_measurement();
/// What the last tune_malloc_for_measurement() of this process did (empty description: never called).
const MallocTuning& malloc_tuning();

/// Adds a warning when `faults_per_iteration` shows allocator churn (fresh pages touched on
/// every run: first-touch faults cost microseconds each and can dominate a forward pass). Its
/// advice follows `tuning`: glibc's thresholds when nothing set them; otherwise where else the
/// pages come from, since the thresholds are already in force.
void check_page_faults(EnvironmentFacts& facts, double faults_per_iteration,
                       const MallocTuning& tuning = malloc_tuning());

/// Adds a warning when the threads the libraries will start exceed the CPUs.
void check_oversubscription(EnvironmentFacts& facts, int intra_op_threads, int blas_threads);

}  // namespace neuralcost
