#include "trainer/sampler.h"

#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/random.h"

namespace psring::trainer {

absl::StatusOr<DistributedSampler> DistributedSampler::Create(int64_t dataset_size, int num_replicas,
                                                              int rank, bool shuffle, uint64_t seed,
                                                              bool drop_last) {
  if (dataset_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler needs a non-empty data set, got ", dataset_size, " samples"));
  }
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler: rank ", rank, " is outside [0, world size ", num_replicas, ")"));
  }
  if (drop_last && dataset_size < num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("DistributedSampler with drop_last: ", dataset_size,
                                                   " samples leave nothing for ", num_replicas, " ranks"));
  }
  DistributedSampler s;
  s.dataset_size_ = dataset_size;
  s.num_replicas_ = num_replicas;
  s.rank_ = rank;
  s.shuffle_ = shuffle;
  s.seed_ = seed;
  s.num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  return s;
}

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch) const {
  std::vector<int64_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) {
    // As PyTorch seeds its generator with seed + epoch, every rank draws the same permutation.
    Rng rng(seed_ + static_cast<uint64_t>(epoch), /*stream=*/7);
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      std::swap(order[i], order[rng.Below(static_cast<uint64_t>(i) + 1)]);
    }
  }
  const int64_t total = num_samples_ * num_replicas_;
  // Padding repeats the head of the permutation, wrapping as often as needed (tiny data sets, many ranks).
  for (int64_t i = dataset_size_; i < total; ++i) order.push_back(order[i % dataset_size_]);
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[i]);
  return mine;
}

}  // namespace psring::trainer
