// The resident memory of a process (include/neuralcost/core/process_memory.hpp).
#include "neuralcost/core/process_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

namespace neuralcost {

std::optional<double> process_resident_bytes(int pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  double size = 0, resident = 0;
  if (!(statm >> size >> resident)) return std::nullopt;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace neuralcost
