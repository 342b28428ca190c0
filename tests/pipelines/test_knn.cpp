// Weighted kNN (DINO's eval_knn rule) on cases small enough to compute by hand, the feature file, and the
// kNN and labels stages' outputs and errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/pipelines/features.hpp"
#include "pcdino/pipelines/knn.hpp"
#include "pcdino/pipelines/labels.hpp"

namespace pcdino::pipelines {
namespace {

// Bank on the unit circle: (1,0) and (0.8,0.6) of class 0, (0,1) and (-1,0) of class 1; class 2 is empty.
const std::vector<float> kBank = {1, 0, 0.8F, 0.6F, 0, 1, -1, 0};
const std::vector<int> kBankLabels = {0, 0, 1, 1};
// Queries: (0.6,0.8) of class 1, whose nearest bank point is (0.8,0.6) (cos 0.96) before (0,1) (cos 0.8);
// (0,2) of class 1 (not unit length: cosine must not care); (1,0.1) of class 0.
const std::vector<float> kQueries = {0.6F, 0.8F, 0, 2, 1, 0.1F};
const std::vector<int> kQueryLabels = {1, 1, 0};

TEST(WeightedKnn, HandComputedVotes) {
  KnnOptions o;
  o.ks = {1, 2, 3};
  o.temperature = 1.0;
  const KnnResult r = weighted_knn(kBank, kBankLabels, kQueries, kQueryLabels, 2, 3, o);
  ASSERT_EQ(r.scores.size(), 3U);
  // k = 1: query 1 takes (0.8,0.6)'s class 0 (miss); queries 2 and 3 hit.
  EXPECT_NEAR(r.scores[0].top1, 200.0 / 3, 1e-9);
  EXPECT_NEAR(r.scores[0].top2, 200.0 / 3, 1e-9);  // min(2, k) = 1 class counted
  EXPECT_EQ(r.predictions[0], (std::vector<int>{0, 1, 0}));
  // k = 2: query 1's votes: class 0 exp(0.96) = 2.61 > class 1 exp(0.8) = 2.23: still a miss at top-1,
  // a hit at top-2. Query 2: (0,1) cos 1 (class 1) and (0.8,0.6) cos 0.6 (class 0): class 1 wins.
  EXPECT_NEAR(r.scores[1].top1, 200.0 / 3, 1e-9);
  EXPECT_NEAR(r.scores[1].top2, 100.0, 1e-9);
  EXPECT_NEAR(r.scores[1].top5, 100.0, 1e-9);
  EXPECT_EQ(r.predictions[1], (std::vector<int>{0, 1, 0}));
  // k = 3 for query 1 adds (1,0) (cos 0.6, class 0): 2.61 + 1.82 against 2.23.
  EXPECT_EQ(r.predictions[2][0], 0);
}

TEST(WeightedKnn, TemperatureChangesTheVote) {
  // Query (0.1,1) of class 1; bank: two class-0 points at cos 0.70 and one class-1 point at cos 0.995.
  // k = 3, T = 1: class 0 gets 2 exp(0.70) = 4.03 > exp(0.995) = 2.70 (miss); T = 0.07 sharpens the vote
  // to the nearest point: exp(0.995/0.07) > 2 exp(0.70/0.07) (hit).
  const float a = 0.70F, b = std::sqrt(1 - 0.70F * 0.70F);
  const std::vector<float> bank = {a, b, a, b, 0, 1};
  const std::vector<float> query = {0.1F, 1.0F};
  // The query's cosines: with (a, b): (0.1a + b) / |q|.
  const double nq = std::sqrt(1.01);
  const double cos0 = (0.1 * a + b) / nq, cos1 = 1.0 / nq;
  ASSERT_GT(2 * std::exp(cos0), std::exp(cos1));
  ASSERT_LT(2 * std::exp(cos0 / 0.07), std::exp(cos1 / 0.07));
  KnnOptions o;
  o.ks = {3};
  o.temperature = 1.0;
  EXPECT_EQ(weighted_knn(bank, {0, 0, 1}, query, {1}, 2, 2, o).scores[0].top1, 0.0);
  o.temperature = 0.07;
  EXPECT_EQ(weighted_knn(bank, {0, 0, 1}, query, {1}, 2, 2, o).scores[0].top1, 100.0);
}

TEST(WeightedKnn, RejectsBadArguments) {
  KnnOptions o;
  o.ks = {5};  // the bank has 4
  EXPECT_THROW(weighted_knn(kBank, kBankLabels, kQueries, kQueryLabels, 2, 3, o), std::invalid_argument);
  o.ks = {1};
  o.temperature = 0;
  EXPECT_THROW(weighted_knn(kBank, kBankLabels, kQueries, kQueryLabels, 2, 3, o), std::invalid_argument);
  o.temperature = 0.1;
  EXPECT_THROW(weighted_knn(kBank, {0, 0, 1, 7}, kQueries, kQueryLabels, 2, 3, o), std::invalid_argument);
}

TEST(WeightedKnn, IvfFindsTheSameNeighboursWhenEveryListIsProbed) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  const std::size_t nb = 2000, nq = 300, dim = 16;
  std::vector<float> bank(nb * dim), queries(nq * dim);
  for (auto& v : bank) v = normal(gen);
  for (auto& v : queries) v = normal(gen);
  std::vector<int> bl(nb), ql(nq);
  for (std::size_t i = 0; i < nb; ++i) bl[i] = static_cast<int>(i % 7);
  for (std::size_t i = 0; i < nq; ++i) ql[i] = static_cast<int>(i % 7);
  KnnOptions exact;
  exact.ks = {1, 10};
  KnnOptions ivf = exact;
  ivf.ivf_lists = 8;
  ivf.ivf_probes = 8;
  const auto a = weighted_knn(bank, bl, queries, ql, dim, 7, exact);
  const auto b = weighted_knn(bank, bl, queries, ql, dim, 7, ivf);
  EXPECT_EQ(a.predictions, b.predictions);
}

TEST(WeightedKnn, QueriesInBlocksGiveTheWholesResult) {
  std::mt19937 gen(8);
  std::normal_distribution<float> normal;
  const std::size_t nb = 400, nq = 101, dim = 12;
  std::vector<float> bank(nb * dim), queries(nq * dim);
  for (auto& v : bank) v = normal(gen);
  for (auto& v : queries) v = normal(gen);
  std::vector<int> bl(nb), ql(nq);
  for (std::size_t i = 0; i < nb; ++i) bl[i] = static_cast<int>(i % 5);
  for (std::size_t i = 0; i < nq; ++i) ql[i] = static_cast<int>((i * 7) % 5);
  KnnOptions whole;
  whole.ks = {1, 5, 20};
  KnnOptions blocks = whole;
  blocks.query_block = 7;  // 14 full blocks and one of 3
  const auto a = weighted_knn(bank, bl, queries, ql, dim, 5, whole);
  const auto b = weighted_knn(bank, bl, queries, ql, dim, 5, blocks);
  EXPECT_EQ(a.predictions, b.predictions);
  ASSERT_EQ(a.scores.size(), b.scores.size());
  for (std::size_t i = 0; i < a.scores.size(); ++i) {
    EXPECT_EQ(a.scores[i].top1, b.scores[i].top1) << "k " << a.scores[i].k;
    EXPECT_EQ(a.scores[i].top2, b.scores[i].top2) << "k " << a.scores[i].k;
    EXPECT_EQ(a.scores[i].top5, b.scores[i].top5) << "k " << a.scores[i].k;
  }
  EXPECT_EQ(b.predictions[0].size(), nq);
}

TEST(ConfusionMatrix, CountsTrueAgainstPredicted) {
  const auto m = confusion_matrix({0, 0, 1, 2}, {0, 1, 1, 1}, 3);
  EXPECT_EQ(m, (std::vector<std::vector<long>>{{1, 1, 0}, {0, 1, 0}, {0, 1, 0}}));
}

FeatureSet small_set(std::size_t rows, std::size_t dim) {
  FeatureSet s;
  s.rows = rows;
  s.dim = dim;
  s.class_names = {"Bag", "Coat", "Sandal, open"};  // a comma: CSV quoting
  for (std::size_t i = 0; i < rows * dim; ++i) s.features.push_back(static_cast<float>(i) * 0.25F - 1.0F);
  for (std::size_t i = 0; i < rows; ++i) {
    s.labels.push_back(static_cast<int>(i % 3));
    s.paths.push_back(s.class_names[i % 3] + "/img_" + std::to_string(i) + ".tif");
    s.indices.push_back(static_cast<std::int64_t>(10 * i));
  }
  s.checkpoint = "/x/checkpoint.pth";
  s.checkpoint_key = "teacher";
  s.epoch = 7;
  s.arch = "vit_tiny";
  s.patch_size = 4;
  s.channels = "0";
  s.normalized = true;
  return s;
}

TEST(Features, RoundTripAndNoTemporaryLeft) {
  test::TempDir dir;
  const FeatureSet s = small_set(6, 3);
  const std::string path = dir / "CLS_features/features.h5";
  write_features(path, s);
  const FeatureSet r = read_features(path);
  EXPECT_EQ(r.rows, 6U);
  EXPECT_EQ(r.dim, 3U);
  EXPECT_EQ(r.features, s.features);
  EXPECT_EQ(r.labels, s.labels);
  EXPECT_EQ(r.class_names, s.class_names);
  EXPECT_EQ(r.paths, s.paths);
  EXPECT_EQ(r.indices, s.indices);
  EXPECT_EQ(r.checkpoint, s.checkpoint);
  EXPECT_EQ(r.epoch, 7);
  EXPECT_EQ(r.arch, "vit_tiny");
  EXPECT_TRUE(r.normalized);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "CLS_features"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1U);
}

