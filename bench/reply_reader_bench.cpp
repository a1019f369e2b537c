// How the worker reply reader (WorkerProcess::request) scales with the length of a reply line.
// A stand-in worker (python3, no framework) answers each request with one line of N MB; the
// round trip is timed here, and decode_reply (JSON parsing) alone on the same line, so that the
// pipe reading is their difference. A reader that rescans its buffer on every read is quadratic
// (400 MB took 46 s); a linear one keeps "read per MB" flat across sizes.
// Usage: reply_reader_bench [MAX_MB] (default 400; sizes 1, 10, 100, MAX_MB). Figures go in the
// issue note.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/python_worker/worker_process.hpp"
#include "backends/python_worker/worker_reply.hpp"

using namespace neuralcost;
using Clock = std::chrono::steady_clock;

namespace {

// answers every request line with {"ok":true,"pad":"aaa..."} of the requested length
constexpr const char* kStandIn = R"(
import sys
for line in sys.stdin:
    n = int(line.split('"n":')[1].split(',')[0].split('}')[0])
    sys.stdout.write('{"ok":true,"pad":"' + 'a' * n + '"}\n')
    sys.stdout.flush()
)";

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int max_mb = argc > 1 ? std::max(1, std::atoi(argv[1])) : 400;
  std::vector<int> sizes = {1, 10, 100};
  if (max_mb > 100) sizes.push_back(max_mb);
  worker::WorkerProcess p({"/usr/bin/python3", "-c", kStandIn}, {}, "stand-in worker");
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>14}\n", "MB", "round trip", "parse", "read", "read per MB");
  for (const int mb : sizes) {
    const std::size_t n = static_cast<std::size_t>(mb) << 20;
    // best of three: the machine is shared
    double trip = 1e9, parse = 1e9;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      const nlohmann::json reply = p.request({{"cmd", "pad"}, {"n", n}}, std::chrono::seconds(600));
      trip = std::min(trip, since(t0));
      const std::string line = reply.dump();
      const auto t1 = Clock::now();
      worker::decode_reply(line, "stand-in worker", "pad");
      parse = std::min(parse, since(t1));
    }
    const double read = std::max(0.0, trip - parse);
    fmt::print("{:>8} {:>10.3f} s {:>10.3f} s {:>10.3f} s {:>11.2f} ms\n", mb, trip, parse, read, 1e3 * read / mb);
  }
  p.stop();
  return 0;
}
