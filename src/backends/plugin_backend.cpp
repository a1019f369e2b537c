// Loading backend plugins (see plugin_backend.hpp). A plugin is never unloaded: frameworks
// keep threads and static state that do not survive dlclose.
#include "backends/plugin_backend.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

using Seconds = std::chrono::duration<double>;

/// A model prepared by a plugin: each call runs on the backend's CallThread with a deadline, and
/// each pass is timed there (plugin_backend.hpp).
class GuardedModel final : public PreparedModel {
 public:
  GuardedModel(std::shared_ptr<PreparedModel> inner, std::shared_ptr<CallThread> thread, double timeout,
               const std::string& what)
      : inner_(std::move(inner)),
        thread_(std::move(thread)),
        timeout_(timeout),
        what_(what),
        doing_run_("a forward pass of " + what) {}

  void run() override {
    thread_->run(
        [inner = inner_, seconds = seconds_] {
          const auto start = std::chrono::steady_clock::now();
          inner->run();
          inner->synchronize();
          *seconds = Seconds(std::chrono::steady_clock::now() - start).count();
        },
        deadline(1), doing_run_);
  }

  OpGraph captured_graph() override {
    auto graph = std::make_shared<OpGraph>();
    // capturing settles the graph with a few passes first
    thread_->run([inner = inner_, graph] { *graph = inner->captured_graph(); }, deadline(5),
                 "capturing the ops of " + what_);
    return std::move(*graph);
  }

  LayerTiming profile_layers(int runs) override {
    auto timing = std::make_shared<LayerTiming>();
    thread_->run([inner = inner_, timing, runs] { *timing = inner->profile_layers(runs); }, deadline(2 * runs + 5),
                 fmt::format("{} profiled passes of {}", runs, what_));
    return std::move(*timing);
  }

  std::map<std::string, std::string> environment() const override {
    // on the model's thread: thread pools' sizes are per thread (OpenMP's)
    auto env = std::make_shared<std::map<std::string, std::string>>();
    thread_->run([inner = inner_, env] { *env = inner->environment(); }, deadline(0), "the environment of " + what_);
    return std::move(*env);
  }

  std::optional<double> last_run_seconds() const override {
    if (std::optional<double> own = inner_->last_run_seconds()) return own;
    return *seconds_ >= 0 ? std::optional<double>(*seconds_) : std::nullopt;
  }

  std::optional<double> page_faults() const override { return inner_->page_faults(); }
  std::optional<double> resident_bytes() const override { return inner_->resident_bytes(); }

  std::optional<StepMemory> step_memory() override {
    auto memory = std::make_shared<std::optional<StepMemory>>();
    thread_->run([inner = inner_, memory] { *memory = inner->step_memory(); }, deadline(2),
                 "measuring the memory of a step of " + what_);
    return std::move(*memory);
  }

  std::string synchronisation() const override { return inner_->synchronisation(); }

 private:
  /// --worker-timeout plus what `passes` passes should take (10x the last one, for noise)
  Seconds deadline(int passes) const { return Seconds(timeout_ + 10.0 * std::max(0.0, *seconds_) * passes); }

  std::shared_ptr<PreparedModel> inner_;
  std::shared_ptr<CallThread> thread_;
  double timeout_;
  std::string what_, doing_run_;
  std::shared_ptr<double> seconds_ = std::make_shared<double>(-1);  ///< the last pass; -1 before any
};

}  // namespace

PluginBackend::PluginBackend(std::string name, std::string description, std::string file, std::string symbol,
                             std::vector<ModelKind> files)
    : name_(std::move(name)),
      description_(std::move(description)),
      file_(std::move(file)),
      symbol_(std::move(symbol)),
      files_(std::move(files)) {}

bool PluginBackend::accepts(ModelKind kind) const {
  return kind == ModelKind::kBuiltIn || std::find(files_.begin(), files_.end(), kind) != files_.end();
}

std::string PluginBackend::plugin_directory() {
  if (const char* dir = std::getenv("NEURALCOST_PLUGIN_DIR"); dir && *dir) return dir;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&PluginBackend::plugin_directory), &info) == 0 || !info.dli_fname) return ".";
  return (std::filesystem::path(info.dli_fname).parent_path() / "neuralcost").string();
}

const Backend* PluginBackend::load() const {
  std::call_once(once_, [this] {
    const std::string path = (std::filesystem::path(plugin_directory()) / file_).string();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      error_ = fmt::format("its plugin could not be loaded: {}", why ? why : path);
      return;
    }
    // a plugin built against another Backend interface would crash on the first virtual call
    using Version = int (*)();
    auto version = reinterpret_cast<Version>(::dlsym(handle, "neuralcost_plugin_api_version"));
    if (!version) {
      error_ = fmt::format(
          "its plugin {} exports no neuralcost_plugin_api_version (built for an older neural-cost; "
          "rebuild it)",
          path);
      return;
    }
    if (const int v = version(); v != kPluginApiVersion) {
      error_ = fmt::format(
          "its plugin {} was built for plugin API version {}, this neural-cost has version {} "
          "(rebuild the plugin with this neural-cost)",
          path, v, kPluginApiVersion);
      return;
    }
    using Entry = const Backend* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, symbol_.c_str()));
    loaded_ = entry ? entry() : nullptr;
    if (!loaded_) error_ = fmt::format("its plugin {} has no backend entry point '{}'", path, symbol_);
  });
  return loaded_;
}

std::optional<std::string> PluginBackend::unavailable_reason() const {
  const Backend* b = load();
  return b ? b->unavailable_reason() : std::optional<std::string>(error_);
}

std::vector<std::string> PluginBackend::modes() const {
  const Backend* b = load();
  return b ? b->modes() : std::vector<std::string>{};
}

std::vector<Device> PluginBackend::devices() const {
  const Backend* b = load();
  return b ? b->devices() : std::vector<Device>{};
}

std::optional<std::string> PluginBackend::device_name(const Device& device, double timeout_seconds) const {
  const Backend* b = load();
  return b ? b->device_name(device, timeout_seconds) : std::nullopt;
}

std::unique_ptr<PreparedModel> PluginBackend::prepare(const ModelRequest& request, const std::string& mode,
                                                      const RunOptions& run) const {
  const Backend* b = load();
  if (!b) throw Error(ErrorCode::kUnimplemented, fmt::format("backend '{}' is unavailable: {}", name_, error_));
  std::call_once(thread_once_, [this] { thread_ = std::make_shared<CallThread>(name_); });
  const std::string what = fmt::format("{} ({})", std::filesystem::path(request.model).filename().string(), mode);
  auto prepared = std::make_shared<std::shared_ptr<PreparedModel>>();
  // loading runs a first pass (a model file's): the same deadline as a request that builds
  thread_->run([b, request, mode, run, prepared] { *prepared = b->prepare(request, mode, run); },
               Seconds(run.worker_timeout_seconds), "loading " + what + " and its first pass");
  return std::make_unique<GuardedModel>(std::move(*prepared), thread_, run.worker_timeout_seconds, what);
}

}  // namespace neuralcost