TEST(Features, CsvExports) {
  test::TempDir dir;
  const FeatureSet s = small_set(3, 2);
  const std::string name = write_feature_csvs(dir.path().string(), s, "_gray", "checkpoint");
  EXPECT_EQ(std::filesystem::path(name).filename(), "channel_gray_model_checkpoint_features.csv");
  EXPECT_EQ(read_file(name, "csv"), "-1,-0.75\n-0.5,-0.25\n0,0.25\n");
  EXPECT_EQ(read_file(dir / "class_labels.csv", "csv"), "Bag\nCoat\n\"Sandal, open\"\n");
  EXPECT_EQ(read_file(dir / "image_paths.csv", "csv"),
            "Bag/img_0.tif\nCoat/img_1.tif\n\"Sandal, open/img_2.tif\"\n");
}

TEST(Features, MissingLabelsNamesFileAndDataset) {
  test::TempDir dir;
  const std::string path = dir / "features.h5";
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const hsize_t dims[2] = {2, 2};
    const float v[4] = {1, 2, 3, 4};
    f.createDataSet("features", H5::PredType::NATIVE_FLOAT, H5::DataSpace(2, dims))
        .write(v, H5::PredType::NATIVE_FLOAT);
  }
  try {
    read_features(path);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'/labels'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_features(dir / "absent.h5"), NoInputError);
}

