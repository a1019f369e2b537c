// Counters of a run, after google/benchmark's user counters: named values with units that
// samplers fill through start/stop hooks around the timed phase (like benchmark's
// MemoryManager). Page faults per iteration are one today; energy, hardware counters and
// allocator peaks can be others. Views print every counter the same way.
#pragma once

#include <string>
#include <vector>

namespace neuralcost {

struct Counter {
  /// How `value` relates to the timed phase.
  enum class Kind {
    kPerIteration,  ///< the phase's total divided by its iterations (forward passes)
    kTotal,         ///< over the whole phase
    kRate,          ///< the phase's total divided by its seconds
  };
  std::string name;  ///< snake_case, unique in a run: "page_faults"
  double value = 0;
  std::string unit;  ///< "faults", "J", "B", ...; "" for a plain number
  Kind kind = Kind::kPerIteration;
};

/// "per_iteration", "total", "rate".
std::string counter_kind_name(Counter::Kind kind);

using Counters = std::vector<Counter>;

/// The counter named `name`, or nullptr.
const Counter* find_counter(const Counters& counters, const std::string& name);

/// Samples something around the timed phase of a run: start() right before the first timed
/// iteration, stop() right after the last, adding its counters. A sampler costs nothing per
/// iteration (it must not distort the samples).
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual void start() = 0;
  /// `iterations` and `seconds`: what the timed phase ran, for per-iteration values and rates.
  virtual void stop(int iterations, double seconds, Counters& out) = 0;
  /// True when what it counts belongs to the passes it brackets alone (page faults of the
  /// model's process): a window interleaved with other cells' passes brackets each of its own
  /// visits with it. False when it reads the machine over the window (load, a GPU's power).
  virtual bool counts_own_passes() const { return false; }
};

}  // namespace neuralcost
