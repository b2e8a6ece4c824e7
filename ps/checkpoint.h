// Shard checkpoints: one binary file per shard, written atomically (common/atomic_file.h), so a crash leaves
// either the previous checkpoint or the new one, never a torn file.
//
// Layout (little-endian): magic "PSRCKPT1", shard, num_shards, total, begin, end, version, lr, momentum,
// weight_decay, number of ranks, their next-step clocks, params[end-begin], momentum[end-begin], then a
// CRC-32 of everything before it.
#ifndef PSRING_PS_CHECKPOINT_H_
#define PSRING_PS_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/optimizer.h"

namespace psring::ps {

struct ShardCheckpoint {
  int32_t shard = 0;
  int32_t num_shards = 1;
  uint64_t total_params = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t version = 0;
  trainer::SgdOptions hyperparameters;
  std::vector<int64_t> clocks;  // per rank: the next step it pushes (async mode)
  std::vector<float> params;
  std::vector<float> momentum;
};

// "<dir>/ps-shard-<shard>-of-<num_shards>.ckpt".
std::string ShardCheckpointPath(const std::string& dir, int shard, int num_shards);

// Writes `header`'s metadata with the given params and momentum (header.params/momentum are ignored, so the
// server need not copy its tensors). Creates the folder when missing. Blocks on disk I/O. On failure the
// error of common/atomic_file.h, naming the file.
absl::Status WriteShardCheckpoint(const std::string& path, const ShardCheckpoint& header,
                                  absl::Span<const float> params, absl::Span<const float> momentum);

// kNotFound when there is no file; kDataLoss when it is truncated, corrupt or inconsistent.
absl::StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& path);

}  // namespace psring::ps

#endif  // PSRING_PS_CHECKPOINT_H_
