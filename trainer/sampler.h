// DistributedSampler with PyTorch's semantics (torch.utils.data.distributed.DistributedSampler).
//
// Every epoch, all ranks compute the same permutation of [0, dataset_size) from (seed, epoch), pad it by
// repeating its head until its length is a multiple of num_replicas (or cut the tail when drop_last), and
// rank r takes positions r, r + num_replicas, r + 2 * num_replicas, ... So the shards are disjoint (up to
// the padding), cover the data set, have equal lengths, and change every epoch. The permutation comes from
// this project's Rng, so it differs from torch.randperm's, but has the same properties.
//
//   ASSIGN_OR_RETURN(DistributedSampler s, DistributedSampler::Create(60000, world, rank, /*shuffle=*/true,
//   1)); std::vector<int64_t> mine = s.Indices(epoch);
//
// Immutable after Create(); thread-safe.
#ifndef PSRING_TRAINER_SAMPLER_H_
#define PSRING_TRAINER_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::trainer {

class DistributedSampler {
 public:
  // kInvalidArgument unless dataset_size >= 1, num_replicas >= 1 and 0 <= rank < num_replicas
  // (and, with drop_last, dataset_size >= num_replicas).
  static absl::StatusOr<DistributedSampler> Create(int64_t dataset_size, int num_replicas, int rank,
                                                   bool shuffle, uint64_t seed, bool drop_last = false);

  // Samples per rank per epoch: ceil(size / replicas), or floor with drop_last.
  int64_t num_samples() const { return num_samples_; }

  // This rank's sample indices for `epoch`, num_samples() of them.
  std::vector<int64_t> Indices(int64_t epoch) const;

 private:
  DistributedSampler() = default;

  int64_t dataset_size_ = 0;
  int num_replicas_ = 1;
  int rank_ = 0;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  int64_t num_samples_ = 0;
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_SAMPLER_H_
