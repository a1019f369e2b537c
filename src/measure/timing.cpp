// The sampling loop of the timing contract (see timing.hpp).
#include "neuralcost/measure/timing.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

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

TimingWindow::TimingWindow(TimedCallable work, TimingOptions options) : work_(std::move(work)), o_(std::move(options)) {
  validate(o_);
  r_.clock_resolution_seconds = steady_clock_resolution_seconds();
  next_check_ = static_cast<std::size_t>(o_.min_samples);
}

void TimingWindow::warm_up() {
  const auto warm_start = Clock::now();
  while (r_.warmup_iterations < o_.warmup_iterations || seconds_since(warm_start) < o_.warmup_seconds) {
    throw_if_interrupted();
    work_.run();
    work_.synchronize();
    ++r_.warmup_iterations;
  }
  r_.warmup_seconds = seconds_since(warm_start);
}

void TimingWindow::visit(double min_seconds, bool prime) {
  if (done_) return;
  const auto prime_start = Clock::now();
  if (prime) {
    throw_if_interrupted();
    work_.run();
    work_.synchronize();
    ++primed_;
  }
  if (!started_) {
    for (Sampler* s : work_.samplers) {
      if (!s->counts_own_passes()) s->start();
    }
    started_ = true;
  }
  for (Sampler* s : work_.samplers) {
    if (s->counts_own_passes()) s->start();
  }
  const auto visit_start = Clock::now();
  const std::size_t before = r_.samples_seconds.size();
  while (!done_ && (r_.samples_seconds.size() == before || seconds_since(visit_start) < min_seconds)) {
    throw_if_interrupted();  // Ctrl-C ends the run between passes (a worker's passes: at once)
    const auto t0 = Clock::now();
    work_.run();
    work_.synchronize();
    const double wall = seconds_since(t0);
    const std::optional<double> own = work_.reported_seconds ? work_.reported_seconds() : std::nullopt;
    r_.samples_seconds.push_back(own ? *own : wall);
    r_.backend_clock = r_.backend_clock || own.has_value();
    const std::size_t n = r_.samples_seconds.size();
    const bool out_of_time = sampled_seconds_ + seconds_since(prime_start) >= o_.budget_seconds;
    if (static_cast<int>(n) >= o_.max_samples) done_ = true;
    if (n >= next_check_ || out_of_time) {
      // the bootstrap costs O(n) per resample: check at geometrically spaced counts
      next_check_ = std::max(n + 1, n + n / 8);
      r_.summary = summarize(r_.samples_seconds);
      r_.reached_target = relative_width(r_.summary) <= o_.target_relative_ci;
      if ((r_.reached_target || out_of_time) && n >= static_cast<std::size_t>(o_.min_samples)) done_ = true;
    }
  }
  const double seconds = seconds_since(visit_start);
  sampled_seconds_ += seconds_since(prime_start);  // the budget pays for the untimed pass too
  const int passes = static_cast<int>(r_.samples_seconds.size() - before);
  for (Sampler* s : work_.samplers) {
    if (!s->counts_own_passes()) continue;
    Counters counted;
    s->stop(passes, seconds, counted);
    merge_visit(s, counted, passes);
  }
}

void TimingWindow::merge_visit(const Sampler* sampler, const Counters& counted, int passes) {
  for (const Counter& c : counted) {
    auto it = std::find_if(own_counters_.begin(), own_counters_.end(),
                           [&](const auto& e) { return e.sampler == sampler && e.counter.name == c.name; });
    if (it == own_counters_.end()) {
      own_counters_.push_back({sampler, c, 0, 0});
      it = own_counters_.end() - 1;
    }
    // per pass: weighted by the visit's passes; a rate: by its seconds; a total: summed
    const double weight = c.kind == Counter::Kind::kPerIteration ? passes : 1.0;
    it->sum += c.value * weight;
    it->weight += weight;
  }
}

TimingResult TimingWindow::finish() {
  if (!started_) visit(0);  // a window with no visit yet: its passes now
  TimingResult r = std::move(r_);
  const TimingOptions& o = o_;
  r.sampling_seconds = sampled_seconds_;
  for (Sampler* s : work_.samplers) {  // the counters in the samplers' order
    if (!s->counts_own_passes()) {
      s->stop(static_cast<int>(r.samples_seconds.size()), r.sampling_seconds, r.counters);
      continue;
    }
    for (const OwnCounter& c : own_counters_) {
      if (c.sampler != s) continue;
      Counter total = c.counter;
      total.value = c.counter.kind == Counter::Kind::kTotal ? c.sum : (c.weight > 0 ? c.sum / c.weight : 0.0);
      r.counters.push_back(std::move(total));
    }
  }
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

TimingResult time_until_stable(const TimedCallable& work, const TimingOptions& o) {
  TimingWindow window(work, o);
  window.warm_up();
  window.visit(std::numeric_limits<double>::infinity());
  return window.finish();
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
