#include "ps/shard_layout.h"

namespace psring::ps {

ShardRange ComputeShardRange(uint64_t total, int shard, int num_shards) {
  // 128-bit products so that total * shard cannot overflow for any vector that fits in memory.
  const auto bound = [&](int i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(total) * i / num_shards);
  };
  return ShardRange{bound(shard), bound(shard + 1)};
}

}  // namespace psring::ps
