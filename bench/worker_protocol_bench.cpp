// The per-sample overhead of the worker protocol (docs/worker-protocol.md). For each workload,
// interleaved rounds of:
//   - `run` requests as the profiler sends them (passes_per_request() passes each): the
//     worker's own time of each pass is a sample ("sample", against "alone": the overhead in
//     the figures the tool reports); this process's clock around each request, minus its
//     passes, per pass ("trip/pass": what the protocol costs in wall time, not in samples);
//   - `run` requests of one pass ("single"): what a request per sample would give;
//   - one `bench` request: the worker loops by itself, with no protocol between passes ("alone").
// Figures are medians; percentages against "alone". Target: under 2 % for runs of 1 ms and
// more. Usage: worker_protocol_bench [ROUNDS] (default 6); figures go in the issue note.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/python_worker/worker_backend.hpp"
#include "backends/python_worker/worker_process.hpp"

using namespace neuralcost;
using json = nlohmann::json;

namespace {

struct Workload {
  std::string framework, mode, model;
  int batch;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  const int per_round = 40;
  const std::vector<Workload> workloads = {{"jax", "jit", "ff", 32},
                                           {"jax", "jit", "ff", 1024},
                                           {"jax", "jit", "transformer", 4},
                                           {"tensorflow", "function", "ff", 32},
                                           {"tensorflow", "function", "ff", 1024},
                                           {"tensorflow", "function", "transformer", 4},
                                           {"torch", "eager", "ff", 32},
                                           {"torch", "eager", "ff", 1024},
                                           {"torch", "eager", "transformer", 4}};
  fmt::print("{:<11} {:<9} {:<12} {:>6} {:>12} {:>12} {:>10} {:>12} {:>10} {:>12} {:>10}\n", "framework", "mode",
             "model", "batch", "alone", "sample", "sample %", "trip/pass", "trip %", "single", "single %");
  for (const Workload& w : workloads) {
    try {
      worker::WorkerProcess p({worker::python_interpreter(), "-m", "neuralcost_worker", w.framework},
                              {{"PYTHONPATH", worker::worker_directory()}, {"NEURALCOST_THREADS", "1"}},
                              "the " + w.framework + " worker");
      const auto timeout = std::chrono::seconds(300);
      p.request({{"cmd", "hello"}, {"protocol", worker::kProtocol}}, timeout);
      p.request({{"cmd", "build"},
                 {"model", w.model},
                 {"mode", w.mode},
                 {"batch", w.batch},
                 {"seq", 32},
                 {"width", 128},
                 {"depth", 2},
                 {"dtype", "fp32"}},
                timeout);
      p.request({{"cmd", "bench"}, {"n", 20}}, timeout);  // warm-up
      std::vector<double> alone, sample, trip, single;
      for (int r = 0; r < rounds; ++r) {
        // as the backend asks: batches of passes_per_request() passes, each pass a sample
        for (int done = 0; done < per_round;) {
          const int n = worker::passes_per_request(sample.empty() ? 0 : sample.back());
          const auto t0 = std::chrono::steady_clock::now();
          const json reply = p.request({{"cmd", "run"}, {"n", n}}, timeout);
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          double sum = 0;
          for (const json& s : reply["seconds"]) sample.push_back(s.get<double>()), sum += s.get<double>();
          trip.push_back((wall - sum) / n);
          single.push_back(p.request({{"cmd", "run"}, {"n", 1}}, timeout)["seconds"][0].get<double>());
          done += n;
        }
        const json bench = p.request({{"cmd", "bench"}, {"n", per_round}}, timeout);
        for (const json& s : bench["seconds"]) alone.push_back(s.get<double>());
      }
      const double a = median(alone), s = median(sample), t = median(trip), one = median(single);
      fmt::print(
          "{:<11} {:<9} {:<12} {:>6} {:>9.1f} us {:>9.1f} us {:>9.2f}% {:>9.1f} us {:>9.2f}% {:>9.1f} us {:>9.2f}%\n",
          w.framework, w.mode, w.model, w.batch, a * 1e6, s * 1e6, 100 * (s / a - 1), t * 1e6, 100 * t / a, one * 1e6,
          100 * (one / a - 1));
    } catch (const std::exception& e) {
      fmt::print("{:<11} {:<9} {:<12} {:>6} failed: {}\n", w.framework, w.mode, w.model, w.batch, e.what());
    }
    std::fflush(stdout);
  }
}
