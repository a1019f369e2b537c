// A model in a worker process (see worker_backend.hpp).
#include "backends/python_worker/worker_backend.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "backends/capture/captured_json.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/process_memory.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost::worker {
namespace {

using json = nlohmann::json;
using Seconds = std::chrono::duration<double>;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

/// A reply's field, or null when the worker left it out (operator[] on a const json with a
/// missing key is undefined behaviour).
const json& member(const json& reply, const char* key) {
  static const json none;
  const auto it = reply.find(key);
  return it == reply.end() ? none : *it;
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
      throw Error(ErrorCode::kDataLoss,
                  fmt::format("the worker's reply has an impossible duration in '{}': {}", what, v.dump()));
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
    throw Error(ErrorCode::kDataLoss,
                fmt::format("the worker's reply has {} durations in '{}', not {}", out.size(), field, n));
  }
  return out;
}

/// Starts a worker for `framework` and checks its hello reply; returns the reply.
json say_hello(WorkerProcess& process, const std::string& framework, double timeout) {
  // --worker-timeout bounds the start too (importing the framework), as every request
  const json reply = process.request({{"cmd", "hello"}, {"protocol", kProtocol}}, Seconds(timeout));
  if (reply.value("protocol", -1) != kProtocol || reply.value("framework", std::string()) != framework) {
    throw Error(ErrorCode::kDataLoss, fmt::format("the {} worker answered hello with protocol {} and framework '{}'; "
                                                  "expected protocol {} and '{}'",
                                                  framework, reply.value("protocol", -1),
                                                  reply.value("framework", std::string()), kProtocol, framework));
  }
  return reply;
}

/// The devices of a hello reply: id -> the framework's name for it.
std::map<std::string, std::string> devices_of(const json& hello, const std::string& framework) {
  std::map<std::string, std::string> out;
  const auto it = hello.find("devices");
  if (it == hello.end() || !it->is_array()) {
    throw Error(ErrorCode::kDataLoss, fmt::format("the {} worker's hello reply has no 'devices' list", framework));
  }
  for (const json& d : *it) {
    if (!d.is_object() || !d.contains("id") || !d["id"].is_string()) {
      throw Error(ErrorCode::kDataLoss,
                  fmt::format("the {} worker's hello reply has a device without an id: {}", framework, d.dump()));
    }
    out[d["id"].get<std::string>()] = d.value("name", std::string());
  }
  return out;
}

std::string device_list(const std::map<std::string, std::string>& devices) {
  std::string s;
  for (const auto& [id, name] : devices) s += (s.empty() ? "" : ", ") + id;
  return s.empty() ? "none" : s;
}

WorkerProcess start_worker(const std::string& framework, const RunOptions& run) {
  std::map<std::string, std::string> env = {{"PYTHONPATH", worker_directory()},
                                            {"NEURALCOST_THREADS", std::to_string(run.threads)},
                                            {"PYTHONUNBUFFERED", "1"}};
  // a TensorFlow training run measures its peak memory through the CPU allocator's statistics:
  // one BFC allocator serves and counts every allocation (oneDNN's default allocator counts only
  // those of 256 KiB and more); it must be set before TensorFlow starts (tensorflow/training.py)
  if (framework == "tensorflow" && run.train) env["TF_CPU_ALLOCATOR_USE_BFC"] = "true";
  // the torch worker's compiled per-op timer (python/native/), built beside the library
  if (framework == "torch") {
    env["NEURALCOST_TORCH_TIMER"] =
        env_or("NEURALCOST_TORCH_TIMER", library_directory() + "/neuralcost/torch-timer/libneuralcost_torch_timer.so");
  }
  return WorkerProcess({python_interpreter(), "-m", "neuralcost_worker", framework}, std::move(env),
                       fmt::format("the {} worker", framework));
}

/// The build request's "train" object (docs/worker-protocol.md, "Training").
/// The request's "train" object: every value resolved here (defaults, the loss), so that the
/// worker checks them and decides none.
json train_request(const TrainRun& train, const ModelRequest& request) {
  const TrainHyperparameters& h = train.hyper;
  const Optimizer o = train.options.optimizer;
  return {{"optimizer", std::string(optimizer_name(o))},
          {"loss", std::string(loss_name(loss_for_reference_model(request)))},
          {"learning_rate", h.learning_rate},
          {"momentum", h.momentum},
          {"betas", {h.beta1, h.beta2}},
          {"eps", h.eps},
          {"weight_decay", h.weight_decay_for(o)},
          {"labels_seed", h.labels_seed},
          {"precision", std::string(precision_name(train.options.precision))}};
}

