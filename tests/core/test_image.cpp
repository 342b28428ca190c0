#include <gtest/gtest.h>
#include <tiffio.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/image.hpp"

namespace pcdino {
namespace {

using test::make_image;
using test::TempDir;

std::vector<double> ramp(std::size_t n, double start, double step) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i);
  return v;
}

TEST(Image, TiffRoundTripKeepsEveryBit) {
  TempDir dir;
  const RawImage images[] = {make_image(5, 7, 1, PixelType::kUint8, ramp(35, 0, 7)),
                             make_image(6, 4, 5, PixelType::kUint16, ramp(120, 3, 541)),
                             make_image(3, 3, 2, PixelType::kFloat32, ramp(18, -1.5, 0.3125))};
  for (const RawImage& img : images) {
    const std::string path = dir / (std::string(pixel_type_name(img.type)) + ".tif");
    write_tiff(path, img);
    const RawImage back = read_image(path);
    EXPECT_EQ(back.height, img.height);
    EXPECT_EQ(back.width, img.width);
    EXPECT_EQ(back.channels, img.channels);
    EXPECT_EQ(back.type, img.type);
    EXPECT_EQ(back.bytes, img.bytes) << path;
  }
  // Atomic write: no temporary file left beside the result.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 3);
}

// Files up to 64 MiB are read whole and parsed from memory (one read: a 50-page cell's directories cost a
// seek and reads each from the file); larger ones are mapped. Both give every bit, and both name a cut file.
TEST(Image, LargeTiffsAreMappedAndReadAsSmallOnesAre) {
  TempDir dir;
  const int side = 4200;  // 4200 x 4200 x 2 uint16: 70.6 MB, past the whole-read limit
  RawImage big;
  big.height = big.width = side;
  big.channels = 2;
  big.type = PixelType::kUint16;
  big.bytes.resize(std::size_t(side) * side * 2 * 2);
  for (std::size_t i = 0; i < big.bytes.size(); ++i)
    big.bytes[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  const std::string path = dir / "big.tif";
  write_tiff(path, big);
  ASSERT_GT(std::filesystem::file_size(path), std::uintmax_t{64} << 20);
  const RawImage back = read_image(path);
  EXPECT_EQ(back.height, side);
  EXPECT_EQ(back.channels, 2);
  EXPECT_TRUE(back.bytes == big.bytes);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4096);
  try {
    read_image(path);
    FAIL() << "no error for a cut file";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Image, ReadsSeparatePlanes) {
  TempDir dir;
  const std::string path = dir / "planar.tif";
  const int w = 4, h = 3, c = 3;
  TIFF* t = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, c);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_SEPARATE);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 1);
  for (int s = 0; s < c; ++s) {
    for (int y = 0; y < h; ++y) {
      std::vector<std::uint16_t> row(w);
      for (int x = 0; x < w; ++x) row[x] = static_cast<std::uint16_t>(1000 * s + 10 * y + x);
      ASSERT_EQ(TIFFWriteScanline(t, row.data(), y, static_cast<uint16_t>(s)), 1);
    }
  }
  TIFFClose(t);
  const RawImage img = read_image(path);
  ASSERT_EQ(img.channels, 3);
  for (int s = 0; s < c; ++s) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) EXPECT_EQ(img.at(y, x, s), 1000 * s + 10 * y + x);
    }
  }
}

