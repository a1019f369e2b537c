// libtorch_alloc_trace MODEL BATCH: a diagnostic, not a test. Runs the LibTorch training step of a
// reference network (eager, Adam, fp32, gradients set to none) like `profile --train`, and lists
// every CPU block the counting allocator sees during the second step with the op that allocated
// it (the innermost RecordFunction scope: an ATen op, or an autograd node in the backward) and
// the phase; then the blocks alive at the step's peak. Used to compare LibTorch's saved tensors
// with the memory ledger (docs/training-memory.md "Measured").
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/libtorch/counting_allocator.hpp"
#include "backends/libtorch/reference_modules.hpp"

namespace {

using neuralcost::libtorch::allocator_count;

thread_local std::vector<std::string> scopes;
std::string phase = "setup";
bool tracing = false;

struct Block {
  std::int64_t bytes = 0;
  std::string op, phase;
  std::size_t seq = 0;
};
std::map<const void*, Block> live;
std::size_t seq = 0;
std::uint64_t peak = 0;
std::vector<Block> at_peak;
std::string peak_label;

void hook(const void* ptr, std::int64_t bytes) {
  if (!tracing) return;
  const std::uint64_t current = allocator_count().current_bytes;
  std::string op = scopes.empty() ? "-" : scopes.back();
  if (scopes.size() > 1) op = scopes.front() + " > " + op;
  if (bytes > 0) {
    live[ptr] = Block{bytes, op, phase, ++seq};
  } else {
    live.erase(ptr);
  }
  std::printf("%6zu %-10s %+10lld %10llu  %s\n", seq, phase.c_str(), static_cast<long long>(bytes),
              static_cast<unsigned long long>(current), op.c_str());
  if (bytes > 0 && current > peak) {
    peak = current;
    peak_label = phase + " " + op;
    at_peak.clear();
    for (const auto& [p, b] : live) at_peak.push_back(b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: libtorch_alloc_trace MODEL BATCH\n");
    return 1;
  }
  namespace lt = neuralcost::libtorch;
  lt::install_counting_allocator();
  at::addGlobalCallback(at::RecordFunctionCallback(
                            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
                              scopes.emplace_back(fn.name());
                              return nullptr;
                            },
                            [](const at::RecordFunction&, at::ObserverContext*) { scopes.pop_back(); })
                            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  neuralcost::ModelRequest r;
  r.model = argv[1];
  r.batch = std::stoll(argv[2]);
  auto net = lt::make_reference_net(r);
  net->train();
  at::Tensor x = lt::reference_input(r);
  std::vector<at::Tensor> params;
  for (auto& p : net->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-3));
  at::Tensor target;
  const auto loss_of = [&](const at::Tensor& y) {
    namespace F = torch::nn::functional;
    if (y.dim() == 2) {
      if (!target.defined()) target = torch::randint(0, y.size(1), {y.size(0)}, torch::kInt64);
      return F::cross_entropy(y, target);
    }
    if (!target.defined()) target = torch::randn(y.sizes());
    return F::mse_loss(y, target);
  };
  lt::set_allocation_hook(&hook);
  for (int step = 0; step < 2; ++step) {
    tracing = step == 1;
    const std::uint64_t start = allocator_count().current_bytes;
    if (tracing) std::printf("start %llu B\n", static_cast<unsigned long long>(start));
    phase = "forward";
    at::Tensor loss = loss_of(net->forward(x));
    phase = "backward";
    loss.backward();
    phase = "optimizer";
    adam.step();
    phase = "zero_grad";
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    loss = at::Tensor();
    if (tracing) {
      std::printf("end %llu B; peak %llu B at %s; blocks alive at the peak:\n",
                  static_cast<unsigned long long>(allocator_count().current_bytes),
                  static_cast<unsigned long long>(peak), peak_label.c_str());
      std::int64_t sum = 0;
      for (const Block& b : at_peak) {
        sum += b.bytes;
        std::printf("  #%-5zu %-10s %10lld  %s\n", b.seq, b.phase.c_str(), static_cast<long long>(b.bytes),
                    b.op.c_str());
      }
      std::printf("  step blocks %lld B + start %llu B\n", static_cast<long long>(sum),
                  static_cast<unsigned long long>(start));
    }
  }
  lt::set_allocation_hook(nullptr);
  return 0;
}
