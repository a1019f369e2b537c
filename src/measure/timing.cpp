// The sampling loop of the timing contract (see timing.hpp).
#include "neuralcost/measure/timing.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double relative_width(const SampleSummary& s) {
  return s.median > 0 ? (s.ci95_median.high - s.ci95_median.low) / s.median : 0.0;
}

}  // namespace

void validate(const TimingOptions& o) {
  if (o.warmup_iterations < 0 || !(o.warmup_seconds >= 0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--warmup ({}) and --warmup-seconds ({}) must be >= 0",
                                                         o.warmup_iterations, o.warmup_seconds));
  }
  // upper bounds: a typo must not become a run that never ends
  if (o.warmup_iterations > 1000000) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--warmup must be at most 1,000,000 passes (got {})", o.warmup_iterations));
  }
  if (o.warmup_seconds > 3600) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--warmup-seconds must be at most 3600 (got {})", o.warmup_seconds));
  }
  if (o.min_samples < 1 || o.max_samples < o.min_samples) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("need 1 <= min_samples ({}) <= max_samples ({})", o.min_samples, o.max_samples));
  }
  if (!(o.target_relative_ci > 0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--target-ci must be > 0 (got {})", o.target_relative_ci));
  }
  if (!(o.budget_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--budget must be > 0 seconds (got {})", o.budget_seconds));
  }
}

double steady_clock_resolution_seconds() {
  double best = 1.0;
  for (int i = 0; i < 200; ++i) {
    const auto a = Clock::now();
    auto b = Clock::now();
    while (b == a) b = Clock::now();
    best = std::min(best, std::chrono::duration<double>(b - a).count());
  }
  return best;
}

TimingResult time_until_stable(const TimedCallable& work, const TimingOptions& o) {
  validate(o);
  TimingResult r;
  r.clock_resolution_seconds = steady_clock_resolution_seconds();
  const auto warm_start = Clock::now();
  while (r.warmup_iterations < o.warmup_iterations || seconds_since(warm_start) < o.warmup_seconds) {
    throw_if_interrupted();
    work.run();
    work.synchronize();
    ++r.warmup_iterations;
  }
  r.warmup_seconds = seconds_since(warm_start);

  for (Sampler* s : work.samplers) s->start();
  const auto sample_start = Clock::now();
  std::size_t next_check = static_cast<std::size_t>(o.min_samples);
  while (static_cast<int>(r.samples_seconds.size()) < o.max_samples) {
    throw_if_interrupted();  // Ctrl-C ends the run between passes (a worker's passes: at once)
    const auto t0 = Clock::now();
    work.run();
    work.synchronize();
    const double wall = seconds_since(t0);
    const std::optional<double> own = work.reported_seconds ? work.reported_seconds() : std::nullopt;
    r.samples_seconds.push_back(own ? *own : wall);
    r.backend_clock = r.backend_clock || own.has_value();
    const std::size_t n = r.samples_seconds.size();
    const bool out_of_time = seconds_since(sample_start) >= o.budget_seconds;
    if (n >= next_check || out_of_time) {
      // the bootstrap costs O(n) per resample: check at geometrically spaced counts
      next_check = std::max(n + 1, n + n / 8);
      r.summary = summarize(r.samples_seconds);
      r.reached_target = relative_width(r.summary) <= o.target_relative_ci;
      if ((r.reached_target && n >= static_cast<std::size_t>(o.min_samples)) ||
          (out_of_time && n >= static_cast<std::size_t>(o.min_samples))) {
        break;
      }
    }
  }
  r.sampling_seconds = seconds_since(sample_start);
  for (Sampler* s : work.samplers) s->stop(static_cast<int>(r.samples_seconds.size()), r.sampling_seconds, r.counters);
  r.summary = summarize(r.samples_seconds);
  r.reached_target = relative_width(r.summary) <= o.target_relative_ci;

  const SampleSummary& s = r.summary;
  if (!r.reached_target && o.pass_verdict) {
    r.reasons.push_back(fmt::format(
        "too noisy: the 95% CI of the median spans {:.1f}% of it after {} samples ({:.1f} s budget; target {:.1f}%); "
        "raise --budget, or rerun on an idle machine",
        100 * relative_width(s), s.n, o.budget_seconds, 100 * o.target_relative_ci));
  }
  if (s.cv > o.max_cv && o.pass_verdict) {
    r.reasons.push_back(fmt::format(
        "too noisy: coefficient of variation {:.2f} exceeds {:.2f} (passes from {:.3g} s to {:.3g} s): a median of "
        "passes this uneven describes none of them; rerun on an idle machine, with more --warmup if the first passes "
        "are the slow ones",
        s.cv, o.max_cv, s.min, s.max));
  }
  if (o.pass_verdict && s.median > 0 && (s.ci95_median.low - s.p5) > o.max_p5_gap * s.median) {
    r.reasons.push_back(fmt::format(
        "the fastest passes disagree with the median: p5 {:.3g} s is {:.0f}% below the median {:.3g} s, beyond its "
        "95% CI ({:.3g} - {:.3g} s) by more than {:.0f}% of it: the machine can run a pass that fast, so most passes "
        "were slowed by something else (other processes, throttling); rerun on an idle machine",
        s.p5, 100 * (s.median - s.p5) / s.median, s.median, s.ci95_median.low, s.ci95_median.high, 100 * o.max_p5_gap));
  }
  if (r.summary.median < o.min_clock_ticks * r.clock_resolution_seconds) {
    r.reasons.push_back(fmt::format("too short for the clock: median {:.3g} s is under {:.0f} ticks of {:.3g} s",
                                    r.summary.median, o.min_clock_ticks, r.clock_resolution_seconds));
  }
  r.verdict = r.reasons.empty() ? Verdict::kOk : Verdict::kMistrusted;
  return r;
}

void check_against_roofline(TimingResult& result, double lower_bound_seconds) {
  if (lower_bound_seconds > 0 && result.summary.median < lower_bound_seconds) {
    result.reasons.push_back(
        fmt::format("faster than the roofline allows: median {:.3g} s is below the lower bound {:.3g} s, so the "
                    "hardware spec understates this machine (data that stay in cache between runs are faster "
                    "than a spec without cache levels allows)",
                    result.summary.median, lower_bound_seconds));
    result.verdict = Verdict::kMistrusted;
  }
}

}  // namespace neuralcost