/// A reply's byte count `key`: a non-negative integer below 2^53 (kDataLoss otherwise).
std::uint64_t bytes_in(const json& reply, const char* key) {
  const json& v = member(reply, key);
  if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 9007199254740992.0) {
    throw Error(ErrorCode::kDataLoss,
                fmt::format("the worker's memory reply has no byte count '{}': {}", key, v.dump()));
  }
  return static_cast<std::uint64_t>(v.get<double>());
}

/// A worker process and the models it holds, each in a slot (RunOptions::process_pool).
struct SharedWorker {
  SharedWorker(const std::string& framework, const RunOptions& run)
      : process(start_worker(framework, run)), hello(say_hello(process, framework, run.worker_timeout_seconds)) {}
  WorkerProcess process;
  json hello;
  int next_slot = 0;
  bool shared = false;
};

/// The worker for a model: a process of its own, or (with a pool and not training) the pool's
/// live process for the framework, mode, device, threads and dtype, started on first use.
std::shared_ptr<SharedWorker> worker_for(const std::string& framework, const std::string& mode,
                                         const ModelRequest& request, const RunOptions& run) {
  if (run.process_pool.empty() || run.train) return std::make_shared<SharedWorker>(framework, run);
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<SharedWorker>> pools;
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", run.process_pool, framework, mode, run.device.name(),
                                      run.threads, dtype_name(request.dtype), python_interpreter(), worker_directory());
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<SharedWorker> worker = pools[key].lock();
  if (!worker || !worker->process.usable()) {
    worker = std::make_shared<SharedWorker>(framework, run);
    worker->shared = true;
    pools[key] = worker;
  }
  return worker;
}

