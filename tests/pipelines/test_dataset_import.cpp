#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/pipelines/dataset_import.hpp"

namespace pcdino::pipelines {
namespace {

using test::TempDir;

std::string idx_bytes(const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  s.append(data.begin(), data.end());
  return s;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(Idx, ReadsPlainAndGzipped) {
  TempDir d;
  const std::vector<std::uint8_t> data = {1, 2, 3, 4, 5, 6};
  test::write_text(d / "a-idx", idx_bytes({2, 3}, data));
  write_gz(d / "a-idx.gz", idx_bytes({2, 3}, data));
  for (const std::string name : {"a-idx", "a-idx.gz"}) {
    const IdxArray a = read_idx(d / name);
    EXPECT_EQ(a.dims, (std::vector<std::uint32_t>{2, 3}));
    EXPECT_EQ(a.data, data);
  }
  test::write_text(d / "short", idx_bytes({2, 3}, {1, 2}));
  EXPECT_THROW(read_idx(d / "short"), DataError);
  test::write_text(d / "float", std::string{0, 0, 0x0D, 1, 0, 0, 0, 0});
  EXPECT_THROW(read_idx(d / "float"), DataError);
  EXPECT_THROW(read_idx(d / "missing"), NoInputError);
}

// A header that claims more than its file holds is refused as truncated, naming the file, before it is
// allocated (the fuzzer's input, pipelines/fuzz/corpus/idx/crash-claims-more-than-it-holds: 34 bytes claiming
// 3,741,319,170 x 3 x 3 bytes, 33.7 GB, which was allocated whole: std::bad_alloc); dimensions whose product
// passes 2^64 are refused too (they wrapped round to a small size before).
TEST(Idx, AHeaderClaimingMoreThanTheFileIsRefusedBeforeItIsAllocated) {
  TempDir d;
  const std::string found =
      std::string(PCDINO_SOURCE_DIR) + "/pipelines/fuzz/corpus/idx/crash-claims-more-than-it-holds";
  try {
    read_idx(found);
    FAIL() << "a 34-byte file claiming 33.7 GB was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(found + ": truncated IDX data"), std::string::npos) << e.what();
  }
  test::write_text(d / "wraps", idx_bytes({0x10000, 0x10000, 0x10000, 0x10000}, {1, 2, 3}));
  try {
    read_idx(d / "wraps");
    FAIL() << "2^64 values claimed and read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("over 2^64 values"), std::string::npos) << e.what();
  }
}

TEST(Import, WritesClassFoldersWithPerClassLimit) {
  TempDir d;
  // 6 training images of 2x2 with labels 0,1,0,2,0,1; 2 test images with labels 2,2.
  std::vector<std::uint8_t> train_pixels, test_pixels;
  for (int i = 0; i < 6 * 4; ++i) train_pixels.push_back(static_cast<std::uint8_t>(i));
  for (int i = 0; i < 2 * 4; ++i) test_pixels.push_back(static_cast<std::uint8_t>(200 + i));
  const std::string src = d / "fashion-mnist";
  std::filesystem::create_directories(src);
  write_gz(src + "/train-images-idx3-ubyte.gz", idx_bytes({6, 2, 2}, train_pixels));
  write_gz(src + "/train-labels-idx1-ubyte.gz", idx_bytes({6}, {0, 1, 0, 2, 0, 1}));
  test::write_text(src + "/t10k-images-idx3-ubyte", idx_bytes({2, 2, 2}, test_pixels));
  test::write_text(src + "/t10k-labels-idx1-ubyte", idx_bytes({2}, {2, 2}));

  ImportOptions o;
  o.source_dir = src;
  o.output_dir = d / "out";
  o.per_class = 2;
  o.class_names = {"zero", "one", "two"};
  const ImportReport r = import_idx_dataset(o);
  EXPECT_EQ(r.images, 2u + 2 + 1 + 2);  // train: two "zero", two "one", one "two"; test: two "two"
  EXPECT_EQ(r.per_class, (std::vector<std::size_t>{2, 2, 3}));

  const Dataset ds = Dataset::open(d / "out", 0);
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"one", "two", "zero"}));
  ASSERT_EQ(ds.size(), 7u);
  EXPECT_EQ(ds.relative_path(2), "two/test_00000.tif");
  EXPECT_EQ(ds.relative_path(4), "two/train_00003.tif");
  const RawImage img = ds.read(4);  // training image 3: pixels 12..15
  EXPECT_EQ(img.at(0, 0, 0), 12);
  EXPECT_EQ(img.at(1, 1, 0), 15);
  EXPECT_EQ(img.channels, 1);

  // Without names, a source named fashion-mnist gets Fashion-MNIST's classes; labels beyond them fail.
  ImportOptions fm = o;
  fm.class_names.clear();
  fm.output_dir = d / "fm";
  fm.split = "test";
  EXPECT_EQ(import_idx_dataset(fm).class_names.at(2), "Pullover");
  ImportOptions too_few = o;
  too_few.class_names = {"zero"};
  EXPECT_THROW(import_idx_dataset(too_few), DataError);
  ImportOptions bad_split = o;
  bad_split.split = "validation";
  EXPECT_THROW(import_idx_dataset(bad_split), ConfigError);
}

}  // namespace
}  // namespace pcdino::pipelines
