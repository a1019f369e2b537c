// A backend plugin for the loader's tests (plugin_test.cpp), built three ways: exporting this
// neural-cost's plugin API version (FAKE_API_VERSION unset), another version, or none at all
// (FAKE_API_VERSION 0).
#include "neuralcost/backend.hpp"
#include "neuralcost/core/error.hpp"

namespace {

class FakeBackend final : public neuralcost::Backend {
 public:
  std::string_view name() const override { return "fake"; }
  std::string_view description() const override { return "a plugin of the tests"; }
  std::optional<std::string> unavailable_reason() const override { return std::nullopt; }
  std::vector<std::string> modes() const override { return {"eager"}; }
  std::vector<neuralcost::Device> devices() const override {
    return {neuralcost::Device::cpu(), neuralcost::Device::cuda(0)};
  }
  using Backend::prepare;
  std::unique_ptr<neuralcost::PreparedModel> prepare(const neuralcost::ModelRequest&, const std::string&,
                                                     const neuralcost::RunOptions&) const override {
    throw neuralcost::Error(neuralcost::ErrorCode::kUnimplemented, "the fake plugin runs nothing");
  }
};

}  // namespace

#ifndef FAKE_API_VERSION
NEURALCOST_PLUGIN_API_VERSION
#elif FAKE_API_VERSION != 0
extern "C" __attribute__((visibility("default"))) int neuralcost_plugin_api_version() { return FAKE_API_VERSION; }
#endif

extern "C" __attribute__((visibility("default"))) const neuralcost::Backend* neuralcost_fake_backend() {
  static const FakeBackend backend;
  return &backend;
}