// Files written by tifffile as Python users write them (tests/core/write_tiffs.py says how and what each
// must read as): every sample of the [C, H, W] array tifffile.imread gives, with the channel axis tifffile
// names or, for its default write of [H, W, C] arrays, the last one as the workshop indexes it. Files
// whose pages do not form one 2-D image are refused with their name, never read as their first page.
TEST(Image, MultiPageTiffsReadAsTifffileReadsThem) {
  TempDir dir;
  const std::string script = std::string(PCDINO_SOURCE_DIR) + "/tests/core/write_tiffs.py";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir.path().string()).c_str()), 0)
      << "python3-tifffile is needed for this test (scripts/install-deps installs it)";
  const auto cases = nlohmann::json::parse(std::ifstream(dir / "cases.json"));
  ASSERT_GE(cases.size(), 17u);
  int read = 0, refused = 0;
  for (const auto& c : cases) {
    const std::string path = dir / c["file"].get<std::string>();
    if (c.contains("refused")) {
      try {
        read_image(path);
        ADD_FAILURE() << path << " was read, not refused";
      } catch (const DataError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(path), std::string::npos) << what;
        EXPECT_NE(what.find(c["refused"].get<std::string>()), std::string::npos) << what;
        ++refused;
      }
      continue;
    }
    std::string layout;
    const RawImage img = read_image(path, &layout);
    const auto& shape = c["expect"]["shape"];
    ASSERT_EQ(img.channels, shape[0].get<int>()) << path << " (" << layout << ")";
    ASSERT_EQ(img.height, shape[1].get<int>()) << path;
    ASSERT_EQ(img.width, shape[2].get<int>()) << path;
    ASSERT_EQ(pixel_type_name(img.type), c["expect"]["dtype"].get<std::string>()) << path;
    std::ifstream in(dir / c["expect"]["data"].get<std::string>(), std::ios::binary);
    const std::vector<char> expected{std::istreambuf_iterator<char>(in), {}};
    ASSERT_EQ(expected.size(), img.bytes.size()) << path;
    const std::size_t ps = pixel_size(img.type);
    int wrong = 0;
    for (int ch = 0; ch < img.channels; ++ch) {
      for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
          const std::size_t at_chw = ((std::size_t(ch) * img.height + y) * img.width + x) * ps;
          const std::size_t at_hwc = ((std::size_t(y) * img.width + x) * img.channels + ch) * ps;
          wrong += std::memcmp(expected.data() + at_chw, img.bytes.data() + at_hwc, ps) != 0;
        }
      }
    }
    EXPECT_EQ(wrong, 0) << path << " (" << layout << "): samples differing from tifffile.imread's";
    EXPECT_FALSE(layout.empty());
    ++read;
  }
  EXPECT_EQ(read, 12);
  EXPECT_EQ(refused, 5);
}

TEST(Image, TruncatedTiffIsADataErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir / "cut.tif";
  write_tiff(path, make_image(64, 64, 2, PixelType::kUint16, ramp(64 * 64 * 2, 0, 1)));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    read_image(path);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  test::write_text(dir / "garbage.tif", "this is not a TIFF");
  EXPECT_THROW(read_image(dir / "garbage.tif"), DataError);
  EXPECT_THROW(read_image(dir / "missing.tif"), NoInputError);
}

TEST(Image, ImplausibleSizeInAHeaderIsRefusedBeforeAllocating) {
  TempDir dir;
  const std::string path = dir / "huge.tif";
  TIFF* t = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 200000);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, 200000);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 4);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 1);
  std::vector<std::uint16_t> row(200000 * 4, 7);
  ASSERT_EQ(TIFFWriteScanline(t, row.data(), 0, 0), 1);  // one row of 200000: the header claims 320 GB
  TIFFClose(t);
  try {
    read_image(path);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("implausible image size"), std::string::npos) << e.what();
  }
}

TEST(Image, PngThroughOpenCvIsRgb) {
  TempDir dir;
  cv::Mat bgr(2, 2, CV_8UC3, cv::Scalar(10, 20, 30));  // OpenCV order: B=10, G=20, R=30
  ASSERT_TRUE(cv::imwrite(dir / "a.png", bgr));
  const RawImage img = read_image(dir / "a.png");
  ASSERT_EQ(img.channels, 3);
  EXPECT_EQ(img.at(0, 0, 0), 30);  // R first, as PIL and torchvision give it
  EXPECT_EQ(img.at(1, 1, 2), 10);
}

// A JPEG or PNG whose header claims more pixels than its file can hold compressed is refused before OpenCV
// allocates them (issue #73). A JPEG claiming 20000 x 20000 px in 780 bytes was decoded before: libjpeg
// fills what the file lacks with grey, so the read gave a whole 1.2 GB image (2.4 GB resident with pcdino's
// copy) and no error. The seeds of the image fuzzer still read.
TEST(Image, AJpegOrPngClaimingMorePixelsThanItsFileHoldsIsRefusedBeforeDecoding) {
  TempDir dir;
  const std::string seeds = std::string(PCDINO_SOURCE_DIR) + "/core/fuzz/corpus/image/";
  const auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const auto write = [](const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  };
  std::string jpeg = bytes_of(seeds + "rgb-16x16.jpg");
  const std::size_t sof = jpeg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (std::size_t at : {sof + 5, sof + 7}) jpeg[at] = '\x4E', jpeg[at + 1] = '\x20';  // 20000
  write(dir / "claims.jpg", jpeg);
  std::string png = bytes_of(seeds + "rgb-8x6.png");
  for (std::size_t at : {16, 20}) png.replace(at, 4, std::string("\x00\x00\x75\x30", 4));  // 30000
  write(dir / "claims.png", png);
  // Found by scripts/fuzz image: garbage between two markers, which libjpeg skips, hid the frame's claim.
  write(dir / "garbage.jpg", bytes_of(seeds + "timeout-garbage-before-the-frame.jpg"));
  for (const char* name : {"claims.jpg", "claims.png", "garbage.jpg"}) {
    const std::string path = dir / name;
    try {
      const RawImage img = read_image(path);
      ADD_FAILURE() << name << " read as " << img.width << " x " << img.height;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": its header claims"), std::string::npos) << e.what();
    }
  }
  const RawImage jpg = read_image(seeds + "progressive-16x8.jpg"),
                 gray16 = read_image(seeds + "gray16-4x4.png");
  EXPECT_EQ(jpg.width, 16);
  EXPECT_EQ(jpg.height, 8);
  EXPECT_EQ(gray16.type, PixelType::kUint16);
}

