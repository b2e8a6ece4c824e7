#include "ps/shard_update.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "trainer/limits.h"

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

constexpr size_t kBlock = 2048;

// The first index in [0, len) where p or v is not finite; len when there is none.
size_t NonFiniteIn(const float* p, const float* v, size_t len) {
  return std::min(trainer::FirstNonFinite(p, len), trainer::FirstNonFinite(v, len));
}

// The smallest element index any thread reported as not finite; `none` when none did.
class FirstBad {
 public:
  explicit FirstBad(uint64_t none) : first_(none) {}
  // Block [b, b + len) found its first bad element at offset `at` (len: none).
  void Note(uint64_t b, size_t at, size_t len) {
    if (at >= len) return;
    uint64_t seen = first_.load();
    while (b + at < seen && !first_.compare_exchange_weak(seen, b + at)) {
    }
  }
  uint64_t get() const { return first_.load(); }

 private:
  std::atomic<uint64_t> first_;
};

}  // namespace

uint64_t ApplyMeanStep(const trainer::SgdOptions& hyperparameters, absl::Span<float* const> grads,
                       uint64_t begin, uint64_t end, const ShardTensors& current, ShardTensors* next) {
  // Fused in cache-sized blocks so the range streams through memory once: sum, divide, step from the old
  // values into the new buffers (the same element-wise arithmetic as a local step), check.
  float* sum = grads[0];
  const float count = static_cast<float>(grads.size());
  FirstBad first_bad(end);
  const auto apply = [&](size_t from, size_t to) {
    for (size_t b = begin + from; b < begin + to; b += kBlock) {
      const size_t len = std::min(kBlock, begin + to - b);
      float* p = next->params.data() + b;
      float* v = next->momentum.data() + b;
      // __restrict: the ranks' buffers never overlap, so the -O3 vectorised loops need no alias checks.
      float* __restrict s = sum + b;
      for (size_t r = 1; r < grads.size(); ++r) {
        const float* __restrict g = grads[r] + b;
        for (size_t i = 0; i < len; ++i) s[i] += g[i];
      }
      if (grads.size() > 1) {
        for (size_t i = 0; i < len; ++i) s[i] /= count;
      }
      trainer::SgdMomentumStepInto(hyperparameters, s, current.params.data() + b, current.momentum.data() + b, p,
                                   v, len);
      first_bad.Note(b, NonFiniteIn(p, v, len), len);
    }
  };
  ParallelFor(end - begin, apply);
  return first_bad.get();
}

uint64_t ApplyAsyncStep(const trainer::SgdOptions& hyperparameters, int workers, absl::Span<float> gradient,
                        ShardTensors* tensors) {
  const float count = static_cast<float>(workers);
  trainer::SgdOptions scaled = hyperparameters;
  scaled.weight_decay = hyperparameters.weight_decay / count;
  float* g = gradient.data();
  const size_t n = gradient.size();
  // First on copies, block by block, so a push whose update would not be finite changes nothing (there is
  // no undo buffer in this mode); then for real, which gives the same values.
  FirstBad first_bad(n);
  ParallelFor(n, [&](size_t begin, size_t end) {
    std::vector<float> p(kBlock);
    std::vector<float> v(kBlock);
    for (size_t b = begin; b < end; b += kBlock) {
      const size_t len = std::min(kBlock, end - b);
      for (size_t i = b; i < b + len; ++i) g[i] /= count;
      std::copy_n(tensors->params.data() + b, len, p.data());
      std::copy_n(tensors->momentum.data() + b, len, v.data());
      trainer::SgdMomentumStep(scaled, g + b, p.data(), v.data(), len);
      first_bad.Note(b, NonFiniteIn(p.data(), v.data(), len), len);
    }
  });
  if (first_bad.get() < n) return first_bad.get();
  ParallelFor(n, [&](size_t begin, size_t end) {
    trainer::SgdMomentumStep(scaled, g + begin, tensors->params.data() + begin,
                             tensors->momentum.data() + begin, end - begin);
  });
  return n;
}

double SumOfSquares(const float* data, uint64_t count) {
  // Four partial sums, so the loop vectorises at -O3 without reassociating one chain.
  double sums[4] = {0, 0, 0, 0};
  uint64_t i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int k = 0; k < 4; ++k) sums[k] += static_cast<double>(data[i + k]) * data[i + k];
  }
  for (; i < count; ++i) sums[0] += static_cast<double>(data[i]) * data[i];
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

}  // namespace psring::ps
