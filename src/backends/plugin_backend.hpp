// A backend that lives in a plugin (a shared object loaded on first use), so that linking
// neural-cost does not load its framework. LibTorch alone takes 0.5 s and 160 MB to load and
// initialise: every command (analyze, hardware, --help) paid for it before it became a plugin.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "neuralcost/backend.hpp"
#include "neuralcost/core/call_thread.hpp"

namespace neuralcost {

/// Forwards to the Backend that `symbol` (an extern "C" function returning const Backend*)
/// returns in plugin `file` (e.g. "neuralcost_libtorch.so"), searched in $NEURALCOST_PLUGIN_DIR
/// or else in the "neuralcost" folder beside the library. Before calling `symbol` it checks the
/// plugin's neuralcost_plugin_api_version() (backend.hpp) against kPluginApiVersion. When
/// loading fails or the versions differ, the backend is unavailable and unavailable_reason()
/// says why (the loader's message, or both versions).
///
/// The plugin's framework runs in this process, so every call into it (prepare and each method
/// of the prepared model) runs on the backend's CallThread with a deadline of --worker-timeout
/// (plus the expected time of the passes it asks for): a call that never returns fails its run
/// with an error, and the backend refuses every later call (core/call_thread.hpp). Each pass
/// is timed on that thread (last_run_seconds), so the hand-over is not in the samples.
class PluginBackend : public Backend {
 public:
  /// `files`: the kinds of model file the plugin's backend loads (accepts() answers from them
  /// without loading the plugin).
  PluginBackend(std::string name, std::string description, std::string file, std::string symbol,
                std::vector<ModelKind> files = {});

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  std::optional<std::string> unavailable_reason() const override;
  std::vector<std::string> modes() const override;
  bool accepts(ModelKind kind) const override;
  std::vector<Device> devices() const override;
  std::optional<std::string> device_name(const Device& device, double timeout_seconds) const override;
  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest& request, const std::string& mode,
                                         const RunOptions& run) const override;

  /// The folder plugins are loaded from.
  static std::string plugin_directory();

 private:
  /// The loaded backend, or nullptr with error_ set.
  const Backend* load() const;

  std::string name_, description_, file_, symbol_;
  std::vector<ModelKind> files_;
  mutable std::once_flag once_;
  mutable const Backend* loaded_ = nullptr;
  mutable std::string error_;
  mutable std::once_flag thread_once_;
  mutable std::shared_ptr<CallThread> thread_;  ///< shared with the models it prepared
};

}  // namespace neuralcost
