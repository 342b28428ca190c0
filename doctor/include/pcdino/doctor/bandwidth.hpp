// Bandwidth between the nodes of an allocation, as nccl-tests defines it, over pcdino's MPI world.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace pcdino::doctor {

/// One size of an allreduce sweep.
struct AllreducePoint {
  std::size_t bytes = 0;  ///< message size (float32 elements x 4)
  double seconds = 0;     ///< mean time of one allreduce, the slowest rank's
  double algbw_gb_s = 0;  ///< bytes / seconds / 1e9
  double busbw_gb_s = 0;  ///< allreduce_bus_bandwidth(algbw, ranks)
};

/// nccl-tests' bus bandwidth of an allreduce over `ranks` ranks (doc/PERFORMANCE.md of nccl-tests):
/// algbw x 2 (ranks - 1) / ranks, the rate each link carries, comparable across world sizes. 0 for one rank.
double allreduce_bus_bandwidth(double algbw_gb_s, int ranks);

/// One point of an allreduce sweep of `bytes` over `participants` (ranks, or GPUs), timed as nccl-tests
/// times it: `launch` then `wait` once outside the timing, a barrier over `comm`, `reps` calls of `launch`
/// and one `wait`; the time is the slowest rank's mean. Collective over `comm`.
AllreducePoint time_allreduce(MPI_Comm comm, std::size_t bytes, int participants, int reps,
                              const std::function<void()>& launch, const std::function<void()>& wait);

/// MPI_Allreduce (sum of float32) of each of `sizes` bytes over `comm`: one warm-up, then `reps` timed
/// calls behind a barrier; each point's time is the slowest rank's mean. Collective over `comm`.
std::vector<AllreducePoint> allreduce_sweep(MPI_Comm comm, const std::vector<std::size_t>& sizes, int reps);

/// The allreduce bus bandwidth (GB/s) of each pair of neighbours at `bytes`: pair k is ranks k and k+1 mod n
/// of `comm`, each pair measured alone with allreduce_sweep() (disjoint pairs at the same time, in two
/// rounds, three when n is odd). Collective over `comm`; the n values on every rank, pair k at index k.
/// Empty when `comm` has fewer than 3 ranks (two ranks are one pair: the group's own result).
std::vector<double> pairwise_busbw(MPI_Comm comm, std::size_t bytes, int reps);

/// The ranks to blame for a group allreduce below `floor`: those whose both pairs (pairwise_busbw()) are
/// below it while some other pair reaches it. Empty when every pair is below the floor (the network, not
/// one node) or none is.
std::vector<int> slow_ranks(const std::vector<double>& pair_busbw_gb_s, double floor);

/// Memory bandwidth of this node in GB/s: `bytes` read and summed `passes` times (a fixed local workload
/// whose rate falls when the node's cores are taken by other processes or its memory is slow).
double memory_bandwidth_gb_s(std::size_t bytes, int passes);

}  // namespace pcdino::doctor