TEST(Image, AFileNamedPngOrJpegHoldingAnotherFormatIsRefusedByItsSignature) {
  TempDir dir;
  // OpenCV chooses its decoder by a file's bytes: a valid 2 x 2 PNM read as an image before, and a 20-byte
  // PNM header claiming 20000 x 20000 px (400 MB) had OpenCV allocate it; neither is a PNG or a JPEG.
  const std::string pnm = "P6\n2 2\n255\n" + std::string(12, '\x7f'), claim = "P5\n20000 20000\n255\n";
  // The image fuzzer's crash: a JPEG's SOI but not OpenCV's JPEG signature (FF D8 FF), and "DICM" at byte
  // 128, so that OpenCV gave it to GDCM, which crashed (SIGSEGV in gdcm::PixmapReader::Read).
  const std::string dicom = test::read_text(std::string(PCDINO_SOURCE_DIR) +
                                            "/core/fuzz/corpus/image/crash-dicom-behind-a-jpeg-soi.jpg");
  ASSERT_EQ(dicom.substr(128, 4), "DICM");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"pnm.png", pnm}, {"pnm.jpg", pnm}, {"claim.jpeg", claim}, {"empty.png", ""}, {"dicom.jpg", dicom}};
  for (const auto& [name, bytes] : files) {
    const std::string path = dir / name;
    test::write_text(path, bytes);
    try {
      const RawImage img = read_image(path);
      ADD_FAILURE() << name << " read as " << img.width << " x " << img.height;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": neither a PNG nor a JPEG"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Image, MinMaxScalingPerChannel) {
  // 2x2, 2 channels: channel 0 ranges 10..40, channel 1 is constant 7.
  const RawImage raw = make_image(2, 2, 2, PixelType::kUint16, {10, 7, 20, 7, 30, 7, 40, 7});
  const Image img = preprocess(raw, {}, "x.tif");
  ASSERT_EQ(img.channels, 2);
  const std::vector<float> c0(img.data.begin(), img.data.begin() + 4),
      c1(img.data.begin() + 4, img.data.end());
  EXPECT_EQ(c0, (std::vector<float>{0.f, 1.f / 3, 2.f / 3, 1.f}));
  EXPECT_EQ(c1, (std::vector<float>{0.f, 0.f, 0.f, 0.f}));  // zero range: zeros, not NaN
}

TEST(Image, ChannelSelectionAndCenterCrop) {
  // 5x5, 3 channels; value = 100*c + 5*y + x.
  std::vector<double> v;
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c) v.push_back(100 * c + 5 * y + x);
  const RawImage raw = make_image(5, 5, 3, PixelType::kFloat32, v);
  const Image img = preprocess(raw, {{2, 0}, 2}, "x.tif");
  ASSERT_EQ(img.channels, 2);
  ASSERT_EQ(img.height, 2);
  // torchvision CenterCrop(2) of 5: top = round(1.5) = 2 (half to even); pixels rows 2..3, cols 2..3.
  // Scaled per channel: values 12, 13, 17, 18 -> 0, 1/6, 5/6, 1.
  EXPECT_NEAR(img.data[1], 1.0 / 6, 1e-6);
  EXPECT_NEAR(img.data[2], 5.0 / 6, 1e-6);
  try {
    preprocess(raw, {{0, 3}, 0}, "/data/x.tif");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/data/x.tif"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("selected_channel_combination_per_run selects channel 3"),
              std::string::npos);
  }
  EXPECT_THROW(preprocess(raw, {{}, 6}, "x.tif"), DataError);
}

}  // namespace
}  // namespace pcdino
