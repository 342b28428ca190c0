// A packed dataset staged on a node's local disk (core/staging.hpp): the copy, its reuse, its removal by the
// last holder, and what is refused.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/packed.hpp"
#include "pcdino/core/staging.hpp"

namespace pcdino {
namespace {

namespace fs = std::filesystem;
using test::make_image;
using test::TempDir;

// A packed dataset of `n` 8x8x2 uint16 images in 2 shards under d/packed (class folders in d/src).
std::string packed_dataset(const TempDir& d, int n = 6) {
  for (int i = 0; i < n; ++i) {
    std::vector<double> v(8 * 8 * 2);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = 37.0 * i + static_cast<double>(k);
    const std::string path = d / ("src/" + std::string(i % 2 ? "b" : "a") + "/" + std::to_string(i) + ".tif");
    fs::create_directories(fs::path(path).parent_path());
    write_tiff(path, make_image(8, 8, 2, PixelType::kUint16, v));
  }
  PackOptions options;
  options.images_per_shard = static_cast<std::size_t>(n / 2);
  pack_dataset(Dataset::open(d / "src", 0), d / "packed", options);
  return d / "packed";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::to_string(to_int(e.code())) + " " + e.what();
  }
  return "no error";
}

class Staging : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("SLURMD_NODENAME", "node7", 1); }
  void TearDown() override { ::unsetenv("SLURMD_NODENAME"); }
};

TEST_F(Staging, CopiesOnceGivesTheSameImagesAndTheLastHolderRemovesIt) {
  TempDir d;
  const std::string source = packed_dataset(d);
  fs::create_directories(d / "scratch");
  StagedDataset first = StagedDataset::stage(source, d / "scratch");
  EXPECT_TRUE(first.report().copied);
  const std::string user = d / ("scratch/pcdino-" + std::to_string(::geteuid()));
  EXPECT_EQ(fs::path(first.dir()).parent_path(), fs::path(user));
  EXPECT_EQ(fs::path(first.dir()).filename().string().rfind("node7-", 0), 0u) << first.dir();
  EXPECT_EQ(fs::status(user).permissions() & fs::perms::all, fs::perms::owner_all);
  // Every file of the pack, byte for byte, and the record of what was verified.
  std::uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(sha256_of_file(first.dir() + "/" + name), sha256_of_file(entry.path().string())) << name;
    bytes += fs::file_size(entry.path());
  }
  EXPECT_EQ(first.report().bytes, bytes);
  EXPECT_NE(read_text(first.dir() + "/stage.json").find(sha256_of_file(source + "/pack.json")),
            std::string::npos);
  const Dataset a = Dataset::open(source, 0), b = Dataset::open(first.dir(), 0);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b.read(i).bytes, a.read(i).bytes) << i;

  // A second process (rank) on the node takes the same copy without copying.
  StagedDataset second = StagedDataset::stage(source, d / "scratch");
  EXPECT_FALSE(second.report().copied);
  EXPECT_EQ(second.dir(), first.dir());
  // The first to finish leaves it to the other; the last removes it.
  EXPECT_FALSE(first.release(true));
  EXPECT_TRUE(fs::exists(first.dir()));
  EXPECT_TRUE(second.release(true));
  EXPECT_FALSE(fs::exists(first.dir()));
}

TEST_F(Staging, AKeptCopyIsReusedAndAChangedSourceIsCopiedAgain) {
  TempDir d;
  const std::string source = packed_dataset(d);
  fs::create_directories(d / "scratch");
  std::string dir;
  {
    StagedDataset s = StagedDataset::stage(source, d / "scratch");
    dir = s.dir();
    EXPECT_FALSE(s.release(false));  // kept (keep_staged_dataset), as by a job that stops to be requeued
  }
  { StagedDataset s = StagedDataset::stage(source, d / "scratch"); }  // destroyed without release: kept
  StagedDataset again = StagedDataset::stage(source, d / "scratch");
  EXPECT_FALSE(again.report().copied) << "a requeued job reuses the copy";
  EXPECT_EQ(again.dir(), dir);
  again.release(false);
  // A copy missing a shard is no copy: made again.
  fs::remove(dir + "/shard-00001-of-00002.h5");
  StagedDataset remade = StagedDataset::stage(source, d / "scratch");
  EXPECT_TRUE(remade.report().copied);
  EXPECT_TRUE(fs::exists(dir + "/shard-00001-of-00002.h5"));
  remade.release(false);
  // The dataset packed again (another shard time): another copy.
  fs::last_write_time(source + "/shard-00000-of-00002.h5",
                      fs::last_write_time(source + "/shard-00000-of-00002.h5") + std::chrono::seconds(5));
  StagedDataset changed = StagedDataset::stage(source, d / "scratch");
  EXPECT_TRUE(changed.report().copied);
  EXPECT_NE(changed.dir(), dir);
}

