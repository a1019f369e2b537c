// The torch worker's per-op timer (docs/profiling.md §4): a RecordFunction observer compiled
// against the worker's own torch (the PyPI wheel's headers and libtorch_cpu), loaded by
// python/neuralcost_worker/torch/native_timer.py with ctypes. It costs a fraction of a microsecond per
// op, where a Python TorchDispatchMode costs about 4 µs (issue 16: at most 3 % per pass).
//
// It times exactly the ops the worker's capture records: those a TorchDispatchMode sees, the
// ATen ops left after CompositeImplicitAutograd decomposition (aten::linear is not one: its
// aten::t and aten::addmm are). RecordFunction sees every dispatcher call, the composite ones and
// the calls an op makes inside its kernel too, so the timer learns which is which from one pass:
//   learn  - one untimed pass records the tree of calls (name, depth, calls inside);
//   plan   - the names the dispatch mode saw (in order) are matched to that tree in pre-order:
//            a call whose name is the next expected one is that op (its calls inside are its
//            own work), any other call outside a matched op is a composite op being descended;
//   time   - each pass timestamps the entry and exit of the matched ops only; inside an op that
//            makes `switch_off_from` calls or more, RecordFunction is switched off for the thread
//            until its exit, so its nested calls cost no callback.
// A timed pass checks that its calls follow the plan (same names, same count); one that does not
// fails with a reason instead of giving times to the wrong ops.
// C interface only (no Python.h, no pybind11): the worker passes plain strings and reads doubles.
#include <ATen/record_function.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#ifndef NEURALCOST_TORCH_VERSION
#error "NEURALCOST_TORCH_VERSION (the torch.__version__ this is built against) must be defined"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  std::string name;
  int inside = 0;  ///< calls made while it ran (its subtree, itself excluded)
};

/// What to do at the n-th call entered outside a timed op: time op `event`, or descend (-1).
struct Step {
  int event = -1;
  bool switch_off = false;
};

enum class Phase { kIdle, kLearn, kTime };

struct Timer {
  Phase phase = Phase::kIdle;
  at::CallbackHandle handle = 0;
  // learning
  std::vector<Call> calls;
  std::vector<std::size_t> open;
  // plan
  std::vector<Step> plan;
  std::vector<std::string> names;      ///< of the timed ops, by event
  std::vector<const char*> name_seen;  ///< the name pointer the first timed pass saw, by event
  // a timed pass
  std::size_t next = 0;
  bool inside = false;
  int depth = 0;
  bool switched_off = false;
  int event = -1;
  Clock::time_point start;
  std::vector<double> seconds;
  std::string error;
};

thread_local Timer timer;

void fail(Timer& t, std::string why) {
  if (t.error.empty()) t.error = std::move(why);
}

std::unique_ptr<at::ObserverContext> learn_enter(const at::RecordFunction& fn) {
  Timer& t = timer;
  t.open.push_back(t.calls.size());
  t.calls.push_back({fn.name(), 0});
  return nullptr;
}

void learn_exit(const at::RecordFunction&, at::ObserverContext*) {
  Timer& t = timer;
  if (t.open.empty()) return;
  const std::size_t i = t.open.back();
  t.open.pop_back();
  t.calls[i].inside = static_cast<int>(t.calls.size() - 1 - i);
}

bool same_name(Timer& t, int event, const char* name) {
  const char*& seen = t.name_seen[static_cast<std::size_t>(event)];
  if (seen == name) return true;  // operator names live in the dispatcher's registry: one pointer each
  if (t.names[static_cast<std::size_t>(event)] != name) return false;
  seen = name;
  return true;
}

std::unique_ptr<at::ObserverContext> time_enter(const at::RecordFunction& fn) {
  Timer& t = timer;
  if (t.inside) {
    ++t.depth;
    return nullptr;
  }
  if (t.next >= t.plan.size()) {
    fail(t, std::string("the pass called ") + fn.name() + " after the ops the timer learned");
    return nullptr;
  }
  const Step step = t.plan[t.next++];
  if (step.event < 0) return nullptr;  // a composite op: the ops it calls are timed
  if (!same_name(t, step.event, fn.name())) {
    fail(t, "op #" + std::to_string(step.event) + " was " + t.names[static_cast<std::size_t>(step.event)] +
                " when the timer learned the pass, " + fn.name() + " now");
  }
  t.inside = true;
  t.depth = 0;
  t.event = step.event;
  t.switched_off = step.switch_off;
  if (t.switched_off) at::enableRecordFunction(false);
  t.start = Clock::now();
  return nullptr;
}

