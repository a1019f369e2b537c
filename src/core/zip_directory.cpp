// A zip archive's central directory (zip_directory.hpp), after PKWARE's APPNOTE 6.3: the end
// record at the file's end (after a comment of up to 64 KiB), for zip64 archives its locator
// and the zip64 end record, then one header per entry with its sizes (zip64: in the extra field
// 0x0001 when the 32-bit ones are 0xFFFFFFFF). Every read is checked against the bytes it has.
#include "neuralcost/core/zip_directory.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr double kMaxExpansion = 32, kExpansionAllowance = 64.0 * (1 << 20);

/// Bytes with a decimal prefix, three significant digits ("268 MB").
std::string decimal_bytes(double bytes) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  std::size_t i = 0;
  while (i + 1 < std::size(prefixes) && bytes >= 1000) bytes /= 1000, ++i;
  return fmt::format("{:.3g} {}B", bytes, prefixes[i]);
}

constexpr std::uint32_t kEndSignature = 0x06054b50, kZip64EndSignature = 0x06064b50,
                        kZip64LocatorSignature = 0x07064b50, kEntrySignature = 0x02014b50;
constexpr std::size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56, kEntrySize = 46;
constexpr std::uint64_t kMaxDirectoryBytes = 256ull << 20, kMaxEntries = 1'000'000;

/// Little-endian reads within one buffer; a read past its end is an error naming `what`.
class Bytes {
 public:
  Bytes(const std::string& path, std::vector<unsigned char> data) : path_(path), data_(std::move(data)) {}
  std::size_t size() const { return data_.size(); }
  std::uint64_t u(std::size_t at, int n, const char* what) const {
    if (at > data_.size() || static_cast<std::size_t>(n) > data_.size() - at) damaged(what);
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | data_[at + static_cast<std::size_t>(i)];
    return v;
  }
  std::string text(std::size_t at, std::size_t n, const char* what) const {
    if (at > data_.size() || n > data_.size() - at) damaged(what);
    return std::string(reinterpret_cast<const char*>(data_.data() + at), n);
  }
  [[noreturn]] void damaged(const std::string& what) const {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: a damaged zip archive ({} lies outside the file)", path_, what));
  }

 private:
  const std::string& path_;
  std::vector<unsigned char> data_;
};

std::vector<unsigned char> read_range(std::ifstream& in, const std::string& path, std::uint64_t offset,
                                      std::uint64_t size) {
  std::vector<unsigned char> data(static_cast<std::size_t>(size));
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(size));
  if (!in) throw Error(ErrorCode::kDataLoss, fmt::format("{}: cannot read {} bytes at offset {}", path, size, offset));
  return data;
}

