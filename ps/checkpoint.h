// Shard checkpoints: one binary file per shard, written atomically (common/atomic_file.h), so a crash leaves
// either the previous checkpoint or the new one, never a torn file.
//
// Format (little-endian): magic "PSRCKPT2", shard, num_shards, total, begin, end, version, lr, momentum,
// weight_decay, the element layout (ps/shard_layout.h: number of buckets, each bucket's element count, then
// the length and bytes of the worker settings that chose it), number of ranks, their next-step clocks,
// params[end-begin], momentum[end-begin], then a CRC-32 of everything before it. [begin, end) is the shard's
// range of the layout's wire order (for the flat layout, of the flat vector).
// Files of the older format "PSRCKPT1" (written before checkpoints recorded a layout) have no layout fields
// and are read as the flat layout, which is the only one psring wrote then without --bucket_mb.
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
  // The element layout's buckets in launch order (one bucket: flat; empty when read from a "PSRCKPT1" file,
  // which is flat too) and the worker settings that chose it ("--bucket_mb=25"), for messages.
  std::vector<uint64_t> layout_buckets;
  std::string layout_settings;
  std::vector<int64_t> clocks;  // per rank: the next step it pushes (async mode)
  std::vector<float> params;
  std::vector<float> momentum;
};

// The largest version a checkpoint may hold (steps are int64 on the wire).
inline constexpr uint64_t kMaxCheckpointVersion = uint64_t{1} << 62;

// "<dir>/ps-shard-<shard>-of-<num_shards>.ckpt".
std::string ShardCheckpointPath(const std::string& dir, int shard, int num_shards);

// Writes `header`'s metadata with the given params and momentum (header.params/momentum are ignored, so the
// server need not copy its tensors). Creates the folder when missing. Blocks on disk I/O. On failure the
// error of common/atomic_file.h, naming the file; kFailedPrecondition (nothing written, the old file kept)
// when a parameter or momentum value is not finite.
absl::Status WriteShardCheckpoint(const std::string& path, const ShardCheckpoint& header,
                                  absl::Span<const float> params, absl::Span<const float> momentum);

// kNotFound when there is no file; kDataLoss when it is truncated, corrupt or inconsistent: non-finite
// values, a version past kMaxCheckpointVersion, clocks that are negative or add up to more than the version
// (the layout is checked against the range by ShardCore, which knows the shard).
absl::StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& path);

}  // namespace psring::ps

#endif  // PSRING_PS_CHECKPOINT_H_