// Well-formed HDF5 of the wrong shape (the features fuzzer's finds, issue #73): /labels of rank 2 was read
// into a buffer of its first dimension (a heap overflow,
// pipelines/fuzz/corpus/features/crash-labels-of-rank-2); /features claiming 2^31 x 2^31 values in unwritten
// chunks was allocated before anything checked it; an attribute of two values was read into one. Each is a
// DataError naming the file and what is wrong.
TEST(Features, AWellFormedFileOfTheWrongShapeIsRefusedBeforeItIsRead) {
  test::TempDir dir;
  const std::string path = dir / "features.h5";
  using Mutate = std::function<void(H5::H5File&)>;
  const auto refused = [&](const Mutate& mutate, const std::string& what) {
    write_features(path, small_set(4, 2));
    {
      H5::H5File f(path, H5F_ACC_RDWR);
      mutate(f);
    }
    try {
      read_features(path);
      ADD_FAILURE() << "read: " << what;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": " + what), std::string::npos) << e.what();
    }
  };
  refused(
      [](H5::H5File& f) {
        f.unlink("labels");
        const hsize_t dims[2] = {4, 3};
        const std::int32_t v[12] = {};
        f.createDataSet("labels", H5::PredType::NATIVE_INT32, H5::DataSpace(2, dims))
            .write(v, H5::PredType::NATIVE_INT32);
      },
      "/labels has 2 dimensions, not 1");
  refused(
      [](H5::H5File& f) {
        f.unlink("features");
        const hsize_t dims[2] = {hsize_t{1} << 31, hsize_t{1} << 31}, chunk[2] = {8, 8};
        H5::DSetCreatPropList props;
        props.setChunk(2, chunk);
        f.createDataSet("features", H5::PredType::NATIVE_FLOAT, H5::DataSpace(2, dims), props);
      },
      "/features claims more than");
  refused(
      [](H5::H5File& f) {
        f.removeAttr("epoch");
        const hsize_t two = 2;
        const std::int32_t v[2] = {1, 2};
        f.createAttribute("epoch", H5::PredType::NATIVE_INT32, H5::DataSpace(1, &two))
            .write(H5::PredType::NATIVE_INT32, v);
      },
      "attribute 'epoch' holds 2 values, not one");
  refused(
      [](H5::H5File& f) {
        f.unlink("indices");
        const hsize_t three = 3;
        const std::int64_t v[3] = {};
        f.createDataSet("indices", H5::PredType::NATIVE_INT64, H5::DataSpace(1, &three))
            .write(v, H5::PredType::NATIVE_INT64);
      },
      "/indices has 3 rows, /features 4");
  // The features fuzzer's timeout (pipelines/fuzz/corpus/features/timeout-class-names-of-unwritten-chunks):
  // a /class_names of 2^20 strings in chunks never written, read whole before (2.7 s under ASan); a
  // written string takes 16 bytes or more of the file.
  refused(
      [](H5::H5File& f) {
        f.unlink("class_names");
        const hsize_t rows = hsize_t{1} << 20, chunk = 8;
        H5::DSetCreatPropList props;
        props.setChunk(1, &chunk);
        f.createDataSet("class_names", H5::StrType(H5::PredType::C_S1, H5T_VARIABLE), H5::DataSpace(1, &rows),
                        props);
      },
      "/class_names claims more than");
}

