#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../lib/peak_memory.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/packed.hpp"

namespace pcdino {
namespace {

using test::make_image;
using test::TempDir;

void put(const std::string& path, double value, int h = 4, int w = 4, int c = 2) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::vector<double> v(std::size_t(h) * w * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value + static_cast<double>(i);
  write_tiff(path, make_image(h, w, c, PixelType::kUint16, v));
}

TEST(Dataset, OrderAndLabelsFollowImageFolderAndScDino) {
  TempDir d;
  // Order of sorted(os.walk()): folder path first, then file name. "b/x/1.tif" comes after "b/2.tif"
  // because folder "b" < "b/x", though "1" < "2".
  put(d / "b/x/1.tif", 1);
  put(d / "b/2.tif", 2);
  put(d / "a/p/q/3.tif", 3);
  put(d / "a/z.tiff", 4);
  test::write_text(d / "a/notes.txt", "not an image");
  const Dataset ds = Dataset::open(d.path().string(), 0);
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds.relative_path(0), "a/z.tiff");
  EXPECT_EQ(ds.relative_path(1), "a/p/q/3.tif");
  EXPECT_EQ(ds.relative_path(2), "b/2.tif");
  EXPECT_EQ(ds.relative_path(3), "b/x/1.tif");
  EXPECT_EQ(ds.class_index(1), 0);
  EXPECT_EQ(ds.class_index(3), 1);
  // Depth 0: the parent folder names the label.
  EXPECT_EQ(ds.labels(), (std::vector<std::string>{"a", "b", "q", "x"}));
  EXPECT_EQ(ds.labels()[ds.label_index(1)], "q");
  // Depth 1: one folder higher; "a/z.tiff" has no folder two levels up.
  EXPECT_THROW(Dataset::open(d.path().string(), 1), ConfigError);
  EXPECT_EQ(ds.read(2).at(0, 0, 0), 2);
  // A pipeline's meta: the same folder and label depth, read from the configuration.
  MetaConfig meta;
  meta.dataset_dir = d.path().string();
  EXPECT_EQ(Dataset::open(meta).labels(), ds.labels());
  meta.folder_depth_for_labels = 1;
  EXPECT_THROW(Dataset::open(meta), ConfigError);
}

TEST(Dataset, BadLayoutsNameTheFolder) {
  TempDir d;
  EXPECT_THROW(Dataset::open(d / "missing", 0), NoInputError);
  try {
    Dataset::open(d.path().string(), 0);
    FAIL() << "empty dataset accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no class folders"), std::string::npos);
  }
  put(d / "cats/1.tif", 1);
  std::filesystem::create_directories(d.path() / "dogs");
  try {
    Dataset::open(d.path().string(), 0);
    FAIL() << "class without images accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(d / "dogs"), std::string::npos) << e.what();
  }
}

TEST(Dataset, PackRoundTripIsBitIdentical) {
  TempDir d;
  for (int i = 0; i < 7; ++i)
    put(d / ("src/" + std::string(i % 2 ? "odd" : "even") + "/" + std::to_string(i) + ".tif"), 100 * i);
  const Dataset folders = Dataset::open(d / "src", 0);
  PackOptions options;
  options.images_per_shard = 3;      // 3 shards: 3 + 3 + 1
  options.channel_names = {"DAPI"};  // the second channel gets its index as name
  const PackReport report = pack_dataset(folders, d / "packed", options);
  EXPECT_EQ(report.images, 7u);
  EXPECT_EQ(report.shards, 3u);
  const Dataset packed = Dataset::open(d / "packed", 0);
  ASSERT_TRUE(packed.packed());
  ASSERT_EQ(packed.size(), folders.size());
  EXPECT_EQ(packed.classes(), folders.classes());
  EXPECT_EQ(packed.labels(), folders.labels());
  for (std::size_t i = 0; i < folders.size(); ++i) {
    EXPECT_EQ(packed.relative_path(i), folders.relative_path(i));
    EXPECT_EQ(packed.class_index(i), folders.class_index(i));
    EXPECT_EQ(packed.label_index(i), folders.label_index(i));
    const RawImage a = folders.read(i), b = packed.read(i);
    EXPECT_EQ(b.bytes, a.bytes) << i;
    EXPECT_EQ(b.type, a.type);
  }
  EXPECT_NE(packed.source(4).find("shard-00001-of-00003.h5[row 1]"), std::string::npos) << packed.source(4);
  EXPECT_EQ(PackedReader(d / "packed").channel_names(), (std::vector<std::string>{"DAPI", "1"}));
  // A second pack into the same folder is refused unless asked for.
  EXPECT_THROW(pack_dataset(folders, d / "packed", options), CantCreateError);
  options.overwrite = true;
  EXPECT_NO_THROW(pack_dataset(folders, d / "packed", options));
}

