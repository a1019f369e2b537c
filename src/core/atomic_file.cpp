// Atomic result files: write to a fresh PATH.tmp.XXXXXX (O_EXCL, the old file's mode), sync,
// rename over PATH. Devices and pipes are written in place, and so is a file with other hard links.
#include "neuralcost/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

bool write_all(int fd, const std::string& content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

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
  struct stat existing {};
  const bool exists = ::stat(path.c_str(), &existing) == 0;
  // a file with other hard links is rewritten in place, so that every name still sees it (not
  // atomic: said in docs/profiling.md)
  if (exists && existing.st_nlink > 1) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    const bool ok = fd >= 0 && write_all(fd, content) && ::fsync(fd) == 0;
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(saved)));
    return;
  }
  // a fresh name of our own (O_EXCL: never a file someone prepared), with the mode the replaced
  // file had (a 0600 result stays 0600), else the umask's default
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  mode_t mode = existing.st_mode & 07777;
  if (!exists) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  const bool written = ::fchmod(fd, mode) == 0 && write_all(fd, content) && ::fsync(fd) == 0;
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(write_errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot replace '{}': {}", path, std::strerror(rename_errno)));
  }
}

void append_line_durably(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  const bool ok = fd >= 0 && write_all(fd, line) && ::fsync(fd) == 0;
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) throw Error(ErrorCode::kDataLoss, fmt::format("cannot append to '{}': {}", path, std::strerror(saved)));
}

void replace_private_file(const std::string& path, const std::string& content, unsigned mode) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  const bool written = ::fchmod(fd, static_cast<mode_t>(mode)) == 0 && write_all(fd, content) && ::fsync(fd) == 0;
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot write '{}': {}", path, std::strerror(write_errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {  // rename replaces a link, it does not follow it
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot replace '{}': {}", path, std::strerror(rename_errno)));
  }
}

void ensure_private_directory(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path d(dir);
  if (d.has_parent_path()) std::filesystem::create_directories(d.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot create '{}': {}", dir, std::strerror(errno)));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    throw Error(ErrorCode::kDataLoss, fmt::format("cannot read '{}': {}", dir, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a directory of its own (a link or a file)", dir));
  }
  if (st.st_uid != ::geteuid()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' belongs to another user (uid {}); it is not used for our files", dir, st.st_uid));
  }
  if ((st.st_mode & 022) != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' can be written by other users (mode {:o}); make it private (chmod 700)", dir,
                            st.st_mode & 0777));
  }
}

}  // namespace neuralcost
