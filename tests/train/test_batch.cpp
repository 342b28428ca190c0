// A training batch: each sample's crops made in place in its row of the batch tensors are the crops
// multi_crop() makes of it (the loader's in-place path against the plain one, scDINO's and DINO's RGB).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../lib/synthetic.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/train/batch.hpp"

namespace pcdino::train {
namespace {

MultiCropOptions small_crops(int channels, bool rgb) {
  MultiCropOptions o;
  o.global_crops_size = 16;
  o.local_crops_size = 8;
  o.local_crops_number = 3;
  o.rgb = rgb;
  o.vflip = !rgb;
  for (int c = 0; c < channels; ++c) {
    o.mean.push_back(0.25 + 0.1 * c);
    o.std.push_back(0.5 - 0.05 * c);
  }
  return o;
}

TEST(Batch, EachSamplesRowHoldsItsMultiCrop) {
  for (const bool rgb : {false, true}) {
    test::TempDir d;
    test::write_synthetic_dataset(d / "data", 2, 4, 20, PixelType::kUint16,
                                  {{true, 1}, {false, 150}, {true, 1}}, 11);
    const Dataset ds = Dataset::open(d / "data");
    const MultiCropOptions o = small_crops(3, rgb);
    const std::vector<std::size_t> indices = {5, 0, 7};
    const ImageTransform transform{};
    BatchPool pool;
    make_batch(ds, {1, 2, 3}, transform, o, 40, 3, false, &pool);  // given back: its memory is reused
    const Batch batch = make_batch(ds, indices, transform, o, 40, 3, false, &pool);
    ASSERT_EQ(batch.size(), 5u);
    EXPECT_EQ(batch[0].sizes(), (c10::IntArrayRef{3, 3, 16, 16}));
    EXPECT_EQ(batch[4].sizes(), (c10::IntArrayRef{3, 3, 8, 8}));
    for (std::size_t b = 0; b < indices.size(); ++b) {
      const auto crops = multi_crop(ds.load(indices[b], transform), o, sample_seed(40, 3, indices[b]));
      for (std::size_t k = 0; k < crops.size(); ++k) {
        const Image& c = crops[k];
        const auto expected =
            torch::from_blob(const_cast<float*>(c.data.data()), {c.channels, c.height, c.width});
        EXPECT_TRUE(torch::equal(batch[k][static_cast<int64_t>(b)], expected))
            << (rgb ? "RGB" : "channel-wise") << " sample " << b << " crop " << k;
      }
    }
  }
}

TEST(Batch, APooledBatchComesBackOnlyOnceNothingHoldsIt) {
  BatchPool pool;
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 8, 8}, {2, 3, 4, 4}};
  Batch first = pool.take(shapes);
  const void* memory = first[0].data_ptr();
  const Batch second = pool.take(shapes);  // the first is still held
  EXPECT_NE(second[0].data_ptr(), memory);
  // A view of one of its tensors, or a tensor on its storage (no base: what set_ or a saved alias makes),
  // keeps the whole batch out.
  at::Tensor view = first[1].slice(0, 0, 1);
  at::Tensor alias = torch::empty({0}).set_(first[1].storage());
  first.clear();
  EXPECT_NE(pool.take(shapes)[0].data_ptr(), memory) << "a view holds it";
  view.reset();
  EXPECT_NE(pool.take(shapes)[0].data_ptr(), memory) << "a tensor on its storage holds it";
  alias.reset();
  const Batch fourth = pool.take(shapes);
  EXPECT_EQ(fourth[0].data_ptr(), memory) << "the first batch's memory, nobody holding it";
  const Batch other = pool.take({{1, 3, 8, 8}, {1, 3, 4, 4}});
  EXPECT_EQ(other[0].size(0), 1) << "another shape is another batch";
}

TEST(Batch, AnImageWithOtherChannelsIsNamed) {
  test::TempDir d;
  test::write_synthetic_dataset(d / "data", 1, 2, 12, PixelType::kUint8, {{false, 5}, {false, 9}}, 3);
  const Dataset ds = Dataset::open(d / "data");
  try {
    make_batch(ds, {0, 1}, ImageTransform{}, small_crops(3, false), 1, 0, false);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(ds.source(0)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcdino::train
