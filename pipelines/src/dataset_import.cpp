#include "pcdino/pipelines/dataset_import.hpp"

#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/image.hpp"

namespace pcdino::pipelines {

namespace fs = std::filesystem;

IdxArray read_idx(const std::string& path) {
  // gzread reads plain files unchanged, so one code path serves both.
  gzFile in = gzopen(path.c_str(), "rb");
  if (in == nullptr) throw NoInputError("cannot open IDX file '" + path + "'");
  auto read_exact = [&](void* buf, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const int r = gzread(in, static_cast<char*>(buf) + got,
                           static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30)));
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  };
  unsigned char magic[4];
  IdxArray idx;
  try {
    if (!read_exact(magic, 4)) throw DataError(path + ": too short for an IDX header");
    if (magic[0] != 0 || magic[1] != 0) throw DataError(path + ": not an IDX file (bad magic number)");
    if (magic[2] != 0x08) {
      throw DataError(path + ": IDX element type 0x" + std::to_string(magic[2]) +
                      " is not supported (only unsigned byte, 0x08)");
    }
    const int ndims = magic[3];
    if (ndims < 1 || ndims > 4) throw DataError(path + ": IDX with " + std::to_string(ndims) + " dimensions");
    std::size_t total = 1;
    for (int d = 0; d < ndims; ++d) {
      unsigned char b[4];
      if (!read_exact(b, 4)) throw DataError(path + ": truncated IDX header");
      const std::uint32_t v =
          (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
      idx.dims.push_back(v);
      if (v != 0 && total > std::numeric_limits<std::size_t>::max() / v)
        throw DataError(path + ": IDX dimensions claim over 2^64 values");
      total *= v;
    }
    // Read in pieces: a header that claims more than the file holds (the fuzzer's 34-byte file claiming
    // 33.7 GB) ends as "truncated" having allocated what the file holds and a piece, not what it claims.
    constexpr std::size_t kPiece = std::size_t{16} << 20;
    while (idx.data.size() < total) {
      const std::size_t at = idx.data.size(), n = std::min(kPiece, total - at);
      idx.data.resize(at + n);
      if (!read_exact(idx.data.data() + at, n)) {
        throw DataError(path + ": truncated IDX data (its header claims " + std::to_string(total) +
                        " bytes)");
      }
    }
  } catch (...) {
    gzclose(in);
    throw;
  }
  gzclose(in);
  return idx;
}

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle_boot"};
  return names;
}

namespace {

std::string find_idx(const std::string& dir, const std::string& stem) {
  for (const std::string& candidate : {stem, stem + ".gz"}) {
    const fs::path p = fs::path(dir) / candidate;
    if (fs::exists(p)) return p.string();
  }
  throw NoInputError("no '" + stem + "' or '" + stem + ".gz' in '" + dir + "'");
}

}  // namespace

ImportReport import_idx_dataset(const ImportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, std::string>> splits;  // (name, file prefix)
  if (options.split == "train" || options.split == "all") splits.emplace_back("train", "train");
  if (options.split == "test" || options.split == "all") splits.emplace_back("test", "t10k");
  if (splits.empty()) throw ConfigError("--split must be train, test or all, got '" + options.split + "'");

  ImportReport report;
  report.class_names = options.class_names;
  if (report.class_names.empty()) {
    if (options.source_dir.find("fashion-mnist") != std::string::npos ||
        options.source_dir.find("fashion_mnist") != std::string::npos) {
      report.class_names = fashion_mnist_class_names();
    } else {
      for (int c = 0; c < 10; ++c) report.class_names.push_back(std::to_string(c));
    }
  }
  for (const auto& name : report.class_names) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw ConfigError("--class-names: '" + name + "' cannot be a folder name");
    }
  }
  report.per_class.assign(report.class_names.size(), 0);

  struct Job {
    std::string path;
    const std::uint8_t* pixels;
  };
  std::vector<IdxArray> keep;  // owns the pixels the jobs point into
  keep.reserve(splits.size() * 2);
  std::vector<Job> jobs;
  int height = 0, width = 0;
  for (const auto& [split, prefix] : splits) {
    const std::string images_path = find_idx(options.source_dir, prefix + "-images-idx3-ubyte");
    const std::string labels_path = find_idx(options.source_dir, prefix + "-labels-idx1-ubyte");
    keep.push_back(read_idx(images_path));
    const IdxArray& images = keep.back();
    const IdxArray labels = read_idx(labels_path);
    if (images.dims.size() != 3) throw DataError(images_path + ": expected 3 dimensions [N, H, W]");
    if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
      throw DataError(labels_path + ": " + std::to_string(labels.dims.empty() ? 0 : labels.dims[0]) +
                      " labels for " + std::to_string(images.dims[0]) + " images in " + images_path);
    }
    height = static_cast<int>(images.dims[1]);
    width = static_cast<int>(images.dims[2]);
    std::vector<std::size_t> taken(report.class_names.size(), 0);
    for (std::size_t i = 0; i < images.dims[0]; ++i) {
      const std::size_t label = labels.data[i];
      if (label >= report.class_names.size()) {
        throw DataError(labels_path + ": label " + std::to_string(label) + " at index " + std::to_string(i) +
                        " has no class name (" + std::to_string(report.class_names.size()) + " given)");
      }
      if (options.per_class > 0 && taken[label] >= options.per_class) continue;
      ++taken[label];
      ++report.per_class[label];
      char name[64];
      std::snprintf(name, sizeof name, "%s_%05zu.tif", split.c_str(), i);
      jobs.push_back({(fs::path(options.output_dir) / report.class_names[label] / name).string(),
                      images.data.data() + i * std::size_t(height) * width});
    }
  }
  for (const auto& name : report.class_names)
    make_directories((fs::path(options.output_dir) / name).string());

  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    RawImage img;
    img.height = height;
    img.width = width;
    img.channels = 1;
    img.type = PixelType::kUint8;
    for (std::size_t k = next++; k < jobs.size(); k = next++) {
      try {
        img.bytes.assign(jobs[k].pixels, jobs[k].pixels + std::size_t(height) * width);
        write_tiff(jobs[k].path, img);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = jobs.size();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.threads); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  report.images = jobs.size();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace pcdino::pipelines
