// A model in a worker process (see worker_backend.hpp).
#include "backends/python_worker/worker_backend.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "backends/capture/captured_json.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::worker {
namespace {

using json = nlohmann::json;
using Seconds = std::chrono::duration<double>;
constexpr int kProtocol = 1;
constexpr double kHelloSeconds = 120;  // importing a framework on a busy machine

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

void add_strings(std::map<std::string, std::string>& to, const json& from, const std::string& prefix) {
  if (!from.is_object()) return;
  for (const auto& [k, v] : from.items()) to[prefix + k] = v.is_string() ? v.get<std::string>() : v.dump();
}

/// The durations (seconds, 0 to 10^6) in `array`, a reply's field `what`; kDataLoss naming it
/// when they are not.
std::vector<double> durations_in(const json& array, const std::string& what) {
  if (!array.is_array()) throw Error(ErrorCode::kDataLoss, fmt::format("the worker's reply has no '{}' array", what));
  std::vector<double> out;
  for (const json& v : array) {
    if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 1e6) {
      throw Error(ErrorCode::kDataLoss, fmt::format("the worker's reply has an impossible duration in '{}': {}", what, v.dump()));
    }
    out.push_back(v.get<double>());
  }
  return out;
}

/// `reply[field]` as durations, `n` of them unless n is 0.
std::vector<double> durations(const json& reply, const char* field, std::size_t n = 0) {
  const auto it = reply.find(field);
  std::vector<double> out = durations_in(it == reply.end() ? json() : *it, field);
  if (n > 0 && out.size() != n) {
    throw Error(ErrorCode::kDataLoss, fmt::format("the worker's reply has {} durations in '{}', not {}", out.size(), field, n));
  }
  return out;
}

class WorkerModel final : public PreparedModel {
 public:
  WorkerModel(const std::string& framework, const ModelRequest& request, const std::string& mode)
      : timeout_(request.worker_timeout_seconds),
        process_({python_interpreter(), "-m", "neuralcost_worker", framework},
                 {{"PYTHONPATH", worker_directory()},
                  {"NEURALCOST_THREADS", std::to_string(request.threads)},
                  {"PYTHONUNBUFFERED", "1"}},
                 fmt::format("the {} worker", framework)) {
    const json hello = process_.request({{"cmd", "hello"}, {"protocol", kProtocol}}, Seconds(std::max(kHelloSeconds, timeout_)));
    if (hello.value("protocol", -1) != kProtocol || hello.value("framework", std::string()) != framework) {
      throw Error(ErrorCode::kDataLoss, fmt::format("the {} worker answered hello with protocol {} and framework '{}'; "
                                                    "expected protocol {} and '{}'",
                                                    framework, hello.value("protocol", -1),
                                                    hello.value("framework", std::string()), kProtocol, framework));
    }
    add_strings(environment_, hello["environment"], "");
    json shapes = json::array();
    for (const Shape& s : request.input_shapes) shapes.push_back(s);
    const json built = process_.request({{"cmd", "build"},      {"model", request.model},
                                         {"mode", mode},         {"batch", request.batch},
                                         {"seq", request.seq},   {"width", request.width},
                                         {"depth", request.depth}, {"dtype", std::string(dtype_name(request.dtype))},
                                         {"input_shapes", shapes}},
                                        Seconds(timeout_));
    name_ = built.value("name", request.model);
    add_strings(environment_, built["environment"], "");
    environment_["model_origin"] = built.value("origin", std::string("unknown"));
    environment_["framework_mode"] = mode;
    environment_["framework_parameters"] = std::to_string(built.value("parameters", std::int64_t{-1}));
    environment_["worker_protocol"] = std::to_string(kProtocol);
    environment_["worker_command"] = fmt::format("{} -m neuralcost_worker {} (PYTHONPATH={})", python_interpreter(),
                                                 framework, worker_directory());
    sync_ = framework == "jax"          ? "jax.block_until_ready on the outputs, inside the worker"
            : framework == "tensorflow" ? "the result materialised (.numpy()), inside the worker"
                                        : "torch.cuda.synchronize on a GPU, nothing on the CPU, inside the worker";
  }

  void run() override {
    if (pending_.empty()) {
      const int n = last_ ? passes_per_request(*last_) : 1;
      const auto start = std::chrono::steady_clock::now();
      const json reply = process_.request({{"cmd", "run"}, {"n", n}}, Seconds(timeout_ * n));
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double sum = 0;
      for (double s : durations(reply, "seconds", static_cast<std::size_t>(n))) pending_.push_back(s), sum += s;
      overhead_.push_back((wall - sum) / n);
      passes_ = n;
      // the framework's evidence of what the passes ran (compiled programs; protocol 1, optional)
      if (const auto it = reply.find("execution"); it != reply.end()) add_strings(environment_, *it, "execution.");
    }
    last_ = pending_.front();
    pending_.pop_front();
  }

  std::optional<double> last_run_seconds() const override { return last_; }

  double page_faults_per_run(int iterations) override {
    const json reply = process_.request({{"cmd", "run"}, {"n", iterations}}, Seconds(timeout_ * iterations));
    return reply.value("page_faults", 0.0) / iterations;
  }

  OpGraph captured_graph() override {
    const json reply = process_.request({{"cmd", "capture"}}, Seconds(timeout_));
    environment_["capture_source"] = reply.value("source", std::string("unknown"));
    return capture::graph_from_captured(
        capture::captured_ops_from_json(reply.contains("ops") ? reply["ops"] : json(), "capture reply of " + name_), name_);
  }