class WorkerModel final : public PreparedModel {
 public:
  WorkerModel(const std::string& framework, const ModelRequest& request, const std::string& mode, const RunOptions& run)
      : timeout_(run.worker_timeout_seconds),
        worker_(worker_for(framework, mode, request, run)),
        slot_(worker_->next_slot++) {
    const json& hello = worker_->hello;
    const std::map<std::string, std::string> devices = devices_of(hello, framework);
    if (!devices.count(run.device.name())) {
      throw Error(ErrorCode::kNotFound, fmt::format("the {} worker has no device '{}' (devices: {})", framework,
                                                    run.device.name(), device_list(devices)));
    }
    add_strings(environment_, member(hello, "environment"), "");
    // a model file's inputs: by name or position, with dtype and value range where given
    json shapes = json::array(), inputs = json::array();
    for (const InputSpec& in : inputs_of(request)) {
      shapes.push_back(in.shape);
      json one = {{"shape", in.shape}};
      if (!in.name.empty()) one["name"] = in.name;
      if (in.dtype) one["dtype"] = std::string(dtype_name(*in.dtype));
      if (in.range) one["range"] = {in.range->low, in.range->high};
      inputs.push_back(std::move(one));
    }
    json build = {{"cmd", "build"},
                  {"model", request.model},
                  {"mode", mode},
                  {"batch", request.batch},
                  {"seq", request.seq},
                  {"width", request.width},
                  {"depth", request.depth},
                  {"dtype", std::string(dtype_name(request.dtype))},
                  {"input_shapes", shapes},
                  {"inputs", inputs},
                  {"device", run.device.name()}};
    // a decoder's config.json: the phase the worker builds around transformers' model class
    if (decoder_config_file(request.model)) {
      build["decoder"] = {{"phase", request.phase}, {"prompt", request.prompt}, {"context", request.context}};
    }
    training_ = run.train.has_value();
    if (training_) build["train"] = train_request(*run.train, request);
    const json built = ask(build, Seconds(timeout_));
    if (training_ && !member(built, "environment").contains("train_loss")) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("the {} worker built '{}' without training it (its build reply "
                              "names no train_loss): it would time forward passes as steps",
                              framework, request.model));
    }
    name_ = built.value("name", request.model);
    add_strings(environment_, member(built, "environment"), "");
    environment_["model_origin"] = built.value("origin", std::string("unknown"));
    environment_["framework_mode"] = mode;
    environment_["framework_parameters"] = std::to_string(built.value("parameters", std::int64_t{-1}));
    environment_["worker_protocol"] = std::to_string(kProtocol);
    environment_["worker_process"] =
        worker_->shared ? fmt::format(
                              "shared: one {} {} process holds the cells of this preparation, each model in a slot "
                              "(this one: {}), stopped while the others run; its memory telemetry is the process's",
                              framework, mode, slot_)
                        : "its own";
    environment_["worker_command"] =
        fmt::format("{} -m neuralcost_worker {} (PYTHONPATH={})", python_interpreter(), framework, worker_directory());
    sync_ = framework == "jax"          ? "jax.block_until_ready on the outputs, inside the worker"
            : framework == "tensorflow" ? "the result materialised (.numpy()), inside the worker"
                                        : "torch.cuda.synchronize on a GPU, nothing on the CPU, inside the worker";
  }

  ~WorkerModel() override {
    // a shared process keeps running for the other models: this one's slot is emptied
    if (worker_.use_count() > 1 && worker_->process.usable()) {
      try {
        ask({{"cmd", "drop"}}, Seconds(timeout_));
      } catch (...) {  // NOLINT(bugprone-empty-catch): a worker that cannot drop is killed by its last model
      }
    }
  }
  WorkerModel(const WorkerModel&) = delete;
  WorkerModel& operator=(const WorkerModel&) = delete;

  void pause() override { worker_->process.pause(); }
  void resume() override { worker_->process.resume(); }
  bool shares_process() const override { return worker_->shared; }
  bool lost_its_process() const override { return lost_; }

  void run() override {
    if (pending_.empty()) {
      const int n = last_ ? passes_per_request(*last_) : 1;
      const auto start = std::chrono::steady_clock::now();
      const json reply = ask({{"cmd", "run"}, {"n", n}}, deadline(n));
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double sum = 0;
      for (double s : durations(reply, "seconds", static_cast<std::size_t>(n))) pending_.push_back(s), sum += s;
      overhead_.push_back((wall - sum) / n);
      passes_ = n;
      faults_per_pass_ = reply.value("page_faults", 0.0) / n;
      // the framework's evidence of what the passes ran (compiled programs; optional)
      if (const auto it = reply.find("execution"); it != reply.end()) add_strings(environment_, *it, "execution.");
      // training: the loss of the first step the worker ran and of the last (evidence that it trains)
      if (const auto it = reply.find("train"); it != reply.end()) add_strings(environment_, *it, "train_");
    }
    last_ = pending_.front();
    pending_.pop_front();
    faults_ += faults_per_pass_;  // a pass counts when it is handed out, as its time does
  }

  std::optional<double> last_run_seconds() const override { return last_; }

  /// The worker's faults over the passes handed out so far (each request's spread evenly).
  std::optional<double> page_faults() const override { return faults_; }
  std::optional<double> resident_bytes() const override { return process_resident_bytes(worker_->process.pid()); }

  OpGraph captured_graph() override {
    const json reply = ask({{"cmd", "capture"}}, Seconds(timeout_));
    environment_["capture_source"] = reply.value("source", std::string("unknown"));
    OpGraph graph = capture::graph_from_captured(
        capture::captured_ops_from_json(member(reply, "ops"), "capture reply of " + name_), name_);
    // (optional) the model's results: a training step's loss reads them, not every tensor no op
    // reads (the torch worker's train-mode capture has autograd's detaches of saved tensors)
    if (const auto outputs = reply.find("outputs"); outputs != reply.end() && outputs->is_array()) {
      for (const json& o : *outputs) {
        if (!o.is_string() || !graph.producer(o.get<std::string>())) {
          throw Error(ErrorCode::kDataLoss, fmt::format("the capture reply of {} names an output '{}' that no op "
                                                        "produced",
                                                        name_, o.is_string() ? o.get<std::string>() : o.dump()));
        }
        graph.mark_output(o.get<std::string>());
      }
    }
    return graph;
  }

  std::map<std::string, std::string> environment() const override {
    std::map<std::string, std::string> env = environment_;
    if (!overhead_.empty()) {
      env["worker_passes_per_request"] = std::to_string(passes_);
      env["protocol_overhead"] = fmt::format(
          "{:.1f} us per pass (median over {} run requests of their round trip minus the passes' own times, "
          "divided by the passes they carried); not part of the samples",
          median(overhead_) * 1e6, overhead_.size());
    }
    try {
      // a training run's memory reply is the one step_memory() asked for (it runs a step)
      const json reply = memory_reply_ ? *memory_reply_ : ask({{"cmd", "memory"}}, Seconds(timeout_));
      add_strings(env, member(reply, "telemetry"), "memory.");
    } catch (const Error& e) {
      env["memory"] = std::string("unavailable: ") + e.what();
    }
    return env;
  }

  /// Training: the worker's `memory` request runs one step with the allocator's peak reset
  /// before it and reports the peak with its source.
  std::optional<StepMemory> step_memory() override {
    if (!training_) return std::nullopt;
    const json reply = ask({{"cmd", "memory"}}, deadline(2));
    memory_reply_ = reply;
    if (member(reply, "peak_bytes").is_null()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("the worker measured no peak: {}", member(reply, "reason").is_string()
                                                                     ? member(reply, "reason").get<std::string>()
                                                                     : std::string("it gave no reason")));
    }
    StepMemory m;
    m.peak_bytes = bytes_in(reply, "peak_bytes");
    if (!member(reply, "start_bytes").is_null()) m.start_bytes = bytes_in(reply, "start_bytes");
    m.source = member(reply, "source").is_string() ? member(reply, "source").get<std::string>() : "";
    m.includes = member(reply, "includes").is_string() ? member(reply, "includes").get<std::string>() : "";
    if (m.source.empty()) throw Error(ErrorCode::kDataLoss, "the worker's memory reply names no source of its peak");
    if (m.peak_bytes == 0) {
      // a step holds at least its parameters: 0 B is a figure the source did not measure
      throw Error(ErrorCode::kDataLoss,
                  fmt::format("the worker reported a peak of 0 B ({}): not a measurement", m.source));
    }
    return m;
  }

  std::string synchronisation() const override { return sync_; }

  /// A request of `passes` passes may take what they should (by the last pass seen, at most 10x
  /// that to allow for noise) plus --worker-timeout: one deadline, not the timeout per pass.
  Seconds deadline(int passes) const { return Seconds(timeout_ + (last_ ? 10.0 * *last_ * passes : 0.0)); }

  LayerTiming profile_layers(int runs) override {
    // each run is a plain pass and a profiled one
    const json reply = ask({{"cmd", "layers"}, {"n", runs}}, deadline(2 * runs));
    LayerTiming t;
    t.step_phases = member(reply, "step_phases").is_boolean() && member(reply, "step_phases").get<bool>();
    t.kernel_events = member(reply, "kernels").is_boolean() && member(reply, "kernels").get<bool>();
    const auto events = reply.find("events"), seconds = reply.find("seconds");
    if (events == reply.end() || seconds == reply.end() || !events->is_array() || !seconds->is_array() ||
        events->size() != seconds->size()) {
      throw Error(ErrorCode::kDataLoss, "the worker's layers reply needs 'events' and 'seconds' of the same length");
    }
    for (std::size_t e = 0; e < events->size(); ++e) {
      t.event_names.push_back((*events)[e].is_string() ? (*events)[e].get<std::string>() : "?");
      t.seconds.push_back(durations_in((*seconds)[e], fmt::format("seconds[{}]", e)));
    }
    if (const auto timer = reply.find("timer"); timer != reply.end() && timer->is_string()) t.timer = *timer;
    if (const auto w = reply.find("timer_warning"); w != reply.end() && w->is_string()) t.timer_warning = *w;
    t.wall_seconds = durations(reply, "wall");
    t.plain_wall_seconds = durations(reply, "plain");
    // (optional) the module path of each event, "" unknown
    if (const auto modules = reply.find("modules");
        modules != reply.end() && modules->is_array() && modules->size() == events->size()) {
      for (const json& m : *modules) t.event_modules.push_back(m.is_string() ? m.get<std::string>() : "");
    }
    return t;
  }

 private:
  /// One request to this model's slot. A failure of the process itself (not the worker's error
  /// reply) kills it: its replies may be out of step, and the models sharing it must not read them.
  json ask(json req, Seconds timeout) const {
    req["slot"] = slot_;
    lost_ = worker_->shared && !worker_->process.usable();
    try {
      return worker_->process.request(req, timeout);
    } catch (const WorkerFailure& e) {
      if (e.cause() != WorkerFailure::Cause::kReply) worker_->process.kill();
      throw;
    }
  }

  double timeout_;
  std::shared_ptr<SharedWorker> worker_;
  int slot_ = 0;
  mutable bool lost_ = false;  ///< the last request found the shared process ended already
  std::string name_;
  std::map<std::string, std::string> environment_;
  std::string sync_;
  bool training_ = false;
  std::optional<json> memory_reply_;  ///< a training run's step-memory reply
  std::optional<double> last_;
  std::deque<double> pending_;    ///< passes of the last run request not yet handed out
  std::vector<double> overhead_;  ///< per run request: (round trip - passes) / passes
  int passes_ = 0;
  double faults_per_pass_ = 0;  ///< of the last run request
  double faults_ = 0;           ///< over the passes handed out
};

}  // namespace

