// A device a model runs on: the CPU, or the N-th CUDA GPU. The one value the run interface
// passes around (Backend::devices, RunOptions::device); its text form ("cpu", "cuda:1") appears
// only where a user types it or a result records it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace neuralcost {

enum class DeviceKind { kCpu, kCuda };

class Device {
 public:
  /// The CPU (the default device of a run).
  Device() = default;
  static Device cpu() { return {}; }
  /// The `index`-th CUDA GPU (0 ≤ index < 1000).
  static Device cuda(int index);
  /// Parses a --device value: "cpu" or "cuda:N"; kInvalidArgument naming it otherwise.
  static Device parse(std::string_view name);

  DeviceKind kind() const { return kind_; }
  bool is_cpu() const { return kind_ == DeviceKind::kCpu; }
  bool is_cuda() const { return kind_ == DeviceKind::kCuda; }
  /// The CUDA ordinal; -1 for the CPU.
  int index() const { return index_; }
  /// "cpu", "cuda:1": what parse() reads.
  std::string name() const;
  /// The HardwareSpec::device_type of this kind of device: "cpu", or "gpu" for CUDA.
  std::string_view spec_type() const { return is_cpu() ? "cpu" : "gpu"; }

  bool operator==(const Device& other) const { return kind_ == other.kind_ && index_ == other.index_; }
  bool operator!=(const Device& other) const { return !(*this == other); }

 private:
  Device(DeviceKind kind, int index) : kind_(kind), index_(index) {}
  DeviceKind kind_ = DeviceKind::kCpu;
  int index_ = -1;
};

/// "cpu, cuda:0": the names of `devices`, comma-separated; "none" when empty.
std::string device_names(const std::vector<Device>& devices);

}  // namespace neuralcost
