// The machine's canary (canary.hpp).
#include "measure/canary.hpp"

#include <algorithm>
#include <chrono>

namespace neuralcost::detail {

MachineCanary::MachineCanary(std::size_t bytes) : buffer_(std::max<std::size_t>(bytes / sizeof(double), 64), 1.0) {}

double MachineCanary::read() {
  using Clock = std::chrono::steady_clock;
  constexpr std::size_t kLine = 64 / sizeof(double);  // one load per cache line: the memory's pace
  double best = 0;
  for (int r = 0; r < 2; ++r) {
    const auto t0 = Clock::now();
    double s = 0;
    for (std::size_t i = 0; i < buffer_.size(); i += kLine) s += buffer_[i];
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    sink_ += s;  // kept, so that the loop is not optimised away
    best = r == 0 ? t : std::min(best, t);
  }
  // the sum is used: a volatile read of it stops the compiler from dropping the loops
  volatile double keep = sink_;
  (void)keep;
  return best;
}

double MachineCanary::read_cpu() {
  using Clock = std::chrono::steady_clock;
  constexpr int kLanes = 8;        // independent chains: the FP pipes' throughput, not one latency
  constexpr int kSteps = 1 << 16;  // 8 x 65,536 multiply-adds: about 0.2 ms on the cores seen here
  volatile double factor = factor_, addend = addend_;
  const double f = factor, a = addend;
  double best = 0;
  for (int r = 0; r < 2; ++r) {
    double x[kLanes];
    for (int k = 0; k < kLanes; ++k) x[k] = 1.0 + k;
    const auto t0 = Clock::now();
    for (int i = 0; i < kSteps; ++i) {
      for (int k = 0; k < kLanes; ++k) x[k] = x[k] * f + a;
    }
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    for (int k = 0; k < kLanes; ++k) sink_ += x[k];
    best = r == 0 ? t : std::min(best, t);
  }
  volatile double keep = sink_;
  (void)keep;
  return best;
}

}  // namespace neuralcost::detail
