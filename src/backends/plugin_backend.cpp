// Loading backend plugins (see plugin_backend.hpp). A plugin is never unloaded: frameworks
// keep threads and static state that do not survive dlclose.
#include "backends/plugin_backend.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

PluginBackend::PluginBackend(std::string name, std::string description, std::string file, std::string symbol)
    : name_(std::move(name)), description_(std::move(description)), file_(std::move(file)), symbol_(std::move(symbol)) {}

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
      error_ = fmt::format("its plugin {} exports no neuralcost_plugin_api_version (built for an older neural-cost; "
                           "rebuild it)", path);
      return;
    }
    if (const int v = version(); v != kPluginApiVersion) {
      error_ = fmt::format("its plugin {} was built for plugin API version {}, this neural-cost has version {} "
                           "(rebuild the plugin with this neural-cost)", path, v, kPluginApiVersion);
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

std::vector<std::string> PluginBackend::devices() const {
  const Backend* b = load();
  return b ? b->devices() : std::vector<std::string>{};
}

std::optional<std::string> PluginBackend::device_name(const std::string& device) const {
  const Backend* b = load();
  return b ? b->device_name(device) : std::nullopt;
}

std::unique_ptr<PreparedModel> PluginBackend::prepare(const ModelRequest& request, const std::string& mode,
                                                      const RunOptions& run) const {
  const Backend* b = load();
  if (!b) throw Error(ErrorCode::kUnimplemented, fmt::format("backend '{}' is unavailable: {}", name_, error_));
  return b->prepare(request, mode, run);
}

}  // namespace neuralcost
