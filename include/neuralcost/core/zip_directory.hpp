// The central directory of a zip archive, read by our own bounds-checked reader. TorchScript
// files and torch.export programs are zip archives that a framework decompresses with sizes it
// takes from this directory: reading it first tells what the file will expand to before any
// third-party code allocates for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuralcost {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;        ///< 0 stored, 8 deflated, ...
  std::uint64_t compressed = 0;    ///< bytes in the file
  std::uint64_t uncompressed = 0;  ///< bytes once extracted
};

/// The entries of the zip archive at `path` (zip64 included). Throws Error kDataLoss "PATH: not
/// a zip archive (no end-of-central-directory record)" or "PATH: a damaged zip archive (...)"
/// when a record, the directory or an entry lies outside the file; kNotFound when it cannot be
/// opened. Reads at most the directory (refused above 256 MiB or 10^6 entries).
std::vector<ZipEntry> read_zip_directory(const std::string& path);

/// Checks a TorchScript file's zip directory (read by our own reader) before LibTorch opens it:
/// torch.jit.save stores tensors uncompressed, and LibTorch allocates each entry's declared size
/// when it extracts it, so a file whose entries expand past 32x its size plus 64 MiB is a
/// decompression bomb: kDataLoss "PATH: refused: its zip entries expand to 1.07 GB from a
/// 1.05 MB file (1024x); ...". kDataLoss "PATH: not a loadable TorchScript file: not a zip archive
/// (...)" when our reader cannot read its directory.
void check_torchscript_archive(const std::string& path);

}  // namespace neuralcost
