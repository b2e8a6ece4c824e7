#include "ps/shard_update.h"

#include <algorithm>
#include <functional>
#include <thread>

namespace psring::ps {
namespace {

// Runs fn(begin, end) over [0, n) split across up to 4 threads (one for small n). Blocks until done.
void ParallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  constexpr size_t kMinPerThread = 1 << 18;
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>({4, hardware, std::max<size_t>(1, n / kMinPerThread)});
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) {
    workers.emplace_back(fn, n * t / threads, n * (t + 1) / threads);
  }
  fn(0, n / threads);
  for (std::thread& w : workers) w.join();
}

}  // namespace

void ApplyMeanStep(const trainer::SgdOptions& hyperparameters, absl::Span<float* const> grads, uint64_t begin,
                   uint64_t end, ShardTensors* tensors, ShardTensors* undo) {
  // Fused in cache-sized blocks so the range streams through memory once: save, sum, divide, step.
  float* sum = grads[0];
  const float count = static_cast<float>(grads.size());
  const auto apply = [&](size_t from, size_t to) {
    constexpr size_t kBlock = 2048;
    for (size_t b = begin + from; b < begin + to; b += kBlock) {
      const size_t len = std::min(kBlock, begin + to - b);
      std::copy_n(tensors->params.data() + b, len, undo->params.data() + b);
      std::copy_n(tensors->momentum.data() + b, len, undo->momentum.data() + b);
      // __restrict: the ranks' buffers never overlap, so the -O3 vectorised loops need no alias checks.
      float* __restrict s = sum + b;
      for (size_t r = 1; r < grads.size(); ++r) {
        const float* __restrict g = grads[r] + b;
        for (size_t i = 0; i < len; ++i) s[i] += g[i];
      }
      if (grads.size() > 1) {
        for (size_t i = 0; i < len; ++i) s[i] /= count;
      }
      trainer::SgdMomentumStep(hyperparameters, s, tensors->params.data() + b, tensors->momentum.data() + b,
                               len);
    }
  };
  ParallelFor(end - begin, apply);
}

void ApplyAsyncStep(const trainer::SgdOptions& hyperparameters, int workers, absl::Span<float> gradient,
                    ShardTensors* tensors) {
  const float count = static_cast<float>(workers);
  trainer::SgdOptions scaled = hyperparameters;
  scaled.weight_decay = hyperparameters.weight_decay / count;
  float* g = gradient.data();
  ParallelFor(gradient.size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) g[i] /= count;
    trainer::SgdMomentumStep(scaled, g + begin, tensors->params.data() + begin,
                             tensors->momentum.data() + begin, end - begin);
  });
}

}  // namespace psring::ps