  std::map<std::string, std::string> environment() const override {
    std::map<std::string, std::string> env = environment_;
    if (!overhead_.empty()) {
      std::vector<double> o = overhead_;
      std::nth_element(o.begin(), o.begin() + o.size() / 2, o.end());
      env["worker_passes_per_request"] = std::to_string(passes_);
      env["protocol_overhead"] = fmt::format(
          "{:.1f} us per pass (median over {} run requests of their round trip minus the passes' own times, "
          "divided by the passes they carried); not part of the samples",
          o[o.size() / 2] * 1e6, o.size());
    }
    try {
      const json reply = process_.request({{"cmd", "memory"}}, Seconds(timeout_));
      add_strings(env, reply["telemetry"], "memory.");
    } catch (const Error& e) {
      env["memory"] = std::string("unavailable: ") + e.what();
    }
    return env;
  }

  std::string synchronisation() const override { return sync_; }

  LayerTiming profile_layers(int runs) override {
    const json reply = process_.request({{"cmd", "layers"}, {"n", runs}}, Seconds(timeout_ * runs));
    LayerTiming t;
    const auto events = reply.find("events"), seconds = reply.find("seconds");
    if (events == reply.end() || seconds == reply.end() || !events->is_array() || !seconds->is_array() ||
        events->size() != seconds->size()) {
      throw Error(ErrorCode::kDataLoss, "the worker's layers reply needs 'events' and 'seconds' of the same length");
    }
    for (std::size_t e = 0; e < events->size(); ++e) {
      t.event_names.push_back((*events)[e].is_string() ? (*events)[e].get<std::string>() : "?");
      t.seconds.push_back(durations_in((*seconds)[e], fmt::format("seconds[{}]", e)));
    }
    t.wall_seconds = durations(reply, "wall");
    t.plain_wall_seconds = durations(reply, "plain");
    return t;
  }

 private:
  double timeout_;
  mutable WorkerProcess process_;
  std::string name_;
  std::map<std::string, std::string> environment_;
  std::string sync_;
  std::optional<double> last_;
  std::deque<double> pending_;    ///< passes of the last run request not yet handed out
  std::vector<double> overhead_;  ///< per run request: (round trip - passes) / passes
  int passes_ = 0;
};

}  // namespace

int passes_per_request(double last_seconds) {
  if (!(last_seconds > 0)) return 1;
  return static_cast<int>(std::clamp(0.025 / last_seconds, 1.0, 1000.0));
}

std::string library_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&library_directory), &info) == 0 || !info.dli_fname) return ".";
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::weakly_canonical(info.dli_fname, ec);
  return (ec ? std::filesystem::path(info.dli_fname) : path).parent_path().string();
}

namespace {

/// `name` as an executable: itself when it has a slash, else the first match on $PATH; empty
/// when there is none.
std::string executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
  std::stringstream path(env_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string bundled_python() { return library_directory() + "/neuralcost/python-env/bin/python3"; }

}  // namespace

std::string python_interpreter() {
  if (const char* python = std::getenv("NEURALCOST_PYTHON"); python != nullptr && *python != '\0') return python;
  if (::access(bundled_python().c_str(), X_OK) == 0) return bundled_python();
  const std::string found = executable(NEURALCOST_DEFAULT_PYTHON);
  return found.empty() ? std::string(NEURALCOST_DEFAULT_PYTHON) : found;
}

std::string worker_directory() { return env_or("NEURALCOST_WORKER_DIR", library_directory() + "/neuralcost/python"); }

WorkerBackend::WorkerBackend(std::string name, std::string framework, std::string description,
                             std::vector<std::string> modes, std::string compiled_mode)
    : name_(std::move(name)), framework_(std::move(framework)), description_(std::move(description)),
      modes_(std::move(modes)), compiled_mode_(std::move(compiled_mode)) {}

std::optional<std::string> WorkerBackend::unavailable_reason() const {
  const std::string python = python_interpreter();
  if (executable(python).empty()) {
    const char* set = std::getenv("NEURALCOST_PYTHON");
    if (set != nullptr && *set != '\0') {
      return fmt::format("no Python environment at {} ($NEURALCOST_PYTHON)", python);
    }
    return fmt::format("no Python environment: $NEURALCOST_PYTHON is unset, {} does not exist and '{}' is not on "
                       "PATH (set NEURALCOST_PYTHON to the interpreter of an environment made from "
                       "python/requirements.txt; in a source tree, scripts/python-env.sh makes .venv)",
                       bundled_python(), NEURALCOST_DEFAULT_PYTHON);
  }
  const std::string package = worker_directory() + "/neuralcost_worker/__main__.py";
  if (::access(package.c_str(), R_OK) != 0) {
    return fmt::format("the worker package is not at {} (set NEURALCOST_WORKER_DIR)", package);
  }
  return std::nullopt;
}

std::vector<std::string> WorkerBackend::modes() const {
  std::vector<std::string> m = modes_;
  m.push_back("compiled");
  return m;
}

std::unique_ptr<PreparedModel> WorkerBackend::prepare(const ModelRequest& request, const std::string& mode) const {
  const std::string own = mode == "compiled" ? compiled_mode_ : mode;
  if (std::find(modes_.begin(), modes_.end(), own) == modes_.end()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown mode '{}'", name_, mode));
  }
  if (!(request.worker_timeout_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument, "--worker-timeout must be more than 0 seconds");
  }
  if (auto why = unavailable_reason()) throw Error(ErrorCode::kUnimplemented, fmt::format("{}: {}", name_, *why));
  return std::make_unique<WorkerModel>(framework_, request, own);
}

}  // namespace neuralcost::worker
