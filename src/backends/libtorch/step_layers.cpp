// Per-layer times of an eager LibTorch training step (TrainingStep::time_layers, docs/profiling.md
// §4b), as the torch worker times them (python/neuralcost_worker/torch/step_layers.py): the
// forward by the RecordFunction user scopes the reference networks open per layer (the time
// between two scope boundaries goes to the innermost scope open), each noting where its stretch
// of autograd sequence numbers begins; the backward per autograd node, by a pre-hook and a
// post-hook on every node of the step's graph, for the scope open when the node was created (an
// AccumulateGrad, unnumbered, for the scope of the node that reads its weight).
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include "backends/libtorch/training_step.hpp"

namespace neuralcost::libtorch {
namespace {

using Clock = std::chrono::steady_clock;
using Key = std::pair<std::string, std::string>;  // (phase, module)

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

/// One profiled step's times and the forward's scopes, shared by the callbacks and hooks.
struct StepClock {
  std::map<Key, double> times;
  std::vector<Key> order;  ///< first charged first
  std::vector<std::string> stack;
  std::vector<std::uint64_t> starts;  ///< sequence number where each stretch begins
  std::vector<std::string> owners;    ///< the scope of each stretch
  Clock::time_point mark, node_start;

  void charge(const Key& key, double s) {
    auto [it, fresh] = times.emplace(key, 0.0);
    if (fresh) order.push_back(key);
    it->second += s;
  }
  void note() {
    starts.push_back(at::sequence_number::peek());
    owners.push_back(stack.empty() ? "" : stack.back());
  }
  std::string owner(std::uint64_t seq) const {
    const auto it = std::upper_bound(starts.begin(), starts.end(), seq);
    return it == starts.begin() ? "" : owners[static_cast<std::size_t>(it - starts.begin() - 1)];
  }
};

thread_local StepClock* step_clock = nullptr;

std::unique_ptr<at::ObserverContext> scope_enter(const at::RecordFunction& fn) {
  StepClock* c = step_clock;
  if (!c) return nullptr;
  const auto t = Clock::now();
  c->charge({"forward", c->stack.empty() ? "" : c->stack.back()}, seconds(c->mark, t));
  c->stack.emplace_back(fn.name());
  c->note();
  c->mark = Clock::now();
  return nullptr;
}

void scope_exit(const at::RecordFunction&, at::ObserverContext*) {
  StepClock* c = step_clock;
  if (!c || c->stack.empty()) return;
  const auto t = Clock::now();
  c->charge({"forward", c->stack.back()}, seconds(c->mark, t));
  c->stack.pop_back();
  c->note();
  c->mark = Clock::now();
}

struct StartHook final : torch::autograd::FunctionPreHook {
  explicit StartHook(StepClock& c) : clock(c) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    clock.node_start = Clock::now();
    return grads;
  }
  StepClock& clock;
};

struct StopHook final : torch::autograd::FunctionPostHook {
  StopHook(StepClock& c, std::string module) : clock(c), module(std::move(module)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    clock.charge({"backward", module}, seconds(clock.node_start, Clock::now()));
    return outputs;
  }
  StepClock& clock;
  std::string module;
};

/// Hooks every node behind `loss` with its timers; returns them, to take the hooks off after.
std::vector<std::shared_ptr<torch::autograd::Node>> watch(const at::Tensor& loss, StepClock& c) {
  std::vector<std::shared_ptr<torch::autograd::Node>> seen;
  std::unordered_set<const torch::autograd::Node*> known;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::string>> todo = {{loss.grad_fn(), "loss"}};
  while (!todo.empty()) {
    auto [node, consumer] = std::move(todo.back());
    todo.pop_back();
    if (!node || !known.insert(node.get()).second) continue;
    seen.push_back(node);
    const std::uint64_t seq = node->sequence_nr();
    const std::string owner = seq == UINT64_MAX ? consumer : c.owner(seq);
    node->add_pre_hook(std::make_unique<StartHook>(c));
    node->add_post_hook(std::make_unique<StopHook>(c, owner));
    for (const torch::autograd::Edge& e : node->next_edges()) todo.emplace_back(e.function, owner);
  }
  return seen;
}

/// Takes this step's hooks off the nodes (an AccumulateGrad outlives the step while its weight
/// lives: a later step must not run them).
void unwatch(std::vector<std::shared_ptr<torch::autograd::Node>>& nodes) {
  for (const auto& node : nodes) {
    auto& pre = node->pre_hooks();
    pre.erase(std::remove_if(pre.begin(), pre.end(), [](const auto& h) { return dynamic_cast<StartHook*>(h.get()); }),
              pre.end());
    auto& post = node->post_hooks();
    post.erase(std::remove_if(post.begin(), post.end(), [](const auto& h) { return dynamic_cast<StopHook*>(h.get()); }),
               post.end());
  }
  nodes.clear();
}

}  // namespace

LayerTiming TrainingStep::time_layers(int runs) {
  LayerTiming t;
  t.step_phases = true;
  std::vector<std::map<Key, double>> steps;
  std::vector<Key> order;
  for (int run = 0; run < runs; ++run) {
    const auto p0 = Clock::now();
    step();
    t.plain_wall_seconds.push_back(seconds(p0, Clock::now()));
    StepClock c;
    std::vector<std::shared_ptr<torch::autograd::Node>> hooked;
    const auto t0 = Clock::now();
    const auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(scope_enter, scope_exit).scopes({at::RecordScope::USER_SCOPE}));
    try {
      step_clock = &c;
      c.mark = Clock::now();
      std::optional<CpuAutocast> autocast;  // forward and loss in the step's precision
      autocast.emplace(mixed_);
      const at::Tensor out = forward_(inputs_);
      step_clock = nullptr;
      at::removeCallback(handle);
      c.stack = {"loss"};
      c.note();
      const auto l0 = Clock::now();
      at::Tensor loss = loss_of(out);
      autocast.reset();
      c.charge({"forward", "loss"}, seconds(l0, Clock::now()));
      hooked = watch(loss, c);
      loss.backward();
      unwatch(hooked);
      const auto o0 = Clock::now();
      optimizer_->step();
      zero_grad();
      const auto o1 = Clock::now();
      c.charge({"optimizer", ""}, seconds(o0, o1));
      t.wall_seconds.push_back(seconds(t0, o1));
      loss.item<double>();
    } catch (...) {
      if (step_clock) at::removeCallback(handle);
      step_clock = nullptr;
      unwatch(hooked);
      throw;
    }
    for (const Key& k : c.order) {
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
    }
    steps.push_back(std::move(c.times));
  }
  for (const Key& k : order) {
    t.event_names.push_back(k.first);
    t.event_modules.push_back(k.second);
    t.seconds.emplace_back();
    for (const auto& s : steps) {
      const auto it = s.find(k);
      t.seconds.back().push_back(it == s.end() ? 0.0 : it->second);
    }
  }
  return t;
}

}  // namespace neuralcost::libtorch
