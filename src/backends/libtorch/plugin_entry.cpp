// The entry point of the LibTorch plugin (neuralcost_libtorch.so), which the registry loads
// on first use through PluginBackend, after checking the plugin API version it exports.
#include "backends/libtorch/libtorch_backend.hpp"

NEURALCOST_PLUGIN_API_VERSION

extern "C" __attribute__((visibility("default"))) const neuralcost::Backend* neuralcost_libtorch_backend() {
  return &neuralcost::libtorch_backend();
}
