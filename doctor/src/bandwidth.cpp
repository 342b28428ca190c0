#include "pcdino/doctor/bandwidth.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>

namespace pcdino::doctor {

double allreduce_bus_bandwidth(double algbw_gb_s, int ranks) {
  return ranks > 1 ? algbw_gb_s * 2.0 * (ranks - 1) / ranks : 0.0;
}

AllreducePoint time_allreduce(MPI_Comm comm, std::size_t bytes, int participants, int reps,
                              const std::function<void()>& launch, const std::function<void()>& wait) {
  launch();  // connections and buffers set up outside the timing
  wait();
  MPI_Barrier(comm);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) launch();
  wait();
  double mean = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
  MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, comm);
  AllreducePoint p;
  p.bytes = bytes;
  p.seconds = mean;
  p.algbw_gb_s = static_cast<double>(bytes) / std::max(mean, 1e-12) / 1e9;
  p.busbw_gb_s = allreduce_bus_bandwidth(p.algbw_gb_s, participants);
  return p;
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
    points.push_back(time_allreduce(comm, count * sizeof(float), ranks, reps, once, [] {}));
  }
  return points;
}

namespace {

// Pairs of neighbours in rounds of disjoint pairs: pair k alternates rounds 0 and 1; with an odd count the
// last pair (n-1, 0) would share rank 0 with pair 0, so it has round 2 to itself.
int round_of(int pair, int n) {
  return n % 2 == 1 && pair == n - 1 ? 2 : pair % 2;
}

}  // namespace

std::vector<double> pairwise_busbw(MPI_Comm comm, std::size_t bytes, int reps) {
  int n = 1, rank = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &rank);
  if (n < 3) return {};
  std::array<double, 3> mine = {0, 0, 0};  // this rank's pair's result in each round
  for (int round = 0; round < 3; ++round) {
    int color = MPI_UNDEFINED;
    for (const int pair : {rank, (rank + n - 1) % n}) {  // the two pairs this rank belongs to
      if (round_of(pair, n) == round) color = pair;
    }
    MPI_Comm pair_comm = MPI_COMM_NULL;
    MPI_Comm_split(comm, color, rank, &pair_comm);
    if (pair_comm == MPI_COMM_NULL) continue;
    mine[static_cast<std::size_t>(round)] = allreduce_sweep(pair_comm, {bytes}, reps).back().busbw_gb_s;
    MPI_Comm_free(&pair_comm);
  }
  std::vector<double> all(3 * static_cast<std::size_t>(n));
  MPI_Allgather(mine.data(), 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, comm);
  std::vector<double> pairs(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k)
    pairs[static_cast<std::size_t>(k)] = all[static_cast<std::size_t>(3 * k + round_of(k, n))];
  return pairs;
}

std::vector<int> slow_ranks(const std::vector<double>& pair_busbw_gb_s, double floor) {
  const auto& b = pair_busbw_gb_s;
  const int n = static_cast<int>(b.size());
  if (std::none_of(b.begin(), b.end(), [floor](double v) { return v >= floor; })) return {};
  std::vector<int> slow;
  for (int r = 0; r < n; ++r) {
    if (b[static_cast<std::size_t>(r)] < floor && b[static_cast<std::size_t>((r + n - 1) % n)] < floor)
      slow.push_back(r);
  }
  return slow;
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
