// Weighted kNN throughput at the size: 10,000 queries against a bank of 50,000 features of 384
// dimensions (vit_small's CLS width), k = 20, T = 0.07. pcdino's faiss-based weighted_knn() (exact and
// IVF) against DINO's own implementation (eval_knn.knn_classifier: LibTorch matmul + topk + one-hot votes
// in chunks of queries) as the baseline. Google Benchmark reports items_per_second = queries/s.
//
//   build/bench/pcdino_knn_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "pcdino/pipelines/knn.hpp"

namespace {

constexpr int kBank = 50000, kQueries = 10000, kDim = 384, kClasses = 10, kK = 20;
constexpr double kT = 0.07;

struct Data {
  torch::Tensor bank, queries, bank_labels, query_labels;
  std::vector<float> bank_v, queries_v;
  std::vector<int> bank_l, query_l;
};

const Data& data() {
  static const Data d = [] {
    torch::manual_seed(0);
    const auto centres = torch::randn({kClasses, kDim});
    Data x;
    x.bank_labels = torch::randint(kClasses, {kBank}, torch::kLong);
    x.query_labels = torch::randint(kClasses, {kQueries}, torch::kLong);
    x.bank = torch::nn::functional::normalize(
        centres.index_select(0, x.bank_labels) * 0.3 + torch::randn({kBank, kDim}),
        torch::nn::functional::NormalizeFuncOptions().dim(1));
    x.queries = torch::nn::functional::normalize(
        centres.index_select(0, x.query_labels) * 0.3 + torch::randn({kQueries, kDim}),
        torch::nn::functional::NormalizeFuncOptions().dim(1));
    x.bank_v.assign(x.bank.data_ptr<float>(), x.bank.data_ptr<float>() + x.bank.numel());
    x.queries_v.assign(x.queries.data_ptr<float>(), x.queries.data_ptr<float>() + x.queries.numel());
    const auto bl = x.bank_labels.to(torch::kInt), ql = x.query_labels.to(torch::kInt);
    x.bank_l.assign(bl.data_ptr<int>(), bl.data_ptr<int>() + kBank);
    x.query_l.assign(ql.data_ptr<int>(), ql.data_ptr<int>() + kQueries);
    return x;
  }();
  return d;
}

void BM_DinoLibTorchDense(benchmark::State& state) {  // the baseline: eval_knn.knn_classifier
  const Data& d = data();
  torch::NoGradGuard no_grad;
  const auto bank_t = d.bank.t().contiguous();
  double top1 = 0;
  for (auto _ : state) {
    long hits = 0;
    const int chunk = kQueries / 100;  // DINO's 100 chunks
    for (int i = 0; i < kQueries; i += chunk) {
      const auto q = d.queries.slice(0, i, i + chunk);
      const auto targets = d.query_labels.slice(0, i, i + chunk);
      const auto [dist, idx] = q.mm(bank_t).topk(kK, 1, true, true);
      const auto neighbours = d.bank_labels.index_select(0, idx.reshape(-1)).view({-1, kK});
      const auto one_hot = torch::zeros({chunk * kK, kClasses}).scatter_(1, neighbours.view({-1, 1}), 1.0);
      const auto probs =
          (one_hot.view({chunk, kK, kClasses}) * dist.div(kT).exp_().view({chunk, kK, 1})).sum(1);
      const auto pred = std::get<1>(probs.sort(1, true));
      hits += pred.narrow(1, 0, 1).eq(targets.view({-1, 1})).sum().item<long>();
    }
    top1 = 100.0 * static_cast<double>(hits) / kQueries;
  }
  state.SetItemsProcessed(state.iterations() * kQueries);
  state.counters["top1"] = top1;
}

void BM_PcdinoFaiss(benchmark::State& state) {
  const Data& d = data();
  pcdino::pipelines::KnnOptions o;
  o.ks = {kK};
  o.temperature = kT;
  o.ivf_lists = static_cast<int>(state.range(0));
  o.ivf_probes = 16;
  double top1 = 0;
  for (auto _ : state) {
    top1 = pcdino::pipelines::weighted_knn(d.bank_v, d.bank_l, d.queries_v, d.query_l, kDim, kClasses, o)
               .scores[0]
               .top1;
  }
  state.SetItemsProcessed(state.iterations() * kQueries);
  state.counters["top1"] = top1;
}

BENCHMARK(BM_DinoLibTorchDense)->Unit(benchmark::kSecond)->Iterations(2)->UseRealTime();
BENCHMARK(BM_PcdinoFaiss)
    ->ArgName("ivf_lists")
    ->Arg(0)
    ->Arg(256)
    ->Unit(benchmark::kSecond)
    ->Iterations(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