// Found by scripts/fuzz pack (core/fuzz/corpus/pack/crash-height-beyond-int.json): a side too large for an
// int was converted to one (undefined behaviour) before any check.
TEST(Dataset, APackManifestsNumbersAreWholeAndInRange) {
  TempDir d;
  put(d / "src/a/1.tif", 1);
  pack_dataset(Dataset::open(d / "src", 0), d / "packed", {});
  const std::string manifest = d / "packed/pack.json";
  std::string text = test::read_text(manifest);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"height\": 4", "\"height\": 6.6e23"},
           {"\"height\": 4", "\"height\": 4.5"},
           {"\"num_images\": 1", "\"num_images\": -1"},
           {"\"count\": 1", "\"count\": 18446744073709551615"}}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    test::write_text(manifest, text.substr(0, at) + to + text.substr(at + from.size()));
    try {
      Dataset::open(d / "packed", 0);
      FAIL() << to << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("not a whole number in ["), std::string::npos)
          << to << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(manifest), std::string::npos) << e.what();
    }
  }
}

// A shard whose datasets claim 2^24 rows in a few KB of unwritten chunks, and a manifest that agrees: every
// shape check passes, and its class indices and paths were read whole (16,777,216 images of "" accepted, 1 GB
// of peak RSS). A shard may claim no more rows than its file can hold, said before it is read.
TEST(Dataset, AShardClaimingMoreRowsThanItsFileHoldsIsRefusedBeforeItIsRead) {
  TempDir d;
  put(d / "src/a/1.tif", 1);
  pack_dataset(Dataset::open(d / "src", 0), d / "packed", {});
  const std::string manifest = d / "packed/pack.json";
  std::string text = test::read_text(manifest);
  constexpr hsize_t kRows = hsize_t(1) << 24;
  for (const std::string& from : {std::string("\"num_images\": 1"), std::string("\"count\": 1")}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    text.replace(at, from.size(), from.substr(0, from.size() - 1) + std::to_string(kRows));
  }
  test::write_text(manifest, text);
  std::string shard_path;
  for (const auto& entry : std::filesystem::directory_iterator(d / "packed"))
    if (entry.path().extension() == ".h5") shard_path = entry.path().string();
  ASSERT_FALSE(shard_path.empty());
  {
    H5::H5File file(shard_path, H5F_ACC_TRUNC);
    const auto chunked = [&](const char* name, const H5::DataType& type, std::vector<hsize_t> dims,
                             std::vector<hsize_t> chunk) {
      H5::DSetCreatPropList props;
      props.setChunk(static_cast<int>(chunk.size()), chunk.data());
      file.createDataSet(name, type, H5::DataSpace(static_cast<int>(dims.size()), dims.data()), props);
    };
    chunked("images", H5::PredType::NATIVE_UINT16, {kRows, 4, 4, 2}, {1, 4, 4, 2});
    chunked("class_index", H5::PredType::NATIVE_INT32, {kRows}, {4096});
    chunked("paths", H5::StrType(H5::PredType::C_S1, H5T_VARIABLE), {kRows}, {4096});
  }
  const test::PeakMemory peak;
  try {
    Dataset::open(d / "packed", 0);
    FAIL() << "a shard of " << std::filesystem::file_size(shard_path) << " bytes opened as " << kRows
           << " images";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(manifest + ": " + shard_path +
                                         " is said to hold 16777216 images in a file of "),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(peak.grown_kib(), 16 * 1024) << "KiB of peak RSS for a file of a few KB";
}

TEST(Dataset, PackRefusesMixedShapesNamingBothFiles) {
  TempDir d;
  put(d / "src/a/1.tif", 0, 4, 4, 2);
  put(d / "src/a/2.tif", 0, 5, 4, 2);
  try {
    pack_dataset(Dataset::open(d / "src", 0), d / "packed", {});
    FAIL() << "mixed shapes packed";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("1.tif' is 4x4x2 uint16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2.tif' is 5x4x2 uint16"), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(d.path() / "packed" / kPackManifest));
}

}  // namespace
}  // namespace pcdino
