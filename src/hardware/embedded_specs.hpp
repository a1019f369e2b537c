// The text of data/hardware/*.json (and data/interconnects, data/systems), compiled into the library by
// cmake/EmbedHardware.cmake.
#pragma once

#include <string_view>
#include <vector>

namespace neuralcost::detail {

struct EmbeddedSpec {
  std::string_view file_name;
  std::string_view json_text;
};

const std::vector<EmbeddedSpec>& embedded_hardware_specs();
const std::vector<EmbeddedSpec>& embedded_interconnect_specs();
const std::vector<EmbeddedSpec>& embedded_system_specs();

}  // namespace neuralcost::detail
