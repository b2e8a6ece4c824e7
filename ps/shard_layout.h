// How the flat parameter vector is cut into shards, and the largest piece of one that travels in a message.
// Plain C++ (no gRPC): the server's core, its gRPC adapter and the client all use it.
#ifndef PSRING_PS_SHARD_LAYOUT_H_
#define PSRING_PS_SHARD_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace psring::ps {

// Largest chunk a client may configure, and the message size limit both ends set explicitly (a chunk plus
// its small header must fit).
inline constexpr size_t kMaxChunkBytes = 4 << 20;
inline constexpr int kMaxMessageBytes = 8 << 20;

// Contiguous range [begin, end) of a flat vector of `total` elements held by shard `shard` of `num_shards`:
// the ranges are balanced in bytes (lengths differ by at most one element) and cover the vector in order.
struct ShardRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};
ShardRange ComputeShardRange(uint64_t total, int shard, int num_shards);

}  // namespace psring::ps

#endif  // PSRING_PS_SHARD_LAYOUT_H_
