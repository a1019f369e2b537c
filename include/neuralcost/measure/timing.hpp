// The timing contract shared by every backend: warm-up (by count and by time), then samples
// until the 95 % confidence interval of the median is narrow enough or the time budget is
// spent, then a verdict. A result that cannot be trusted says so (`mistrusted`, with reasons)
// instead of being reported as fact.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/counters.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/measure/outcome.hpp"

namespace neuralcost {

struct TimingOptions {
  int warmup_iterations = 5;    ///< at least this many untimed runs...
  double warmup_seconds = 0.2;  ///< ...and at least this long
  int min_samples = 20;         ///< fewer make the bootstrap interval of the median too narrow
  int max_samples = 100000;
  /// Stop once (ci95 high - low) / median is at most this.
  double target_relative_ci = 0.02;
  double budget_seconds = 5.0;  ///< sampling stops here whatever the interval
  /// A median below this many clock ticks is "too short for the clock".
  double min_clock_ticks = 1000;
  /// CV (stddev / mean) above this is "too noisy", whether or not the interval met its target.
  double max_cv = 0.25;
  /// The fastest passes disagree with the median when p5 lies below the CI's low end by more
  /// than this fraction of the median: most passes were slowed by something else.
  double max_p5_gap = 0.25;
  /// Judge the window's passes (interval target, CV, p5 gap) as reasons to mistrust; false for a
  /// round of a cell, whose verdict comes from its rounds (only the clock's floor stays)
  bool pass_verdict = true;
};

struct TimingResult {
  std::vector<double> samples_seconds;
  bool backend_clock = false;  ///< samples are the backend's own times (reported_seconds)
  SampleSummary summary;
  int warmup_iterations = 0;  ///< warm-up runs actually made
  double warmup_seconds = 0;
  double sampling_seconds = 0;
  bool reached_target = false;  ///< the interval met target_relative_ci
  double clock_resolution_seconds = 0;
  Verdict verdict = Verdict::kOk;    ///< kOk or kMistrusted: the timing contract's own verdict
  std::vector<std::string> reasons;  ///< why mistrusted (empty when ok)
  Counters counters;                 ///< what the samplers measured over the sampling phase
};

/// The two hooks a backend gives the loop.
struct TimedCallable {
  std::function<void()> run;          ///< one unit of work (e.g. one forward pass)
  std::function<void()> synchronize;  ///< waits until that work is done (no-op on the CPU)
  /// (optional) The duration of the last run() by the backend's own clock, when it times itself
  /// (a worker process times the forward pass inside the framework's process, so that the
  /// protocol's round trip is not part of the sample). Samples are then these durations.
  std::function<std::optional<double>()> reported_seconds;
  /// (optional) Started right before the first sample and stopped right after the last.
  std::vector<Sampler*> samplers;
};

/// Throws kInvalidArgument naming the option when `options` cannot work.
void validate(const TimingOptions& options);

/// Smallest step of std::chrono::steady_clock seen over repeated reads, in seconds.
double steady_clock_resolution_seconds();

/// One timed window taken a visit at a time, so that several cells' windows can be interleaved
/// pass by pass (measure/schedule.hpp): warm_up(), then visit() until done(), then finish().
/// The budget counts the window's own passes (its visits), not the passes of other windows run
/// between them. Samplers that count their own passes (Sampler::counts_own_passes) bracket each
/// visit; the others bracket the whole window.
class TimingWindow {
 public:
  /// Throws kInvalidArgument (validate) when the options cannot work.
  TimingWindow(TimedCallable work, TimingOptions options);
  void warm_up();
  /// Passes until `min_seconds` have gone by (at least one) or the stopping rule holds. With
  /// `prime`, one untimed pass first (counted in the budget, not in the samples): a visit that
  /// follows other cells' passes finds the model cold (caches, thread pools asleep, another
  /// framework's code), and its first pass is not the steady state the contract times.
  void visit(double min_seconds, bool prime = false);
  /// Untimed passes that began visits (prime).
  int primed_passes() const { return primed_; }
  /// The stopping rule holds: the interval met its target or the budget is spent (after the
  /// minimum samples), or the maximum samples were taken.
  bool done() const { return done_; }
  /// The window's summary, counters and verdict.
  TimingResult finish();

 private:
  struct OwnCounter {
    const Sampler* sampler = nullptr;
    Counter counter;
    double sum = 0, weight = 0;
  };
  void merge_visit(const Sampler* sampler, const Counters& counted, int passes);

  TimedCallable work_;
  TimingOptions o_;
  TimingResult r_;
  std::vector<OwnCounter> own_counters_;
  std::size_t next_check_ = 0;
  int primed_ = 0;
  double sampled_seconds_ = 0;
  bool started_ = false;
  bool done_ = false;
};

/// Warms up, samples and summarises `work` under `options` (one window, one visit).
TimingResult time_until_stable(const TimedCallable& work, const TimingOptions& options);

/// Adds the roofline check: a median below `lower_bound_seconds` (what the hardware spec
/// allows at best) is physically impossible, so the spec is wrong; mistrusts the result.
void check_against_roofline(TimingResult& result, double lower_bound_seconds);

}  // namespace neuralcost