PipelineConfig knn_config(const test::TempDir& dir, const std::string& ks) {
  return parse_config("meta:\n  name_of_run: r\n  output_dir: " + dir.path().string() +
                          "\n  seed: 5\ndownstream_analyses:\n  kNN:\n    global:\n      n_neighbors: " + ks +
                          "\n      temperature: 0.1\n",
                      "pipeline.yaml");
}

TEST(KnnStage, WritesWorkshopTextAndJsonWithTheReferenceSplit) {
  test::TempDir dir;
  // 10 rows of 3 well-separated classes: every k up to the bank's size gets them all right.
  FeatureSet s;
  s.rows = 10;
  s.dim = 3;
  s.class_names = {"a", "b", "c"};
  for (std::size_t i = 0; i < s.rows; ++i) {
    const int c = static_cast<int>(i % 3);
    for (int j = 0; j < 3; ++j) s.features.push_back(j == c ? 1.0F : 0.01F * static_cast<float>(i));
    s.labels.push_back(c);
    s.paths.push_back(std::to_string(i));
    s.indices.push_back(static_cast<std::int64_t>(i));
  }
  write_features(dir / "r/CLS_features/features.h5", s);
  const KnnReport r = run_knn_stage(knn_config(dir, "[1, 2]"), KnnOptions{});
  EXPECT_EQ(r.bank, 8U);
  EXPECT_EQ(r.queries, 2U);
  EXPECT_EQ(read_file(dir / "r/kNN/global_kNN.txt", "txt"),
            "Run: r\n1-NN Top1: 100, Top2: 100\n2-NN Top1: 100, Top2: 100\n"
            "--------------------------------------------------\n");
  const auto j = nlohmann::json::parse(read_file(dir / "r/kNN/knn.json", "json"));
  EXPECT_EQ(j["results"].size(), 2U);
  EXPECT_EQ(j["results"][1]["k"], 2);
  EXPECT_DOUBLE_EQ(j["results"][1]["top1"].get<double>(), 100.0);
  EXPECT_EQ(j["bank"], 8);
  // The queries are the last 20% of numpy's permutation with seed 5: the confusion matrix counts them.
  const auto perm = numpy_permutation(10, 5);
  std::vector<std::vector<long>> expected(3, std::vector<long>(3, 0));
  for (std::size_t r2 = 8; r2 < 10; ++r2) ++expected[perm[r2] % 3][perm[r2] % 3];
  EXPECT_EQ(j["confusion_matrix"]["counts"].get<std::vector<std::vector<long>>>(), expected);
}

TEST(KnnStage, KLargerThanTheBankNamesTheOption) {
  test::TempDir dir;
  write_features(dir / "r/CLS_features/features.h5", small_set(10, 2));
  try {
    run_knn_stage(knn_config(dir, "[5, 9]"), KnnOptions{});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("n_neighbors: k = 9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bank (8"), std::string::npos) << e.what();
  }
}

TEST(KnnStage, TooFewRowsNamesTheFile) {
  test::TempDir dir;
  write_features(dir / "r/CLS_features/features.h5", small_set(1, 2));
  try {
    run_knn_stage(knn_config(dir, "[1]"), KnnOptions{});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("features.h5"), std::string::npos) << e.what();
  }
}

TEST(LabelsStage, EmptyHeldOutSplitNamesTheFraction) {
  test::TempDir dir;
  test::write_text(dir / "pipeline.yaml", "");
  std::filesystem::create_directories(dir / "data/a");
  write_tiff(dir / "data/a/x.tif", test::make_image(2, 2, 1, PixelType::kUint8, {1, 2, 3, 4}));
  const auto config =
      parse_config("meta:\n  name_of_run: r\n  output_dir: " + dir.path().string() +
                       "\n  dataset_dir: " + (dir / "data") + "\n  train_datasetsplit_fraction: 1.0\n",
                   "pipeline.yaml");
  try {
    run_labels_stage(config);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("train_datasetsplit_fraction"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcdino::pipelines
