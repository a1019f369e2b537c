// The torch worker's per-layer timer of an eager training step on the CPU (issue 27 item 7;
// docs/profiling.md §4b), in the same library as torch_timer.cpp: RecordFunction observers in
// place of the Python module hooks and autograd-node hooks of step_layers.py, which cost 20-30 %
// of a small step (ff, rnn).
//
//   learn    - one step's forward and loss run with Python module hooks that only say whose the
//              next calls are (neuralcost_step_mark); the observer records each top-level
//              dispatcher call (name) and the owner running at its entry: the innermost module.
//   forward  - a timed step's forward and loss: each top-level call is timed and charged to its
//              learned owner, and the autograd sequence number at its entry is noted, so that
//              every node it creates is known to be its owner's (the numbers rise per thread).
//   backward - the backward: each autograd node runs under a BACKWARD_FUNCTION scope carrying its
//              sequence number; it is timed and charged to the owner of the call that created it.
//              An AccumulateGrad is unnumbered: the engine's ready queue runs it right after the
//              node that produced its gradient (it has the largest priority), so it is charged to
//              that node's owner: the module whose forward read the weight, as step_layers.py does.
// Nodes run one at a time on the thread that called backward (the CPU engine), so its callback
// sees them all; a GPU's nodes run on device threads, and the worker keeps its Python
// hooks there. Time between calls (Python glue) and between nodes (the engine) is in no row.
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kIdle, kLearn, kForward, kBackward };

struct StepTimer {
  Phase phase = Phase::kIdle;
  at::CallbackHandle handle = 0;
  int owners = 0;
  int current = 0;  ///< the owner whose calls come next (learning)
  // learned: the top-level calls of the forward and loss
  std::vector<std::string> names;
  std::vector<int> owner_of_call;
  std::vector<int> inside;  ///< calls each made inside it
  std::vector<const char*> name_seen;
  // a timed step
  bool switched_off = false;  ///< RecordFunction is off inside the call being timed
  std::size_t next = 0;
  int depth = 0;
  Clock::time_point start;
  std::vector<std::uint64_t> first_sequence;  ///< by call: the sequence number at its entry
  int last_owner = 0;                         ///< of the last numbered node (for AccumulateGrad)
  int node_owner = 0;
  std::vector<double> forward_seconds, backward_seconds;
  std::vector<int> nodes;
  std::string error;
};

thread_local StepTimer step;

void fail(StepTimer& t, std::string why) {
  if (t.error.empty()) t.error = std::move(why);
}

std::unique_ptr<at::ObserverContext> learn_enter(const at::RecordFunction& fn) {
  StepTimer& t = step;
  if (t.depth++ == 0) {
    t.names.emplace_back(fn.name());
    t.owner_of_call.push_back(t.current);
    t.inside.push_back(0);
  } else {
    ++t.inside.back();
  }
  return nullptr;
}

void learn_exit(const at::RecordFunction&, at::ObserverContext*) {
  if (step.depth > 0) --step.depth;
}

/// A call that makes this many calls inside or more runs with RecordFunction switched off for
/// the thread: switching off and on costs about as much as that many callbacks (native_timer.py).
constexpr int kSwitchOffFrom = 3;

std::unique_ptr<at::ObserverContext> forward_enter(const at::RecordFunction& fn) {
  StepTimer& t = step;
  if (t.depth++ > 0) return nullptr;
  if (t.next >= t.names.size()) {
    fail(t, std::string("the step's forward called ") + fn.name() + " after the calls the timer learned");
    return nullptr;
  }
  const char*& seen = t.name_seen[t.next];
  if (seen != fn.name()) {  // operator names live in the dispatcher's registry: one pointer each
    if (t.names[t.next] != fn.name()) {
      fail(t, "call #" + std::to_string(t.next) + " of the step's forward was " + t.names[t.next] +
                  " when the timer learned it, " + fn.name() + " now");
    }
    seen = fn.name();
  }
  t.first_sequence[t.next] = at::sequence_number::peek();
  t.switched_off = t.inside[t.next] >= kSwitchOffFrom;
  if (t.switched_off) at::enableRecordFunction(false);  // its calls inside cost no callback
  t.start = Clock::now();
  return nullptr;
}

void forward_exit(const at::RecordFunction&, at::ObserverContext*) {
  StepTimer& t = step;
  if (t.depth == 0 || --t.depth > 0) return;
  const Clock::time_point now = Clock::now();
  if (t.switched_off) at::enableRecordFunction(true), t.switched_off = false;
  if (t.next < t.names.size()) {
    t.forward_seconds[static_cast<std::size_t>(t.owner_of_call[t.next])] +=
        std::chrono::duration<double>(now - t.start).count();
  }
  ++t.next;
}

/// The owner of the call that created the node numbered `seq`: the last call entered at or before it.
int owner_of_node(const StepTimer& t, std::int64_t seq) {
  if (seq < 0) return t.last_owner;  // AccumulateGrad: right after the node that produced its gradient
  const auto end = t.first_sequence.begin() + static_cast<std::ptrdiff_t>(std::min(t.next, t.names.size()));
  const auto it = std::upper_bound(t.first_sequence.begin(), end, static_cast<std::uint64_t>(seq));
  if (it == t.first_sequence.begin()) return 0;  // before the forward: the network's own
  return t.owner_of_call[static_cast<std::size_t>(it - t.first_sequence.begin() - 1)];
}