/// The end-of-central-directory record's offset in `tail` (the file's last bytes): the last
/// signature whose comment length reaches exactly the end of the file.
std::optional<std::size_t> find_end_record(const Bytes& tail) {
  if (tail.size() < kEndSize) return std::nullopt;
  for (std::size_t at = tail.size() - kEndSize + 1; at-- > 0;) {
    if (tail.u(at, 4, "the end record") == kEndSignature &&
        at + kEndSize + tail.u(at + 20, 2, "a comment") == tail.size()) {
      return at;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::kNotFound, fmt::format("cannot open '{}'", path));
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  const std::uint64_t tail_size = std::min<std::uint64_t>(file_size, kEndSize + 0xFFFF + kLocatorSize);
  const Bytes tail(path, read_range(in, path, file_size - tail_size, tail_size));
  const std::optional<std::size_t> end = find_end_record(tail);
  if (!end) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not a zip archive (no end-of-central-directory record)", path));
  }
  std::uint64_t entries = tail.u(*end + 10, 2, "the entry count");
  std::uint64_t directory_size = tail.u(*end + 12, 4, "the directory size");
  std::uint64_t directory_offset = tail.u(*end + 16, 4, "the directory offset");
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    // zip64: the locator sits right before the end record and points at the zip64 end record
    if (*end < kLocatorSize || tail.u(*end - kLocatorSize, 4, "the zip64 locator") != kZip64LocatorSignature) {
      tail.damaged("the zip64 locator");
    }
    const std::uint64_t at = tail.u(*end - kLocatorSize + 8, 8, "the zip64 end record's offset");
    if (at > file_size || kZip64EndSize > file_size - at) tail.damaged("the zip64 end record");
    const Bytes record(path, read_range(in, path, at, kZip64EndSize));
    if (record.u(0, 4, "the zip64 end record") != kZip64EndSignature) record.damaged("the zip64 end record");
    entries = record.u(32, 8, "the zip64 entry count");
    directory_size = record.u(40, 8, "the zip64 directory size");
    directory_offset = record.u(48, 8, "the zip64 directory offset");
  }
  if (directory_offset > file_size || directory_size > file_size - directory_offset) {
    tail.damaged("the central directory");
  }
  if (directory_size > kMaxDirectoryBytes || entries > kMaxEntries) {
    throw Error(ErrorCode::kDataLoss,
                fmt::format("{}: a zip directory of {} entries in {} bytes is more than a model file holds (at most "
                            "{} entries, {} MiB)",
                            path, entries, directory_size, kMaxEntries, kMaxDirectoryBytes >> 20));
  }
  const Bytes directory(path, read_range(in, path, directory_offset, directory_size));
  std::vector<ZipEntry> out;
  out.reserve(static_cast<std::size_t>(entries));
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < entries; ++i) {
    if (directory.u(at, 4, "an entry") != kEntrySignature) directory.damaged(fmt::format("entry {}", i));
    ZipEntry e;
    e.method = static_cast<std::uint16_t>(directory.u(at + 10, 2, "an entry's method"));
    e.compressed = directory.u(at + 20, 4, "an entry's size");
    e.uncompressed = directory.u(at + 24, 4, "an entry's size");
    const std::size_t name_size = directory.u(at + 28, 2, "an entry's name");
    const std::size_t extra_size = directory.u(at + 30, 2, "an entry's extra field");
    const std::size_t comment_size = directory.u(at + 32, 2, "an entry's comment");
    e.name = directory.text(at + kEntrySize, name_size, "an entry's name");
    // zip64 sizes: the extra field 0x0001 holds, in this order, those that are 0xFFFFFFFF
    std::size_t extra = at + kEntrySize + name_size;
    const std::size_t extra_end = extra + extra_size;
    while (extra + 4 <= extra_end) {
      const std::uint64_t id = directory.u(extra, 2, "an extra field"),
                          size = directory.u(extra + 2, 2, "an extra field");
      if (extra + 4 + size > extra_end) directory.damaged("an extra field");
      if (id == 0x0001) {
        std::size_t field = extra + 4;
        for (std::uint64_t* v : {&e.uncompressed, &e.compressed}) {
          if (*v != 0xFFFFFFFF) continue;
          if (field + 8 > extra + 4 + size) directory.damaged("a zip64 size");
          *v = directory.u(field, 8, "a zip64 size");
          field += 8;
        }
      }
      extra += 4 + size;
    }
    at += kEntrySize + name_size + extra_size + comment_size;
    if (at > directory.size()) directory.damaged(fmt::format("entry {}", i));
    out.push_back(std::move(e));
  }
  return out;
}

void check_torchscript_archive(const std::string& path) {
  std::vector<ZipEntry> entries;
  try {
    entries = read_zip_directory(path);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kDataLoss) throw;
    std::string why = e.what();  // "PATH: not a zip archive (...)"
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    throw Error(ErrorCode::kDataLoss,
                fmt::format("{}: not a loadable TorchScript file: {}; torch.jit.save writes a zip archive", path, why));
  }
  double expanded = 0;  // sums of 64-bit sizes: a double cannot overflow here
  for (const ZipEntry& e : entries) expanded += static_cast<double>(e.uncompressed);
  std::error_code ec;
  const auto size = static_cast<double>(std::filesystem::file_size(path, ec));
  if (!ec && expanded > size * kMaxExpansion + kExpansionAllowance) {
    throw Error(ErrorCode::kDataLoss,
                fmt::format("{}: refused: its zip entries expand to {} from a {} file ({:.0f}x); torch.jit.save "
                            "stores tensors uncompressed, so more than {}x the file plus {} is a decompression bomb",
                            path, decimal_bytes(expanded), decimal_bytes(size), expanded / std::max(size, 1.0),
                            kMaxExpansion, decimal_bytes(kExpansionAllowance)));
  }
}

}  // namespace neuralcost
