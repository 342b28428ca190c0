// The MPI backend: CPU tensors, reduced in place with MPI_Allreduce on MPI_COMM_WORLD.
#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/comm.hpp"

namespace pcdino::train {

namespace {

MPI_Datatype mpi_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat:
      return MPI_FLOAT;
    case torch::kDouble:
      return MPI_DOUBLE;
    case torch::kLong:
      return MPI_INT64_T;
    default:
      throw std::invalid_argument(std::string("MPI backend: cannot reduce ") +
                                  c10::toString(t.scalar_type()));
  }
}

void check(const torch::Tensor& t) {
  if (!t.device().is_cpu() || !t.is_contiguous()) {
    throw std::invalid_argument("MPI backend: tensors must be contiguous CPU tensors");
  }
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ExitCode::kSoftware, std::string("MPI ") + what + " failed: " + text);
}

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const MpiWorld& world) : world_(world) {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level >= MPI_THREAD_SERIALIZED) worker_ = std::thread([this] { work(); });
  }

  ~MpiCommunicator() override {
    if (!worker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void start_allreduce(torch::Tensor flat, ReduceOp op) override {
    if (!worker_.joinable()) {
      std::vector<torch::Tensor> one{flat};
      allreduce(one, op);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back(std::move(flat), op);
      ++pending_;
    }
    wake_.notify_all();
  }

  void wait_pending() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }
  std::string backend() const override { return "mpi"; }

  void allreduce(std::vector<torch::Tensor>& tensors, ReduceOp op) override {
    for (auto& t : tensors) {
      check(t);
      const MPI_Datatype type = mpi_type(t);
      // MPI counts are int: reduce more than 2^31 - 1 elements in pieces.
      auto* base = static_cast<char*>(t.data_ptr());
      for (int64_t done = 0; done < t.numel();) {
        const int64_t count = std::min<int64_t>(t.numel() - done, INT_MAX);
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, base + done * t.element_size(), static_cast<int>(count), type,
                                MPI_SUM, MPI_COMM_WORLD),
                  "allreduce");
        done += count;
      }
      if (op == ReduceOp::kAverage) t.div_(size());
    }
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    for (auto& t : tensors) {
      check(t);
      check_mpi(MPI_Bcast(t.data_ptr(), static_cast<int>(t.numel() * t.element_size()), MPI_BYTE, root,
                          MPI_COMM_WORLD),
                "broadcast");
    }
  }

  torch::Tensor allgather(const torch::Tensor& tensor) override {
    const auto t = tensor.contiguous();
    check(t);
    auto out = allgather_result(t, size());
    const int bytes = static_cast<int>(t.numel() * t.element_size());
    check_mpi(MPI_Allgather(t.data_ptr(), bytes, MPI_BYTE, out.data_ptr(), bytes, MPI_BYTE, MPI_COMM_WORLD),
              "allgather");
    return out;
  }

  void barrier() override { world_.barrier(); }

 private:
  // The communication thread: the only caller of MPI while reductions are pending (MPI_THREAD_SERIALIZED).
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto [flat, op] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      try {
        std::vector<torch::Tensor> one{flat};
        allreduce(one, op);
      } catch (...) {
        std::lock_guard<std::mutex> relock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  const MpiWorld& world_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<torch::Tensor, ReduceOp>> queue_;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace

torch::Tensor allgather_result(const torch::Tensor& tensor, int size) {
  std::vector<int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
  if (shape.empty()) shape.push_back(1);
  shape[0] *= size;
  return torch::empty(shape, tensor.options());
}

std::unique_ptr<Communicator> make_mpi_communicator(const MpiWorld& world) {
  return std::make_unique<MpiCommunicator>(world);
}

std::unique_ptr<Communicator> make_communicator(const MpiWorld& world, const torch::Device& device) {
  return device.is_cuda() ? make_nccl_communicator(world, device) : make_mpi_communicator(world);
}

}  // namespace pcdino::train
