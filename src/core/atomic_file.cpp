// Atomic result files: write to PATH.tmp.PID, flush, rename over PATH.
#include "neuralcost/core/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {

void write_file_atomically(const std::string& requested, const std::string& content) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(requested, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // a device or a pipe (/dev/stdout, a FIFO): nothing to replace, write it in place
    std::FILE* f = std::fopen(requested.c_str(), "wb");
    const bool ok = f != nullptr && std::fwrite(content.data(), 1, content.size(), f) == content.size();
    if (f == nullptr || std::fclose(f) != 0 || !ok) {
      throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", requested, std::strerror(errno)));
    }
    return;
  }
  // replace the file a symlink points to, not the link
  const std::string path = std::filesystem::is_symlink(requested, ec)
                               ? std::filesystem::weakly_canonical(requested, ec).string()
                               : requested;
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  }
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size() &&
                       std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(write_errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot replace '{}': {}", path, std::strerror(rename_errno)));
  }
}

}  // namespace neuralcost
