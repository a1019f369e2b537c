// write_file_atomically (core/atomic_file.hpp) where someone prepared the names a writer with a
// predictable temporary name would open: PATH.tmp, PATH.tmp.PID and the mkstemp template itself.
// (The replaced file's mode and hard links are tested through the CLI in cli_test.)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "neuralcost/core/atomic_file.hpp"

namespace neuralcost {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AtomicFileTest, FilesAndLinksPlantedAtLikelyTemporaryNamesAreNeitherFollowedNorClobbered) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("nc_atomic_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "result.json";
  const fs::path victim = dir / "victim";
  { std::ofstream(out) << "old"; }
  { std::ofstream(victim) << "precious"; }
  const fs::path by_pid = dir / ("result.json.tmp." + std::to_string(::getpid()));
  const fs::path by_template = dir / "result.json.tmp.XXXXXX";
  const fs::path plain = dir / "result.json.tmp";
  fs::create_symlink(victim, by_pid);
  fs::create_symlink(victim, by_template);
  { std::ofstream(plain) << "planted"; }
  write_file_atomically(out.string(), "new");
  EXPECT_EQ(read_text(out), "new");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_EQ(read_text(victim), "precious");  // no link followed
  for (const fs::path& link : {by_pid, by_template}) {
    EXPECT_TRUE(fs::is_symlink(link)) << link;  // nor moved over the result
    if (fs::is_symlink(link)) EXPECT_EQ(fs::read_symlink(link), victim) << link;
  }
  EXPECT_EQ(read_text(plain), "planted");  // no file clobbered
  std::set<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  // and no temporary of its own left behind
  EXPECT_EQ(names, (std::set<std::string>{"result.json", "victim", by_pid.filename().string(), "result.json.tmp.XXXXXX",
                                          "result.json.tmp"}));
  fs::remove_all(dir);
}

TEST(AtomicFileTest, APrivateDirectoryIsRefusedWhenAnotherUserOwnsItOrOthersCanWriteIt) {
  // the calibration cache's folder (ensure_private_directory): one that another user prepared
  // is never used for our files, nor one that others can write
  const fs::path dir = fs::path(::testing::TempDir()) / ("nc_private_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ensure_private_directory(dir.string());
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
  ensure_private_directory(dir.string());  // ours: used again
  const auto refusal = [&] {
    try {
      ensure_private_directory(dir.string());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(used)");
  };
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_write | fs::perms::others_write);
  EXPECT_NE(refusal().find("can be written by other users (mode 722)"), std::string::npos) << refusal();
  fs::permissions(dir, fs::perms::owner_all);
  if (::geteuid() == 0) {  // only root can give a folder away
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    EXPECT_NE(refusal().find("belongs to another user (uid 65534)"), std::string::npos) << refusal();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neuralcost
