// Files in folders that other users can write (issue #70): what root or a stage reads there cannot block it
// or drown it, and what it writes there cannot be redirected by a link planted in advance.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(UntrustedFiles, AFifoALinkAndAHugeFileAreRefusedOrCapped) {
  test::TempDir d;
  const std::string fifo = (d.path() / "pcdino_1_0.prom").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  // A blocking open would wait here for a writer that never comes.
  try {
    read_regular_file(fifo, 1 << 20);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const NoInputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  fs::create_symlink("/etc/hostname", d.path() / "link.prom");
  try {
    read_regular_file((d.path() / "link.prom").string(), 1 << 20);
    ADD_FAILURE() << "a link was followed";
  } catch (const NoInputError& e) {
    EXPECT_NE(std::string(e.what()).find("a symbolic link"), std::string::npos) << e.what();
  }
  // 64 GiB of holes: read up to the cap only.
  const fs::path sparse = d.path() / "sparse.prom";
  std::ofstream(sparse) << "pcdino_build_info{";
  fs::resize_file(sparse, std::uintmax_t{64} << 30);
  EXPECT_EQ(read_regular_file(sparse.string(), 4096).size(), 4096u);
  std::ofstream(d.path() / "small.prom") << "abc";
  EXPECT_EQ(read_regular_file((d.path() / "small.prom").string(), 4096), "abc");
}

TEST(UntrustedFiles, AWriteGoesNeitherThroughALinkAtTheFileNorAtATemporaryName) {
  test::TempDir d;
  const fs::path target = d.path() / "victim";
  std::ofstream(target) << "root's own file";
  const std::string path = (d.path() / "report.json").string();
  // A user plants links at the temporary names a writer of `path` would use, and at `path` itself.
  std::set<std::string> planted;
  for (int i = 0; i < 50; ++i) planted.insert(temporary_name(path));
  for (const auto& name : planted) fs::create_symlink(target, name);
  fs::create_symlink(target, path);
  write_file_atomic(path, "the report");
  EXPECT_EQ(slurp(target), "root's own file") << "a write followed a planted link";
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_EQ(slurp(path), "the report");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::others_write, fs::perms::none);
}

TEST(UntrustedFiles, TemporaryNamesAreNewEachTimeAndKeepTheirShape) {
  test::TempDir d;
  const std::string path = (d.path() / "f").string();
  std::string first, second;
  const int a = create_temporary(path, first, 0600), b = create_temporary(path, second, 0600);
  ::close(a), ::close(b);
  EXPECT_NE(first, second);
  EXPECT_EQ(remove_temporaries(d.path().string(), "f").size(), 2u) << "remove_temporaries knows the names";
}

}  // namespace
}  // namespace pcdino
