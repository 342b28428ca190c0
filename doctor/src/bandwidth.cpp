#include "pcdino/doctor/bandwidth.hpp"

#include <chrono>
#include <numeric>

namespace pcdino::doctor {

double allreduce_bus_bandwidth(double algbw_gb_s, int ranks) {
  return ranks > 1 ? algbw_gb_s * 2.0 * (ranks - 1) / ranks : 0.0;
}

std::vector<AllreducePoint> allreduce_sweep(MPI_Comm comm, const std::vector<std::size_t>& sizes, int reps) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::vector<AllreducePoint> points;
  for (const std::size_t bytes : sizes) {
    const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
    std::vector<float> send(count, 1.0F), receive(count);
    const auto once = [&] {
      MPI_Allreduce(send.data(), receive.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    };
    once();  // connections and buffers set up outside the timing
    MPI_Barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) once();
    double mean = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, comm);
    AllreducePoint p;
    p.bytes = count * sizeof(float);
    p.seconds = mean;
    p.algbw_gb_s = static_cast<double>(p.bytes) / std::max(mean, 1e-12) / 1e9;
    p.busbw_gb_s = allreduce_bus_bandwidth(p.algbw_gb_s, ranks);
    points.push_back(p);
  }
  return points;
}

double memory_bandwidth_gb_s(std::size_t bytes, int passes) {
  std::vector<std::uint64_t> data(std::max<std::size_t>(1, bytes / sizeof(std::uint64_t)));
  std::iota(data.begin(), data.end(), 0);
  volatile std::uint64_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < passes; ++p) sink = sink + std::accumulate(data.begin(), data.end(), std::uint64_t{0});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(data.size() * sizeof(std::uint64_t)) * passes / std::max(seconds, 1e-12) / 1e9;
}

}  // namespace pcdino::doctor
