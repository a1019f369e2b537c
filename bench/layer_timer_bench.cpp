// The LibTorch per-layer timer's cost per op (issue 16 item 4), independent of a whole model's
// noise: passes of K small top-level ops (each calling nested ops, as aten::linear calls t and
// addmm) run plain and under the timer (libtorch::time_calls, plain and timed passes
// interleaved), and, for where the cost went, under a no-op RecordFunction callback that, like
// the timer before issue 16, runs for every nested op too. Prints the median cost per top-level op
// in ns and the 1-minute load average: figures taken with the load above the CPU count are noise.
//   ./build/bench/layer_timer_bench [passes]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "backends/libtorch/capture.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one;
  f >> one;
  return one;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Median of (pass under a no-op callback for every op, nested ones too) - (plain pass).
double every_op_callback_seconds(const std::function<void()>& pass, int passes) {
  std::vector<double> plain, observed;
  for (int i = 0; i < passes; ++i) {
    plain.push_back(seconds_of(pass));
    auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> { return nullptr; },
            [](const at::RecordFunction&, at::ObserverContext*) {})
            .scopes({at::RecordScope::FUNCTION}));
    observed.push_back(seconds_of(pass));
    at::removeCallback(handle);
  }
  return median(observed) - median(plain);
}

}  // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::stoi(argv[1]) : 2000;
  torch::NoGradGuard no_grad;
  at::set_num_threads(1);
  const at::Tensor x = torch::randn({4, 16});
  const at::Tensor w = torch::randn({16, 16});
  const at::Tensor b = torch::randn({16});
  auto lstm = torch::nn::LSTM(torch::nn::LSTMOptions(16, 16).num_layers(2).batch_first(true));
  lstm->eval();
  const at::Tensor seq = torch::randn({1, 16, 16});
  struct Case {
    const char* name;
    int ops;  // top-level ops per pass
    std::function<void()> pass;
  };
  const std::vector<Case> cases = {
      {"100 x aten::relu (few nested calls)", 100,
       [&] {
         for (int i = 0; i < 100; ++i) (void)at::relu(x);
       }},
      {"100 x aten::linear (t, addmm nested)", 100,
       [&] {
         for (int i = 0; i < 100; ++i) (void)at::linear(x, w, b);
       }},
      {"1 x aten::lstm (2 layers x 16 steps nested)", 1, [&] { (void)lstm->forward(seq); }},
  };
  std::printf("passes %d, 1 thread; load average (1 min) before: %s\n", passes, load_average().c_str());
  std::printf("%-45s %12s %14s %18s\n", "pass", "plain", "timer ns/op", "every-op ns/op");
  for (const Case& c : cases) {
    for (int i = 0; i < 50; ++i) c.pass();  // warm up
    const neuralcost::LayerTiming t = neuralcost::libtorch::time_calls(c.pass, passes);
    const double plain = median(t.plain_wall_seconds);
    const double timer = (median(t.wall_seconds) - plain) / c.ops;
    const double every = every_op_callback_seconds(c.pass, passes) / c.ops;
    std::printf("%-45s %10.2fus %14.0f %18.0f\n", c.name, plain * 1e6, timer * 1e9, every * 1e9);
  }
  std::printf("load average (1 min) after: %s\n", load_average().c_str());
  return 0;
}