int passes_per_request(double last_seconds) {
  if (!(last_seconds > 0)) return 1;
  return static_cast<int>(std::clamp(0.002 / last_seconds, 1.0, 1000.0));
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
  if (const char* python = std::getenv("NEURALCOST_PYTHON"); python != nullptr && *python != '\0') {
    // a bare name ("python3") is looked up on PATH, as a shell would: the worker is started without one
    if (std::string(python).find('/') != std::string::npos) return python;
    const std::string found = executable(python);
    return found.empty() ? std::string(python) : found;
  }
  if (::access(bundled_python().c_str(), X_OK) == 0) return bundled_python();
  const std::string found = executable(NEURALCOST_DEFAULT_PYTHON);
  return found.empty() ? std::string(NEURALCOST_DEFAULT_PYTHON) : found;
}

std::string worker_directory() { return env_or("NEURALCOST_WORKER_DIR", library_directory() + "/neuralcost/python"); }

WorkerBackend::WorkerBackend(std::string name, std::string framework, std::string description,
                             std::vector<std::string> modes, std::string compiled_mode, std::vector<ModelKind> files,
                             bool cuda)
    : name_(std::move(name)),
      framework_(std::move(framework)),
      description_(std::move(description)),
      modes_(std::move(modes)),
      compiled_mode_(std::move(compiled_mode)),
      files_(std::move(files)),
      cuda_(cuda) {}

