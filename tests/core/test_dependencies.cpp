// Uses each third-party library once, for real, so that a broken install fails a test with a clear name.
#include <H5Cpp.h>
#include <faiss/IndexFlat.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <tiffio.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("pcdino_deps_" + std::to_string(::getpid()) + "_" + name);
}

bool library_is_mapped(const std::string& fragment) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(fragment) != std::string::npos) return true;
  }
  return false;
}

TEST(Dependencies, TorchMatmulRunsOnOpenBlas) {
  torch::manual_seed(0);
  const auto a = torch::randn({64, 32});
  const auto b = torch::randn({32, 16});
  const auto c = torch::matmul(a, b);
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{64, 16}));
  // Same product, computed by hand for one entry.
  double expected = 0;
  for (int k = 0; k < 32; ++k) expected += a[3][k].item<double>() * b[k][5].item<double>();
  EXPECT_NEAR(c[3][5].item<double>(), expected, 1e-4);
  // Without libopenblas0-pthread LibTorch runs on the reference BLAS, 10-40x slower.
  EXPECT_TRUE(library_is_mapped("openblas"))
      << "LibTorch is not using OpenBLAS: install libopenblas0-pthread";
}

TEST(Dependencies, MpiSingleProcessAllreduce) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double in = 2.5, out = 0;
  ASSERT_EQ(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_DOUBLE_EQ(out, 2.5 * size);
  MPI_Finalize();
}

TEST(Dependencies, Hdf5WriteRead) {
  const auto path = temp_path("h5");
  const std::vector<float> data = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  {
    H5::H5File file(path.string(), H5F_ACC_TRUNC);
    const hsize_t dims[2] = {2, 3};
    H5::DataSpace space(2, dims);
    auto ds = file.createDataSet("features", H5::PredType::NATIVE_FLOAT, space);
    ds.write(data.data(), H5::PredType::NATIVE_FLOAT);
  }
  std::vector<float> back(6);
  H5::H5File file(path.string(), H5F_ACC_RDONLY);
  file.openDataSet("features").read(back.data(), H5::PredType::NATIVE_FLOAT);
  EXPECT_EQ(back, data);
  fs::remove(path);
}

TEST(Dependencies, TiffWriteRead16BitMultiChannel) {
  const auto path = temp_path("tif");
  const int w = 5, h = 4, c = 3;
  std::vector<uint16_t> pixels(w * h * c);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint16_t>(i * 997);
  TIFF* out = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  TIFFSetField(out, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(out, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(out, TIFFTAG_SAMPLESPERPIXEL, c);
  TIFFSetField(out, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(out, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(out, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  for (int row = 0; row < h; ++row) {
    ASSERT_EQ(TIFFWriteScanline(out, pixels.data() + row * w * c, row, 0), 1);
  }
  TIFFClose(out);
  TIFF* in = TIFFOpen(path.c_str(), "r");
  ASSERT_NE(in, nullptr);
  std::vector<uint16_t> back(pixels.size());
  for (int row = 0; row < h; ++row) ASSERT_EQ(TIFFReadScanline(in, back.data() + row * w * c, row, 0), 1);
  TIFFClose(in);
  EXPECT_EQ(back, pixels);
  fs::remove(path);
}

TEST(Dependencies, OpenCvResize) {
  cv::Mat img(4, 4, CV_32FC1, cv::Scalar(0.25f));
  cv::Mat out;
  cv::resize(img, out, cv::Size(8, 8), 0, 0, cv::INTER_CUBIC);
  EXPECT_EQ(out.rows, 8);
  EXPECT_NEAR(out.at<float>(3, 3), 0.25f, 1e-6);
}

TEST(Dependencies, FaissExactInnerProduct) {
  faiss::IndexFlatIP index(2);
  const float bank[] = {1, 0, 0, 1, 0.6f, 0.8f};
  index.add(3, bank);
  const float query[] = {0.8f, 0.6f};
  float dist[2];
  decltype(index.ntotal) ids[2];  // faiss::Index::idx_t before faiss 1.8, faiss::idx_t after
  index.search(1, query, 2, dist, ids);
  // <q, b> = 0.8, 0.6, 0.96: the third bank vector is nearest, then the first.
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(dist[0], 0.96f, 1e-6);
  EXPECT_NEAR(dist[1], 0.8f, 1e-6);
}

TEST(Dependencies, YamlReportsLineAndColumn) {
  const YAML::Node node = YAML::Load("meta:\n  seed: 42\n");
  EXPECT_EQ(node["meta"]["seed"].as<int>(), 42);
  EXPECT_EQ(node["meta"]["seed"].Mark().line, 1);  // zero-based
  EXPECT_EQ(node["meta"]["seed"].Mark().column, 8);
}

TEST(Dependencies, JsonAndCli11) {
  const auto j = nlohmann::json::parse(R"({"mean": [0.5], "std": [0.25]})");
  EXPECT_DOUBLE_EQ(j["std"][0].get<double>(), 0.25);
  CLI::App app;
  int epochs = 0;
  app.add_option("--epochs", epochs);
  const char* argv[] = {"x", "--epochs", "7"};
  app.parse(3, const_cast<char**>(argv));
  EXPECT_EQ(epochs, 7);
}

}  // namespace
