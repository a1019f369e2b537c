// CUDA device detection through the driver API, loaded with dlopen (see cuda_devices.hpp). The few
// driver entry points are declared here with their documented C signatures (cuda.h is the
// toolkit's and need not be on a machine that only runs neural-cost).
#include "neuralcost/gpu/cuda_devices.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace neuralcost {
namespace {

// CUresult values we name (cuda.h: enum cudaError_enum)
constexpr int kCudaSuccess = 0;
constexpr int kCudaNotInitialized = 3;
constexpr int kCudaStubLibrary = 34;
constexpr int kCudaInsufficientDriver = 35;
constexpr int kCudaNoDevice = 100;
constexpr int kCudaSystemDriverMismatch = 803;
// CUdevice_attribute values (cuda.h)
constexpr int kAttrMultiprocessors = 16;
constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;

using CuInit = int (*)(unsigned int);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(std::size_t*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);

std::string init_failure(int code) {
  switch (code) {
    case kCudaNoDevice:
      return "the NVIDIA driver is installed but finds no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE; "
             "CUDA_VISIBLE_DEVICES may hide them)";
    case kCudaStubLibrary:
      return "libcuda is the CUDA toolkit's link stub, not a driver: no NVIDIA driver is installed "
             "(cuInit: CUDA_ERROR_STUB_LIBRARY)";
    case kCudaInsufficientDriver:
      return "the NVIDIA driver is older than this CUDA needs (cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER)";
    case kCudaSystemDriverMismatch:
      return "the NVIDIA kernel module and the user-space driver differ in version (cuInit: "
             "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH; reboot or reinstall the driver)";
    case kCudaNotInitialized: return "the NVIDIA driver could not initialise (cuInit: CUDA_ERROR_NOT_INITIALIZED)";
    default: return fmt::format("the NVIDIA driver could not initialise (cuInit returned CUresult {})", code);
  }
}

}  // namespace

std::string cuda_version_text(int version) {
  if (version <= 0) return "unknown";
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

CudaDevices detect_cuda_devices(const std::string& library) {
  CudaDevices out;
  out.library = library;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace of the process
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    out.unavailable_reason =
        fmt::format("no NVIDIA driver: {} cannot be loaded ({})", library, why ? why : "dlopen failed");
    return out;
  }
  auto sym = [h](const char* name) { return ::dlsym(h, name); };
  auto init = reinterpret_cast<CuInit>(sym("cuInit"));
  auto version = reinterpret_cast<CuDriverGetVersion>(sym("cuDriverGetVersion"));
  auto count = reinterpret_cast<CuDeviceGetCount>(sym("cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(sym("cuDeviceGet"));
  auto name = reinterpret_cast<CuDeviceGetName>(sym("cuDeviceGetName"));
  auto memory = reinterpret_cast<CuDeviceTotalMem>(sym("cuDeviceTotalMem_v2"));
  auto attribute = reinterpret_cast<CuDeviceGetAttribute>(sym("cuDeviceGetAttribute"));
  if (!init || !version || !count || !get || !name || !memory || !attribute) {
    out.unavailable_reason = fmt::format(
        "{} lacks the CUDA driver API (cuInit, cuDeviceGetCount, ...): not an "
        "NVIDIA driver library",
        library);
    return out;  // the library stays loaded: unloading a half-initialised driver is not worth the risk
  }
  // the stub library answers cuDriverGetVersion too, so only a successful cuInit makes it count
  if (const int rc = init(0); rc != kCudaSuccess) {
    out.unavailable_reason = init_failure(rc);
    return out;
  }
  int v = 0;
  if (version(&v) == kCudaSuccess) out.driver_cuda_version = cuda_version_text(v);
  int n = 0;
  if (const int rc = count(&n); rc != kCudaSuccess || n <= 0) {
    out.unavailable_reason = rc != kCudaSuccess ? fmt::format("cuDeviceGetCount failed (CUresult {})", rc)
                                                : std::string("the NVIDIA driver finds no CUDA device");
    return out;
  }
  for (int i = 0; i < n; ++i) {
    CudaDeviceInfo d;
    d.index = i;
    int dev = 0;
    if (get(&dev, i) != kCudaSuccess) continue;
    char buffer[256] = {};
    if (name(buffer, sizeof buffer - 1, dev) == kCudaSuccess) d.name = buffer;
    std::size_t bytes = 0;
    if (memory(&bytes, dev) == kCudaSuccess) d.memory_bytes = bytes;
    attribute(&d.compute_major, kAttrComputeMajor, dev);
    attribute(&d.compute_minor, kAttrComputeMinor, dev);
    attribute(&d.multiprocessors, kAttrMultiprocessors, dev);
    out.devices.push_back(std::move(d));
  }
  if (out.devices.empty()) out.unavailable_reason = "the NVIDIA driver lists devices but none could be opened";
  return out;
}

const CudaDevices& cuda_devices() {
  static const CudaDevices found = detect_cuda_devices();
  return found;
}

std::optional<std::string> cuda_device_missing(const CudaDevices& found, int index) {
  const std::string device = fmt::format("cuda:{}", index);
  if (found.unavailable_reason)
    return fmt::format("{}: CUDA is not available here: {}", device, *found.unavailable_reason);
  for (const CudaDeviceInfo& info : found.devices) {
    if (info.index == index) return std::nullopt;
  }
  std::string names;
  for (const CudaDeviceInfo& info : found.devices) {
    names += fmt::format("{}cuda:{} ({})", names.empty() ? "" : ", ", info.index, info.name);
  }
  return fmt::format("{}: no such CUDA device; this machine has {} ({})", device,
                     found.devices.size() == 1 ? std::string("one") : std::to_string(found.devices.size()), names);
}

}  // namespace neuralcost
