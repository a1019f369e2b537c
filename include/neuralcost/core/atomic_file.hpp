// Writing result files without ever leaving a half-written file behind.
#pragma once

#include <string>

namespace neuralcost {

/// Writes `content` to a temporary file beside `path`, then renames it over `path`, so a
/// reader sees the old file or the new one, never a partial one. A symlink's target is the file
/// replaced; a device or pipe (/dev/stdout), or a file with other hard links, is written in
/// place. The temporary file is a fresh name (O_EXCL) and gets the replaced file's mode (new
/// files: the umask's). Throws kDataLoss naming the path when the directory is not writable or
/// the disk is full.
void write_file_atomically(const std::string& path, const std::string& content);

/// A file of our own (a cache): written to a fresh temporary beside `path` with `mode`, then
/// renamed over `path` itself: a symlink there is replaced, never followed; no in-place writes.
void replace_private_file(const std::string& path, const std::string& content, unsigned mode = 0600);

/// Creates `dir` (mode 0700) when missing and checks it is private: a real directory (not a
/// link) owned by this user and writable by nobody else. Throws kInvalidArgument naming what is
/// wrong otherwise (a folder another user prepared under /tmp must not hold our files).
void ensure_private_directory(const std::string& dir);

/// Appends `line` (which ends in a newline) to `path` in one write and syncs it to disk, so an
/// interruption leaves whole lines behind (a results file's cells). Creates the file. Throws
/// kDataLoss naming the path.
void append_line_durably(const std::string& path, const std::string& line);

}  // namespace neuralcost
