// The machine's own speed between rounds (docs/profiling.md §2a, "The machine's canary"): on a
// shared VM the memory side changes regime over minutes (neighbours' traffic), and every cell's
// rounds move with it. A fixed stream over a buffer larger than the last-level cache, read before
// each round, tracks that regime, so that rounds, cells and whole studies can say how fast the
// machine itself was when they were measured.
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

 private:
  std::vector<double> buffer_;
  double sink_ = 0;
};

}  // namespace neuralcost::detail
