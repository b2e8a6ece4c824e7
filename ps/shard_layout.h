// How the flat parameter vector is spread over the shards (the element layout), and the largest piece of
// one that travels in a message. Plain C++ (no gRPC): the server's core, its gRPC adapter and the client all
// use it.
//
// A layout is a list of buckets in launch order that tile the vector from its end (trainer::BucketPlan's
// order: backward releases the last layers first): bucket 0 is [total - n0, total), bucket 1 the n1 elements
// before it, and so on down to element 0. Every bucket is cut into K balanced slices (ComputeShardRange of
// the bucket: lengths differ by at most one element), and shard s holds slice s of every bucket, bucket 0's
// first. With three buckets and K = 2:
//
//     flat vector    [ a2  b2 | a1  b1 | a0  b0 ]      (bucket 2 | bucket 1 | bucket 0)
//     shard 0 holds    a0 a1 a2                        its element sequence: what it receives, applies in
//     shard 1 holds    b0 b1 b2                        prefix order (ps/sync_step.h) and sends back
//
// So every bucket loads all K server links at once (as BytePS partitions every tensor over all servers),
// and each shard receives its part of the buckets in launch order, a prefix that grows as backward
// releases buckets: exactly what the synchronous step applies. The flat layout is the one-bucket case:
// shard s holds the contiguous range ComputeShardRange(total, s, K), as before layouts existed.
//
// The wire order is all shards' sequences one after another, shard 0's first; shard s is the contiguous
// range WireRange(s) of it (for the flat layout, the wire order is the vector's own order). A shard holds
// at most ceil(n / K) elements of a bucket of n, and none of a bucket smaller than K for some shards.
//
// Cost: WireRange and ShardSize are O(buckets); ToWire/FromWire copy every element once.
// Thread-safety: immutable after Create; copyable.
#ifndef PSRING_PS_SHARD_LAYOUT_H_
#define PSRING_PS_SHARD_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::ps {

// Largest chunk a client may configure, and the message size limit both ends set explicitly: a chunk plus
// its header, or the largest other message (a StatsReply of kMaxWorkers ranks, under 1 MiB), must fit.
// Nothing larger is read, authenticated or not (issue 34: it was 8 MiB).
inline constexpr size_t kMaxChunkBytes = 4 << 20;
inline constexpr int kMaxMessageBytes = (4 << 20) + (1 << 20);
// Most buckets a layout may have (registration and checkpoint carry the whole list: 8 bytes each at most).
inline constexpr size_t kMaxLayoutBuckets = 1 << 16;

// Contiguous range [begin, end) of a vector.
struct ShardRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool operator==(const ShardRange& o) const { return begin == o.begin && end == o.end; }
};

// Part `shard` of `num_shards` of a vector of `total` elements cut into balanced contiguous ranges (lengths
// differ by at most one element) that cover it in order.
ShardRange ComputeShardRange(uint64_t total, int shard, int num_shards);

class ShardLayout {
 public:
  // One bucket over [0, total).
  static ShardLayout Flat(uint64_t total, int num_shards);
  // `buckets`: element counts in launch order (see above); empty, or the single bucket {total}, is the flat
  // layout. kInvalidArgument when num_shards < 1, a bucket is empty, the buckets do not add up to `total`,
  // or there are more than kMaxLayoutBuckets.
  static absl::StatusOr<ShardLayout> Create(uint64_t total, std::vector<uint64_t> buckets, int num_shards);

  uint64_t total() const { return total_; }
  int num_shards() const { return num_shards_; }
  // Element counts in launch order; {total} for the flat layout.
  const std::vector<uint64_t>& buckets() const { return buckets_; }
  bool flat() const { return buckets_.size() == 1; }
  // Shard `shard`'s slice of bucket `bucket`, as a range of the flat vector (empty when the bucket has
  // fewer elements than shards and this shard gets none).
  ShardRange Slice(int shard, size_t bucket) const;
  // Where shard `shard`'s element sequence lies in the wire order; its size is the shard's element count.
  ShardRange WireRange(int shard) const;
  // `flat` (total() elements in vector order) into `wire` (wire order), and back. Buffers must not overlap.
  void ToWire(const float* flat, float* wire) const;
  void FromWire(const float* wire, float* flat) const;
  // "flat" or "<n> buckets".
  std::string Describe() const;

  // Same total, shards and buckets.
  bool operator==(const ShardLayout& o) const;
  bool operator!=(const ShardLayout& o) const { return !(*this == o); }

 private:
  ShardLayout() = default;
  uint64_t total_ = 0;
  int num_shards_ = 1;
  std::vector<uint64_t> buckets_;
  std::vector<uint64_t> bucket_begin_;  // flat offset of each bucket's first element
};

}  // namespace psring::ps

#endif  // PSRING_PS_SHARD_LAYOUT_H_
