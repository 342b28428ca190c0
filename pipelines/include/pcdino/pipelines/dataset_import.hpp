// `pcdino dataset import`: a labelled dataset in IDX files (MNIST, Fashion-MNIST: Debian's
// dataset-fashion-mnist puts them under /usr/share/datasets/fashion-mnist/) written out in the
// class-folder TIFF layout the workshop datasets use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pcdino::pipelines {

/// An IDX file (LeCun et al.'s MNIST format: big-endian dimensions, unsigned byte data), gzipped or not.
struct IdxArray {
  std::vector<std::uint32_t> dims;  ///< e.g. [60000, 28, 28] for images, [60000] for labels
  std::vector<std::uint8_t> data;   ///< product(dims) values, row-major
};

/// Reads `path`. Throws NoInputError if it cannot be opened, DataError naming the file if the magic
/// number, element type (only unsigned byte, 0x08) or length is wrong.
IdxArray read_idx(const std::string& path);

/// Fashion-MNIST's class names, made folder-safe ("T-shirt/top" -> "T-shirt_top", "Ankle boot" ->
/// "Ankle_boot"), in label order 0..9.
const std::vector<std::string>& fashion_mnist_class_names();

struct ImportOptions {
  std::string source_dir;     ///< holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  std::string output_dir;     ///< receives one folder per class
  std::string split = "all";  ///< "train", "test" or "all"
  std::size_t per_class = 0;  ///< at most this many images per class and split (first in file order); 0 = all
  std::vector<std::string> class_names;  ///< label -> folder name; empty: Fashion-MNIST's names if the
                                         ///< source path names fashion-mnist, else "0", "1", ...
  int threads = 2;                       ///< writer threads
};

struct ImportReport {
  std::size_t images = 0;
  std::vector<std::size_t> per_class;  ///< images written per class
  std::vector<std::string> class_names;
  double seconds = 0;
};

/// Writes `{output_dir}/{class}/{split}_{index:05d}.tif` (1-channel uint8 TIFF, index within the split's
/// IDX file) for the selected images. Each file is written atomically. Throws NoInputError if a split's
/// files are missing, DataError if image and label counts differ or a label has no class name,
/// ConfigError for a bad split name.
ImportReport import_idx_dataset(const ImportOptions& options);

}  // namespace pcdino::pipelines
