// The plugin loader checks a plugin's API version before it calls into it: a plugin built for
// another version, or for none, is unavailable with the reason; a matching one is used.
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/plugin_backend.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

/// A PluginBackend for one of the fake plugins, loaded from the tests' plugin folder.
std::optional<std::string> reason_for(const std::string& file, std::vector<Device>* devices = nullptr) {
  setenv("NEURALCOST_PLUGIN_DIR", NEURALCOST_FAKE_PLUGIN_DIR, 1);
  const PluginBackend plugin("fake", "a plugin of the tests", file, "neuralcost_fake_backend");
  std::optional<std::string> why = plugin.unavailable_reason();
  if (devices) *devices = plugin.devices();
  unsetenv("NEURALCOST_PLUGIN_DIR");
  return why;
}

TEST(PluginTest, AMatchingApiVersionIsLoaded) {
  std::vector<Device> devices;
  EXPECT_EQ(reason_for("fake_plugin.so", &devices), std::nullopt);
  EXPECT_EQ(devices, (std::vector<Device>{Device::cpu(), Device::cuda(0)}));
}

TEST(PluginTest, AnotherApiVersionIsRefusedWithBothVersions) {
  std::vector<Device> devices;
  const auto why = reason_for("fake_plugin_v999.so", &devices);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("this neural-cost has version " + std::to_string(kPluginApiVersion)));
  EXPECT_THAT(*why, HasSubstr("was built for plugin API version 999"));
  EXPECT_TRUE(devices.empty());  // nothing was called in it
}

TEST(PluginTest, APluginWithoutAnApiVersionIsRefused) {
  const auto why = reason_for("fake_plugin_unversioned.so");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("exports no neuralcost_plugin_api_version"));
}

}  // namespace
}  // namespace neuralcost