bool WorkerBackend::accepts(ModelKind kind) const {
  return kind == ModelKind::kBuiltIn || std::find(files_.begin(), files_.end(), kind) != files_.end();
}

int visible_cuda_gpus(const std::string& root) {
  // the driver's list, or (in a container without /proc/driver/nvidia) the device nodes
  int listed = 0, nodes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/proc/driver/nvidia/gpus", ec)) {
    (void)entry;
    ++listed;
  }
  for (const auto& entry : std::filesystem::directory_iterator(root + "/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      ++nodes;
    }
  }
  int gpus = std::max(listed, nodes);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    // a list of indices or UUIDs; CUDA stops at the first invalid entry, which this does not check
    int listed = 0;
    for (std::string_view v = visible; !v.empty();) {
      const auto comma = v.find(',');
      if (!v.substr(0, comma).empty()) ++listed;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
    gpus = std::min(gpus, listed);
  }
  return gpus;
}

std::vector<Device> WorkerBackend::devices() const {
  std::vector<Device> d = {Device::cpu()};
  if (!cuda_) return d;
  for (int i = 0, n = visible_cuda_gpus(); i < n; ++i) d.push_back(Device::cuda(i));
  return d;
}

std::optional<std::string> WorkerBackend::device_name(const Device& device, double timeout_seconds) const {
  const std::lock_guard<std::mutex> lock(names_mutex_);
  if (!names_) {
    // the framework's own names for its devices, from one worker's hello
    if (unavailable_reason()) return std::nullopt;
    RunOptions run;
    run.threads = 1;
    run.worker_timeout_seconds = timeout_seconds;
    WorkerProcess process = start_worker(framework_, run);
    names_ = devices_of(say_hello(process, framework_, timeout_seconds), framework_);
    process.stop();
  }
  const auto it = names_->find(device.name());
  if (it == names_->end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<std::string> WorkerBackend::unavailable_reason() const {
  const std::string python = python_interpreter();
  if (executable(python).empty()) {
    const char* set = std::getenv("NEURALCOST_PYTHON");
    if (set != nullptr && *set != '\0') {
      return fmt::format("no Python environment at {} ($NEURALCOST_PYTHON)", python);
    }
    return fmt::format(
        "no Python environment: $NEURALCOST_PYTHON is unset, {} does not exist and '{}' is not on "
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

std::unique_ptr<PreparedModel> WorkerBackend::prepare(const ModelRequest& request, const std::string& mode,
                                                      const RunOptions& run) const {
  const std::string own = mode == "compiled" ? compiled_mode_ : mode;
  if (std::find(modes_.begin(), modes_.end(), own) == modes_.end()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: unknown mode '{}'", name_, mode));
  }
  if (!(run.worker_timeout_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument, "--worker-timeout must be more than 0 seconds");
  }
  if (auto why = unavailable_reason()) throw Error(ErrorCode::kUnimplemented, fmt::format("{}: {}", name_, *why));
  return std::make_unique<WorkerModel>(framework_, request, own, run);
}

}  // namespace neuralcost::worker