std::unique_ptr<at::ObserverContext> backward_enter(const at::RecordFunction& fn) {
  StepTimer& t = step;
  if (t.phase != Phase::kBackward) return nullptr;  // a global callback: another thread's node
  if (t.depth++ > 0) return nullptr;                // a node run inside another (reentrant backward): the outer's
  t.node_owner = owner_of_node(t, fn.seqNr());
  if (fn.seqNr() >= 0) t.last_owner = t.node_owner;
  t.start = Clock::now();
  return nullptr;
}

void backward_exit(const at::RecordFunction&, at::ObserverContext*) {
  StepTimer& t = step;
  if (t.phase != Phase::kBackward || t.depth == 0 || --t.depth > 0) return;
  const Clock::time_point now = Clock::now();
  const auto i = static_cast<std::size_t>(t.node_owner);
  t.backward_seconds[i] += std::chrono::duration<double>(now - t.start).count();
  ++t.nodes[i];
}

int observe(Phase phase) {
  StepTimer& t = step;
  if (t.handle != 0) at::removeCallback(t.handle), t.handle = 0;
  if (t.switched_off) at::enableRecordFunction(true), t.switched_off = false;  // a call threw inside
  t.depth = 0;
  if (phase == Phase::kIdle) {
    t.phase = phase;
    return 0;
  }
  const at::RecordScope scope =
      phase == Phase::kBackward ? at::RecordScope::BACKWARD_FUNCTION : at::RecordScope::FUNCTION;
  at::RecordFunctionCallback callback = phase == Phase::kLearn ? at::RecordFunctionCallback(learn_enter, learn_exit)
                                        : phase == Phase::kForward
                                            ? at::RecordFunctionCallback(forward_enter, forward_exit)
                                            : at::RecordFunctionCallback(backward_enter, backward_exit);
  // the backward's callback is global: the engine sets the graph task's thread-local state around
  // every node, and a thread-local callback there is copied (and its cache rebuilt) twice a node,
  // about 1.5 µs; a global one costs nothing there, and other threads' nodes are told apart by
  // this thread's phase
  t.handle = phase == Phase::kBackward ? at::addGlobalCallback(callback.scopes({scope}))
                                       : at::addThreadLocalCallback(callback.scopes({scope}));
  t.phase = phase;
  return 0;
}

}  // namespace

extern "C" {

/// The reason of the last failure on this thread ("" when none).
const char* neuralcost_step_error() { return step.error.c_str(); }

/// Starts learning a step's forward and loss with `owners` owners (0: the network's own calls,
/// outside every module); neuralcost_step_mark says whose the next calls are.
int neuralcost_step_learn(int owners) {
  StepTimer& t = step;
  t.error.clear();
  if (t.phase != Phase::kIdle || owners < 1) {
    fail(t, t.phase != Phase::kIdle ? "a step is already being observed" : "no owners");
    return 1;
  }
  t.owners = owners;
  t.current = 0;
  t.names.clear();
  t.owner_of_call.clear();
  t.inside.clear();
  return observe(Phase::kLearn);
}

/// While learning: the calls from the next one on are owner `owner`'s.
void neuralcost_step_mark(int owner) {
  if (owner >= 0 && owner < step.owners) step.current = owner;
}

/// Starts timing a step's forward and loss by the learned calls.
int neuralcost_step_forward() {
  StepTimer& t = step;
  t.error.clear();
  if (t.phase != Phase::kIdle || t.names.empty()) {
    fail(t, t.phase != Phase::kIdle ? "a step is already being observed" : "learn a step before timing one");
    return 1;
  }
  t.next = 0;
  t.last_owner = 0;
  t.name_seen.resize(t.names.size(), nullptr);
  t.first_sequence.assign(t.names.size(), 0);
  t.forward_seconds.assign(static_cast<std::size_t>(t.owners), 0.0);
  t.backward_seconds.assign(static_cast<std::size_t>(t.owners), 0.0);
  t.nodes.assign(static_cast<std::size_t>(t.owners), 0);
  return observe(Phase::kForward);
}

/// Ends the forward (every learned call must have run) and starts timing the backward's nodes.
int neuralcost_step_backward() {
  StepTimer& t = step;
  if (t.phase != Phase::kForward) {
    fail(t, "the step's forward is not being timed");
    return 1;
  }
  if (t.depth != 0) fail(t, "the step's forward ended inside call #" + std::to_string(t.next));
  if (t.next != t.names.size()) {
    fail(t, "the step's forward made " + std::to_string(t.next) + " top-level calls where the timer learned " +
                std::to_string(t.names.size()));
  }
  observe(Phase::kBackward);
  return t.error.empty() ? 0 : 1;
}

/// Stops observing; 0 when the step followed what was learned, else 1.
int neuralcost_step_end() {
  StepTimer& t = step;
  if (t.phase == Phase::kIdle) {
    fail(t, "no step is being observed");
    return 1;
  }
  if (t.phase == Phase::kLearn && t.names.empty()) fail(t, "the step's forward made no dispatcher calls");
  if (t.phase == Phase::kForward) fail(t, "the step ended before its backward");
  observe(Phase::kIdle);
  return t.error.empty() ? 0 : 1;
}

/// The calls the learned forward made (for messages and tests).
int neuralcost_step_learned_calls() { return static_cast<int>(step.names.size()); }

/// Seconds of the last timed step by owner: its forward calls, its backward nodes; nodes timed.
const double* neuralcost_step_forward_seconds() { return step.forward_seconds.data(); }
const double* neuralcost_step_backward_seconds() { return step.backward_seconds.data(); }
const int* neuralcost_step_nodes() { return step.nodes.data(); }

}  // extern "C"