void time_exit(const at::RecordFunction&, at::ObserverContext*) {
  Timer& t = timer;
  if (!t.inside) return;  // the exit of a composite op
  if (t.depth > 0) {      // of a call inside the timed op: no clock read
    --t.depth;
    return;
  }
  const Clock::time_point now = Clock::now();
  t.inside = false;
  if (t.switched_off) at::enableRecordFunction(true), t.switched_off = false;
  t.seconds[static_cast<std::size_t>(t.event)] = std::chrono::duration<double>(now - t.start).count();
}

int begin(Phase phase) {
  Timer& t = timer;
  if (t.phase != Phase::kIdle) {
    fail(t, "a pass is already being observed");
    return 1;
  }
  t.error.clear();
  const auto callback = phase == Phase::kLearn ? at::RecordFunctionCallback(learn_enter, learn_exit)
                                               : at::RecordFunctionCallback(time_enter, time_exit);
  t.handle = at::addThreadLocalCallback(at::RecordFunctionCallback(callback).scopes({at::RecordScope::FUNCTION}));
  t.phase = phase;
  return 0;
}

}  // namespace

extern "C" {

/// The torch.__version__ this library was built against: the worker loads it only into that torch.
const char* neuralcost_timer_torch_version() { return NEURALCOST_TORCH_VERSION; }

/// The reason of the last failure on this thread ("" when none).
const char* neuralcost_timer_error() { return timer.error.c_str(); }

/// Starts observing a pass to learn its calls; `neuralcost_timer_end` stops.
int neuralcost_timer_learn() {
  timer.calls.clear();
  timer.open.clear();
  return begin(Phase::kLearn);
}

/// Matches the `n` op names a TorchDispatchMode saw in the learned pass; 0 when every one was
/// found in order, else 1 (the reason in neuralcost_timer_error).
int neuralcost_timer_plan(const char* const* names, int n, int switch_off_from) {
  Timer& t = timer;
  t.error.clear();
  t.plan.clear();
  t.names.assign(names, names + n);
  t.name_seen.assign(static_cast<std::size_t>(n), nullptr);
  int k = 0;
  for (std::size_t i = 0; i < t.calls.size();) {
    const Call& c = t.calls[i];
    if (k < n && c.name == t.names[static_cast<std::size_t>(k)]) {
      t.plan.push_back({k++, c.inside >= switch_off_from});
      i += 1 + static_cast<std::size_t>(c.inside);
    } else {
      t.plan.push_back({-1, false});
      ++i;
    }
  }
  if (k < n) {
    fail(t, "RecordFunction saw no call of " + t.names[static_cast<std::size_t>(k)] + " (op #" + std::to_string(k) +
                ") where the dispatch mode did");
    t.plan.clear();
    return 1;
  }
  t.seconds.assign(static_cast<std::size_t>(n), 0.0);
  return 0;
}

/// Starts timing a pass by the plan; `neuralcost_timer_end` stops.
int neuralcost_timer_time() {
  Timer& t = timer;
  if (t.plan.empty() && !t.names.empty()) {
    fail(t, "no plan: learn and plan a pass first");
    return 1;
  }
  t.next = 0;
  t.inside = false;
  t.depth = 0;
  std::fill(t.seconds.begin(), t.seconds.end(), -1.0);
  return begin(Phase::kTime);
}

/// Stops observing; 0 when the pass followed the plan (or was learned), else 1.
int neuralcost_timer_end() {
  Timer& t = timer;
  if (t.phase == Phase::kIdle) return 1;
  at::removeCallback(t.handle);
  if (t.switched_off) at::enableRecordFunction(true), t.switched_off = false;  // an op threw inside
  const Phase phase = t.phase;
  t.phase = Phase::kIdle;
  if (phase == Phase::kTime) {
    if (t.inside) fail(t, "the pass ended inside op #" + std::to_string(t.event));
    if (t.next != t.plan.size()) {
      fail(t, "the pass made " + std::to_string(t.next) + " calls outside the timed ops where the timer learned " +
                  std::to_string(t.plan.size()));
    }
    t.inside = false;
  }
  return t.error.empty() ? 0 : 1;
}

/// The calls the learned pass made, in pre-order (for tests and messages).
int neuralcost_timer_learned_calls() { return static_cast<int>(timer.calls.size()); }

/// The name of learned call `i` and, in `inside`, how many calls it made; null past the end.
const char* neuralcost_timer_learned_call(int i, int* inside) {
  if (i < 0 || static_cast<std::size_t>(i) >= timer.calls.size()) return nullptr;
  if (inside != nullptr) *inside = timer.calls[static_cast<std::size_t>(i)].inside;
  return timer.calls[static_cast<std::size_t>(i)].name.c_str();
}

/// Seconds of each timed op in the last timed pass (n = the planned names).
const double* neuralcost_timer_seconds() { return timer.seconds.data(); }

}  // extern "C"
