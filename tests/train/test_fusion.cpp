// Unit tests of the gradient fusion's buffers and scheduling, and of the MPI communicator in a world of
// one (several ranks: tests/train/test_distributed.sh under mpirun).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/comm.hpp"
#include "pcdino/train/fusion.hpp"

namespace pcdino::train {
namespace {

// Records the reductions started and doubles each buffer (as a sum over two ranks holding the same
// gradients would), so that the test sees when buffers go out and that the results come back.
class RecordingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "recording"; }
  void allreduce(std::vector<torch::Tensor>& tensors, ReduceOp) override {
    for (auto& t : tensors) t.mul_(2);
  }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  torch::Tensor allgather(const torch::Tensor& t) override { return torch::cat({t, t}); }
  void barrier() override {}
  void start_allreduce(torch::Tensor flat, ReduceOp) override {
    started.push_back(flat.numel());
    flat.mul_(2);
  }
  void wait_pending() override { ++waits; }
  std::vector<int64_t> started;
  int waits = 0;
};

std::vector<torch::Tensor> chain_params(torch::nn::Sequential& net) {
  std::vector<torch::Tensor> params;
  for (auto& p : net->parameters()) params.push_back(p);
  return params;
}

TEST(GradientFusion, BuffersInReverseOrderUnderTheThreshold) {
  torch::nn::Sequential net(torch::nn::Linear(4, 8), torch::nn::Linear(8, 2));  // 32+8 then 16+2 floats
  RecordingCommunicator comm;
  FusionOptions o;
  o.threshold_bytes = 20 * 4;  // 20 floats
  GradientFusion fusion(comm, chain_params(net), o);
  const auto& b = fusion.buckets();
  // Reverse order: bias2 (2), weight2 (16) fit in 20; bias1 (8) opens a new one; weight1 (32) is alone.
  ASSERT_EQ(b.size(), 3U);
  EXPECT_EQ(b[0].params, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(b[1].params, (std::vector<std::size_t>{1}));
  EXPECT_EQ(b[2].params, (std::vector<std::size_t>{0}));
  EXPECT_EQ(b[0].flat.numel(), 18);

  o.first_bucket_bytes = 4 * 4;  // DDP-style small first buffer: bias2 alone
  GradientFusion ddp(comm, chain_params(net), o);
  EXPECT_EQ(ddp.buckets().front().params, (std::vector<std::size_t>{3}));
}

// Two linear layers in three buffers of at most 20 floats (18, 8 and 32 gradients), hooks attached.
struct TwoLayers {
  torch::nn::Sequential net{torch::nn::Linear(4, 8), torch::nn::Linear(8, 2)};
  RecordingCommunicator comm;
  GradientFusion fusion{comm, chain_params(net), FusionOptions{20 * 4, 0}};
  torch::Tensor x = torch::randn({5, 4});
  TwoLayers() { fusion.attach(); }
  void backward() { net->forward(x).pow(2).sum().backward(); }
};

TEST(GradientFusion, StartsDuringBackwardAndAveragesIntoGrad) {
  torch::manual_seed(0);
  TwoLayers t;
  t.backward();
  EXPECT_EQ(t.comm.started, (std::vector<int64_t>{18, 8, 32}))
      << "all three buffers left during backward, in order";
  EXPECT_EQ(t.comm.waits, 0);
  std::vector<torch::Tensor> local;
  for (auto& p : t.net->parameters()) local.push_back(p.grad().clone());
  t.fusion.finish();
  EXPECT_EQ(t.comm.waits, 1);
  const auto params = t.net->parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    EXPECT_TRUE(torch::allclose(params[k].grad(), 2 * local[k]))
        << "parameter " << k << " gets its buffer's result";
  }
  // The next step starts from clean buffers.
  for (auto& p : t.net->parameters()) p.mutable_grad().zero_();
  t.comm.started.clear();
  t.backward();
  t.fusion.finish();
  EXPECT_EQ(t.comm.started.size(), 3U);
  EXPECT_TRUE(torch::allclose(params[0].grad(), 2 * local[0]));
}

// A step abandoned after backward started its buffers (a CUDA graph capture that threw before finish()):
// the next step sends every buffer again, as the ranks whose step did not fail do.
TEST(GradientFusion, AnAbandonedStepLeavesTheNextStepWhole) {
  torch::manual_seed(0);
  TwoLayers t;
  t.backward();
  ASSERT_EQ(t.comm.started.size(), 3U);
  t.fusion.abandon();
  EXPECT_EQ(t.comm.waits, 1) << "the started reductions are waited for (NCCL: its stream joins back)";
  for (auto& p : t.net->parameters()) p.mutable_grad().zero_();
  t.comm.started.clear();
  t.backward();
  EXPECT_EQ(t.comm.started, (std::vector<int64_t>{18, 8, 32})) << "every buffer is sent again";
  const auto local = t.net->parameters()[0].grad().clone();
  t.fusion.finish();
  EXPECT_TRUE(torch::allclose(t.net->parameters()[0].grad(), 2 * local));
}

TEST(GradientFusion, UnusedParameterIsSentAsZeros) {
  torch::nn::Linear used(3, 1), unused(3, 1);
  RecordingCommunicator comm;
  std::vector<torch::Tensor> params = {unused->weight, used->weight};
  GradientFusion fusion(comm, params, {});  // one buffer
  fusion.attach();
  used->forward(torch::ones({1, 3})).sum().backward();
  EXPECT_TRUE(comm.started.empty()) << "the buffer waits for the unused parameter";
  fusion.finish();
  ASSERT_EQ(comm.started, (std::vector<int64_t>{6}));
  EXPECT_TRUE(torch::equal(unused->weight.grad(), torch::zeros({1, 3})));
  EXPECT_TRUE(torch::allclose(used->weight.grad(), 2 * torch::ones({1, 3})));
}

TEST(MpiCommunicator, WorldOfOne) {
  MpiWorld world;
  auto comm = make_mpi_communicator(world);
  ASSERT_EQ(comm->size(), 1);
  std::vector<torch::Tensor> t = {torch::tensor({1.0F, 2.0F}), torch::tensor({3.0}, torch::kDouble)};
  comm->allreduce(t, ReduceOp::kAverage);
  EXPECT_TRUE(torch::equal(t[0], torch::tensor({1.0F, 2.0F})));
  comm->start_allreduce(t[0], ReduceOp::kSum);
  comm->wait_pending();
  EXPECT_TRUE(torch::equal(t[0], torch::tensor({1.0F, 2.0F})));
  EXPECT_TRUE(torch::equal(comm->allgather(torch::tensor({5L})), torch::tensor({5L})));
  std::vector<torch::Tensor> wrong = {torch::tensor({1}, torch::kInt)};
  EXPECT_THROW(comm->allreduce(wrong, ReduceOp::kSum), std::invalid_argument);
}

}  // namespace
}  // namespace pcdino::train
