// Which CUDA GPUs this machine has, asked of the NVIDIA driver itself (libcuda.so.1, loaded at run
// time: no CUDA toolkit is needed to run neural-cost). When there are none, the reason says which
// link is missing: no driver library, the toolkit's stub in its place, a driver too old, no
// device. Backends that run on GPUs (torch, LibTorch) report their own devices; this is the
// machine's view, for `hardware detect`, `backends` and the errors of `--device cuda:N`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace neuralcost {

struct CudaDeviceInfo {
  int index = 0;     ///< N of cuda:N (CUDA's ordinal, after CUDA_VISIBLE_DEVICES)
  std::string name;  ///< the driver's name: "NVIDIA H200"
  std::uint64_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;  ///< compute capability (9.0 for Hopper)
  int multiprocessors = 0;
};

struct CudaDevices {
  std::vector<CudaDeviceInfo> devices;
  /// Empty when the driver answered and found at least one device; otherwise why CUDA cannot run here.
  std::optional<std::string> unavailable_reason;
  /// cuDriverGetVersion's CUDA version the driver supports ("13.0"); empty when no driver answered.
  std::string driver_cuda_version;
  std::string library;  ///< the driver library asked ("libcuda.so.1")
};

/// Asks the driver library `library` (dlopen; the default is the driver's soname) for its devices.
/// Never throws: every failure becomes `unavailable_reason`.
CudaDevices detect_cuda_devices(const std::string& library = "libcuda.so.1");

/// The machine's devices, detected once per process (detect_cuda_devices() with the default library).
const CudaDevices& cuda_devices();

/// Why CUDA device `index` (cuda:index) cannot run on this machine, or empty when it can: CUDA
/// unavailable (with its reason) or no device of that index (naming the ones there are).
std::optional<std::string> cuda_device_missing(const CudaDevices& found, int index);

/// "13.0" from cuDriverGetVersion's 13000; "12.4" from 12040.
std::string cuda_version_text(int version);

}  // namespace neuralcost
