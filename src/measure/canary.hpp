// The machine's own speed between rounds (docs/profiling.md §2a, "The machine's canary"): on a
// shared VM the memory side changes regime over minutes (neighbours' traffic), and every cell's
// rounds move with it. A fixed stream over a buffer larger than the last-level cache, read before
// each round, tracks that regime, so that rounds, cells and whole studies can say how fast the
// machine itself was when they were measured. A second canary, a chain of multiply-adds, does
// the same for the cores' pace.
#pragma once

#include <cstddef>
#include <vector>

namespace neuralcost::detail {

class MachineCanary {
 public:
  /// Allocates and touches `bytes` (default 64 MiB: more than the last-level cache of the CPUs
  /// seen here, 32 MiB per CCD).
  explicit MachineCanary(std::size_t bytes = std::size_t{64} << 20);
  /// Seconds of the faster of two reads of one double per 64-byte line of the buffer (about 7 ms
  /// at 20 GB/s): a DRAM-latency-and-bandwidth-bound reading.
  double read();
  /// Seconds of the faster of two runs of a fixed chain of multiply-adds in registers (0.2 ms here):
  /// the core's own pace (its clock, a sibling hardware thread's load), which the memory stream
  /// does not see: on this VM whole studies ran 15-25 % slower than the one before while the memory
  /// canary moved 2 %.
  double read_cpu();

 private:
  std::vector<double> buffer_;
  double sink_ = 0;
  double factor_ = 0.999999, addend_ = 1e-9;  ///< the chain's operands, not constants to the compiler
};

}  // namespace neuralcost::detail
