// libFuzzer target for what a worker process writes back (docs/worker-protocol.md): any bytes,
// read as reply lines, must end in a reply or a neuralcost::Error, and every capture reply among
// them in an op graph whose analysis, training step and memory ledger end the same way. Anything
// else (another exception escaping, a sanitizer report, a hang) is a bug: a worker is another
// process, and a broken or hostile one must not crash the tool. The seeds
// (tests/fuzz/worker_reply_seeds) are real conversations with the jax, tensorflow and torch
// workers: hello, build, capture, run, memory, quit.
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/capture/captured_json.hpp"
#include "backends/capture/captured_op.hpp"
#include "backends/python_worker/worker_reply.hpp"
#include "fuzz_common.hpp"
#include "neuralcost/core/error.hpp"

namespace {

void take_reply(const std::string& line) {
  const nlohmann::json reply = neuralcost::worker::decode_reply(line, "fuzz worker", "capture");
  const auto ops = reply.find("ops");
  if (ops == reply.end()) return;
  neuralcost::fuzz::analyze_all(
      neuralcost::capture::graph_from_captured(neuralcost::capture::captured_ops_from_json(*ops, "fuzz"), "fuzz"),
      true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // one reply per line, as the tool reads them off the pipe
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    try {
      take_reply(std::string(text.substr(start, end - start)));
    } catch (const neuralcost::Error&) {
      // a clear rejection (WorkerFailure is one) is the expected outcome for most inputs
    }
    start = end + 1;
  }
  return 0;
}
