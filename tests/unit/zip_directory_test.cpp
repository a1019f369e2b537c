// The zip directory reader (core/zip_directory.hpp) on archives written byte by byte here: plain,
// zip64, and damaged ones whose records point outside the file. Real archives (TorchScript files
// written by torch.jit.save, re-zipped by Python's zipfile) are read in cli_profile_test.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/zip_directory.hpp"

namespace neuralcost {
namespace {

struct Le {
  std::string bytes;
  Le& u(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  Le& s(const std::string& text) {
    bytes += text;
    return *this;
  }
};

struct Entry {
  std::string name;
  std::uint64_t compressed, uncompressed;
  std::uint16_t method = 8;
};

/// A zip archive of `entries` (local headers with no data: the reader never looks at them);
/// with `zip64`, every size goes in the zip64 extra field and the end records are zip64's.
std::string make_zip(const std::vector<Entry>& entries, bool zip64, const std::string& comment = "") {
  Le file;
  std::vector<std::uint64_t> offsets;
  for (const Entry& e : entries) {
    offsets.push_back(file.bytes.size());
    file.u(0x04034b50, 4)
        .u(20, 2)
        .u(0, 2)
        .u(e.method, 2)
        .u(0, 4)
        .u(0, 4)
        .u(0, 4)
        .u(0, 4)
        .u(e.name.size(), 2)
        .u(0, 2)
        .s(e.name);
  }
  const std::uint64_t directory = file.bytes.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    Le extra;
    if (zip64) extra.u(0x0001, 2).u(16, 2).u(e.uncompressed, 8).u(e.compressed, 8);
    const std::uint64_t c = zip64 ? 0xFFFFFFFF : e.compressed, u = zip64 ? 0xFFFFFFFF : e.uncompressed;
    file.u(0x02014b50, 4).u(45, 2).u(45, 2).u(0, 2).u(e.method, 2).u(0, 4).u(0, 4).u(c, 4).u(u, 4);
    file.u(e.name.size(), 2).u(extra.bytes.size(), 2).u(0, 2).u(0, 2).u(0, 2).u(0, 4).u(offsets[i], 4);
    file.s(e.name).s(extra.bytes);
  }
  const std::uint64_t directory_size = file.bytes.size() - directory;
  if (zip64) {
    const std::uint64_t record = file.bytes.size();
    file.u(0x06064b50, 4).u(44, 8).u(45, 2).u(45, 2).u(0, 4).u(0, 4).u(entries.size(), 8).u(entries.size(), 8);
    file.u(directory_size, 8).u(directory, 8);
    file.u(0x07064b50, 4).u(0, 4).u(record, 8).u(1, 4);
    file.u(0x06054b50, 4).u(0, 2).u(0, 2).u(0xFFFF, 2).u(0xFFFF, 2).u(0xFFFFFFFF, 4).u(0xFFFFFFFF, 4);
  } else {
    file.u(0x06054b50, 4)
        .u(0, 2)
        .u(0, 2)
        .u(entries.size(), 2)
        .u(entries.size(), 2)
        .u(directory_size, 4)
        .u(directory, 4);
  }
  file.u(comment.size(), 2).s(comment);
  return file.bytes;
}

std::string write(const std::string& bytes, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/nc_zip_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ZipDirectoryTest, ReadsEachEntrysSizes) {
  const auto entries = read_zip_directory(
      write(make_zip({{"archive/data.pkl", 30, 120}, {"archive/data/0", 4096, 4096, 0}}, false, "a comment"), "plain"));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "archive/data.pkl");
  EXPECT_EQ(entries[0].method, 8);
  EXPECT_EQ(entries[0].compressed, 30u);
  EXPECT_EQ(entries[0].uncompressed, 120u);
  EXPECT_EQ(entries[1].method, 0);
  EXPECT_EQ(entries[1].uncompressed, 4096u);
}

TEST(ZipDirectoryTest, Zip64SizesComeFromTheExtraField) {
  const auto entries = read_zip_directory(write(make_zip({{"big", 5'000'000, 6'000'000'000ull}}, true), "zip64"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].uncompressed, 6'000'000'000ull);
  EXPECT_EQ(entries[0].compressed, 5'000'000u);
}

void expect_data_loss(const std::string& bytes, const std::string& name, const std::string& words) {
  try {
    read_zip_directory(write(bytes, name));
    ADD_FAILURE() << name << ": read without an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(ZipDirectoryTest, DamagedArchivesAreOneErrorNeverAReadOutsideTheFile) {
  const std::string good = make_zip({{"a", 10, 20}, {"b", 10, 20}}, false);
  expect_data_loss("", "empty", "not a zip archive");
  expect_data_loss(std::string(300, 'x'), "text", "not a zip archive");
  // the directory said to start past the end of the file
  std::string far = good;
  far[far.size() - 3] = '\x7F';  // the offset's highest byte
  expect_data_loss(far, "far", "central directory");
  // two entries declared, the directory ends after one: the second header is not there
  std::string short_count = make_zip({{"a", 10, 20}}, false);
  short_count[short_count.size() - 12] = 2;  // entries on this disk
  short_count[short_count.size() - 14] = 2;
  expect_data_loss(short_count, "count", "entry");
  // an entry's name longer than the directory
  std::string long_name = good;
  const std::size_t header = long_name.find(std::string("\x50\x4b\x01\x02", 4));
  long_name[header + 28] = '\xFF';
  expect_data_loss(long_name, "name", "lies outside the file");
  // zip64 markers with no locator before the end record
  std::string no_locator = make_zip({{"a", 10, 20}}, false);
  no_locator.replace(no_locator.size() - 12, 4, std::string(4, '\xFF'));
  expect_data_loss(no_locator, "locator", "zip64 locator");
  // a truncated zip64 archive: its locator points past the end
  std::string zip64 = make_zip({{"a", 10, 20}}, true);
  std::string cut = zip64;
  const std::size_t locator = cut.size() - 22 - 20;
  for (int i = 0; i < 8; ++i) cut[locator + 8 + i] = '\x7F';
  expect_data_loss(cut, "cut64", "zip64 end record");
}

}  // namespace
}  // namespace neuralcost
