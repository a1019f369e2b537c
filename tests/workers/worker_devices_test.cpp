// Devices of the Python workers: each lists the ones it can run on in its hello (cpu first),
// runs on exactly the one a build names, and refuses one it does not have with not_found. On a
// machine without a GPU the torch worker must refuse cuda:0 (with one, it must list it).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/python_worker/worker_backend.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using testing::HasSubstr;
using Seconds = std::chrono::duration<double>;

/// A worker of `framework` after a successful hello; `hello` gets its reply.
std::unique_ptr<worker::WorkerProcess> started(const std::string& framework, json& hello) {
  auto p = std::make_unique<worker::WorkerProcess>(
      std::vector<std::string>{worker::python_interpreter(), "-m", "neuralcost_worker", framework},
      std::map<std::string, std::string>{{"PYTHONPATH", worker::worker_directory()}, {"NEURALCOST_THREADS", "1"}},
      "the " + framework + " worker");
  hello = p->request({{"cmd", "hello"}, {"protocol", worker::kProtocol}}, Seconds(300));
  return p;
}

json build_on(const std::string& device) {
  return {{"cmd", "build"},  {"model", "ff"},   {"mode", "eager"},
          {"batch", 2},      {"seq", 4},        {"width", 8},
          {"depth", 1},      {"dtype", "fp32"}, {"input_shapes", json::array()},
          {"device", device}};
}

class WorkerDevices : public testing::TestWithParam<std::string> {};

TEST_P(WorkerDevices, ListRunOnAndRefuseDevices) {
  const std::string framework = GetParam();
  json hello;
  auto worker = started(framework, hello);
  ASSERT_TRUE(hello["devices"].is_array());
  ASSERT_FALSE(hello["devices"].empty());
  EXPECT_EQ(hello["devices"][0]["id"], "cpu");
  bool has_gpu = false;
  for (const json& d : hello["devices"]) has_gpu = has_gpu || d["id"] == "cuda:0";
  if (framework != "torch") EXPECT_EQ(hello["devices"].size(), 1u) << hello["devices"].dump();
  // on the CPU by default and when asked
  const json built = worker->request(build_on("cpu"), Seconds(300));
  if (framework == "torch") EXPECT_EQ(built["environment"]["device"], "cpu");
  EXPECT_EQ(worker->request({{"cmd", "run"}, {"n", 2}}, Seconds(60))["seconds"].size(), 2u);
  // a device it does not have: not_found, naming the ones it has; the worker stays usable
  for (const std::string device : {std::string("cuda:7"), std::string(has_gpu ? "" : "cuda:0"), std::string("tpu")}) {
    if (device.empty()) continue;
    try {
      worker->request(build_on(device), Seconds(300));
      ADD_FAILURE() << framework << " built on " << device;
    } catch (const worker::WorkerFailure& e) {
      EXPECT_EQ(e.cause(), worker::WorkerFailure::Cause::kReply);
      EXPECT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("has no device '" + device + "' here (devices: cpu"));
    }
  }
  EXPECT_NO_THROW(worker->request({{"cmd", "run"}, {"n", 1}}, Seconds(60)));
  worker->stop();
}

INSTANTIATE_TEST_SUITE_P(Workers, WorkerDevices, testing::Values("jax", "tensorflow", "torch"));

TEST(WorkerBackendDevicesTest, CudaGpusAreCountedFromTheDriverOrTheDeviceNodes) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / ("nc_gpus_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "dev");
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(worker::visible_cuda_gpus(root.string()), 0);
  for (const char* node : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"}) std::ofstream(root / "dev" / node);
  EXPECT_EQ(worker::visible_cuda_gpus(root.string()), 2);  // nvidiactl and nvidia-uvm are not GPUs
  for (const char* bus : {"0000:01:00.0", "0000:41:00.0", "0000:81:00.0"}) {
    fs::create_directories(root / "proc/driver/nvidia/gpus" / bus);
  }
  EXPECT_EQ(worker::visible_cuda_gpus(root.string()), 3);
  setenv("CUDA_VISIBLE_DEVICES", "1,2", 1);
  EXPECT_EQ(worker::visible_cuda_gpus(root.string()), 2);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(worker::visible_cuda_gpus(root.string()), 0);
  unsetenv("CUDA_VISIBLE_DEVICES");
  fs::remove_all(root);
}

TEST(WorkerBackendDevicesTest, TheTorchBackendRefusesAGpuThisMachineDoesNotHave) {
  const Backend& torch = backend_named("torch");
  const std::vector<Device> devices = torch.devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front(), Device::cpu());
  EXPECT_EQ(static_cast<int>(devices.size()) - 1, worker::visible_cuda_gpus());
  if (worker::visible_cuda_gpus() > 0) GTEST_SKIP() << "this machine has a GPU";
  ModelRequest ff;
  ff.model = "ff";
  ff.batch = 2;
  RunOptions run;
  run.device = Device::cuda(0);
  try {
    torch.prepare(ff, "eager", run);
    FAIL() << "a model was prepared on a GPU this machine does not have";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_STREQ(e.what(), "the torch worker has no device 'cuda:0' (devices: cpu)");
  }
  // JAX and TensorFlow offer the CPU only, wherever they run
  EXPECT_EQ(backend_named("jax").devices(), std::vector<Device>{Device::cpu()});
  EXPECT_EQ(backend_named("tensorflow").devices(), std::vector<Device>{Device::cpu()});
}

}  // namespace
}  // namespace neuralcost