TEST_F(Staging, RefusesClassFoldersAMissingScratchAndAFolderOthersCanEnter) {
  TempDir d;
  const std::string source = packed_dataset(d);
  fs::create_directories(d / "scratch");
  EXPECT_EQ(message_of([&] { StagedDataset::stage(d / "src", d / "scratch"); }).substr(0, 3), "78 ");
  EXPECT_NE(message_of([&] { StagedDataset::stage(d / "src", d / "scratch"); }).find("pcdino dataset pack"),
            std::string::npos);
  const std::string missing = message_of([&] { StagedDataset::stage(source, d / "nowhere"); });
  EXPECT_EQ(missing.substr(0, 3), "73 ") << missing;
  EXPECT_NE(missing.find("is not a folder on node7"), std::string::npos) << missing;
  EXPECT_EQ(message_of([&] { StagedDataset::stage(source, "relative/scratch"); }).substr(0, 3), "78 ");
  // The user's folder open to others: another user could have changed a copy there.
  const std::string user = d / ("scratch/pcdino-" + std::to_string(::geteuid()));
  fs::create_directories(user);
  fs::permissions(user, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_all);
  const std::string open = message_of([&] { StagedDataset::stage(source, d / "scratch"); });
  EXPECT_EQ(open.substr(0, 3), "73 ") << open;
  EXPECT_NE(open.find("mode 0777"), std::string::npos) << open;
  fs::remove(user);
  // A link to a folder of the user's own, as another user could plant: not followed.
  fs::create_directories(d / "elsewhere");
  fs::permissions(d / "elsewhere", fs::perms::owner_all);
  fs::create_directory_symlink(d / "elsewhere", user);
  EXPECT_NE(message_of([&] { StagedDataset::stage(source, d / "scratch"); }).find("is not a folder"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(d / "elsewhere"));
  fs::remove(user);
  // A scratch folder others can write without the sticky bit: ours could be swapped for theirs.
  fs::permissions(d / "scratch", fs::perms::all);
  const std::string open_scratch = message_of([&] { StagedDataset::stage(source, d / "scratch"); });
  EXPECT_NE(open_scratch.find("can be written by other users (mode 0777) and has no sticky bit"),
            std::string::npos)
      << open_scratch;
  fs::permissions(d / "scratch", fs::perms::all | fs::perms::sticky_bit);
  EXPECT_NO_THROW(StagedDataset::stage(source, d / "scratch").release(true)) << "mode 1777, as /tmp";
  if (::geteuid() == 0) {  // another user's folder, made first (root can make one): read in place
    fs::remove_all(user);
    fs::create_directories(user);
    fs::permissions(user, fs::perms::owner_all);
    ASSERT_EQ(::chown(user.c_str(), 65534, 65534), 0);
    StagedDataset theirs = StagedDataset::stage(source, d / "scratch");
    EXPECT_TRUE(theirs.report().in_place);
    EXPECT_EQ(theirs.dir(), source);
    EXPECT_FALSE(theirs.release(true));
    EXPECT_TRUE(fs::is_empty(user));
  }
}

TEST_F(Staging, ProcessesOfANodeCopyOnceAndTheLastToFinishRemovesTheCopy) {
  TempDir d;
  const std::string source = packed_dataset(d);
  fs::create_directories(d / "scratch");
  constexpr int kProcesses = 4;  // the ranks of one node
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        StagedDataset s = StagedDataset::stage(source, d / "scratch");
        code |= s.report().copied ? 1 : 0;
        test::write_text(d / ("ready/" + std::to_string(i)), "");
        // Every process holds the copy before any lets go, as the ranks of a job do.
        for (int wait = 0; wait < 6000; ++wait) {
          std::size_t ready = 0;
          for ([[maybe_unused]] const auto& f : fs::directory_iterator(d / "ready")) ++ready;
          if (ready == kProcesses) break;
          ::usleep(10000);
        }
        code |= s.release(true) ? 2 : 0;
      } catch (...) {
        code = 64;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  int copied = 0, removed = 0;
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 64) << "a process failed to stage";
    copied += WEXITSTATUS(status) & 1;
    removed += (WEXITSTATUS(status) & 2) >> 1;
  }
  EXPECT_EQ(copied, 1) << "one copier per node";
  EXPECT_EQ(removed, 1) << "the last holder removes the copy";
  for (const auto& entry : fs::directory_iterator(d / ("scratch/pcdino-" + std::to_string(::geteuid()))))
    EXPECT_FALSE(entry.is_directory()) << entry.path() << " is left";
}

TEST_F(Staging, AScratchTooSmallIsRefusedWithBothSizes) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir d;
  const std::string source = packed_dataset(d, 40);  // 40 x 256 B of pixels and the HDF5 files' own bytes
  const std::string small = d / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=16k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  const std::string e = message_of([&] { StagedDataset::stage(source, small); });
  ::umount(small.c_str());
  EXPECT_EQ(e.substr(0, 3), "73 ") << e;
  EXPECT_NE(e.find(small + " on node7 has "), std::string::npos) << e;
  EXPECT_NE(e.find(" free, the dataset " + source + " needs "), std::string::npos) << e;
  EXPECT_NE(e.find(" GiB (" + std::to_string([&] {
                     std::uint64_t n = 0;
                     for (const auto& f : fs::directory_iterator(source)) n += fs::file_size(f.path());
                     return n;
                   }()) +
                   " bytes)"),
            std::string::npos)
      << e;
}

TEST(Sha256, MatchesTheStandardsVectors) {
  TempDir d;
  test::write_text(d / "abc", "abc");
  // FIPS 180-2, appendix B.1.
  EXPECT_EQ(sha256_of_file(d / "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  test::write_text(d / "empty", "");
  EXPECT_EQ(sha256_of_file(d / "empty"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_THROW(sha256_of_file(d / "missing"), NoInputError);
}

}  // namespace
}  // namespace pcdino
