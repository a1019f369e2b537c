// Device names: "cpu" and "cuda:N" (see core/device.hpp).
#include "neuralcost/core/device.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

Device Device::cuda(int index) {
  if (index < 0 || index > 999) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("CUDA device index {} is not in 0..999", index));
  }
  return {DeviceKind::kCuda, index};
}

Device Device::parse(std::string_view name) {
  if (name == "cpu") return cpu();
  const std::string_view digits = name.substr(std::min<std::size_t>(name.size(), 5));
  if (name.substr(0, 5) == "cuda:" && !digits.empty() && digits.size() <= 3 &&
      std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return cuda(std::stoi(std::string(digits)));
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("--device '{}' is not a device name: cpu, or cuda:N for the N-th CUDA GPU", name));
}

std::string Device::name() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index_); }

std::string device_names(const std::vector<Device>& devices) {
  if (devices.empty()) return "none";
  std::string out;
  for (const Device& d : devices) out += (out.empty() ? "" : ", ") + d.name();
  return out;
}

}  // namespace neuralcost
