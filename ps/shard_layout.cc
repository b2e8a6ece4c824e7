#include "ps/shard_layout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psring::ps {
namespace {

// floor(total * i / num_shards), with a 128-bit product so that it cannot overflow for any vector that fits
// in memory.
uint64_t Bound(uint64_t total, int i, int num_shards) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(total) * i / num_shards);
}

}  // namespace

ShardRange ComputeShardRange(uint64_t total, int shard, int num_shards) {
  return ShardRange{Bound(total, shard, num_shards), Bound(total, shard + 1, num_shards)};
}

ShardLayout ShardLayout::Flat(uint64_t total, int num_shards) {
  ShardLayout layout;
  layout.total_ = total;
  layout.num_shards_ = num_shards;
  layout.buckets_ = {total};
  layout.bucket_begin_ = {0};
  return layout;
}

absl::StatusOr<ShardLayout> ShardLayout::Create(uint64_t total, std::vector<uint64_t> buckets, int num_shards) {
  if (num_shards < 1) return absl::InvalidArgumentError(absl::StrCat("a layout of ", num_shards, " shards"));
  if (buckets.empty()) return Flat(total, num_shards);
  if (buckets.size() > kMaxLayoutBuckets) {
    return absl::InvalidArgumentError(absl::StrCat("a layout of ", buckets.size(), " buckets; at most ",
                                                   kMaxLayoutBuckets, " are allowed (raise --bucket_mb)"));
  }
  ShardLayout layout;
  layout.total_ = total;
  layout.num_shards_ = num_shards;
  layout.bucket_begin_.reserve(buckets.size());
  uint64_t end = total;  // bucket i ends where bucket i - 1 begins
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] == 0 || buckets[i] > end) {
      return absl::InvalidArgumentError(absl::StrCat("layout bucket ", i, " of ", buckets[i], " elements: every "
                                                     "bucket must be non-empty and they must add up to the "
                                                     "model's ", total, " parameters"));
    }
    end -= buckets[i];
    layout.bucket_begin_.push_back(end);
  }
  if (end != 0) {
    return absl::InvalidArgumentError(absl::StrCat("layout buckets cover ", total - end, " elements but the model "
                                                   "has ", total));
  }
  layout.buckets_ = std::move(buckets);
  return layout;
}

ShardRange ShardLayout::Slice(int shard, size_t bucket) const {
  const ShardRange part = ComputeShardRange(buckets_[bucket], shard, num_shards_);
  return ShardRange{bucket_begin_[bucket] + part.begin, bucket_begin_[bucket] + part.end};
}

ShardRange ShardLayout::WireRange(int shard) const {
  // Shards 0..s-1 hold floor(n * s / K) elements of a bucket of n (their slices' bounds telescope).
  ShardRange range;
  for (uint64_t n : buckets_) {
    range.begin += Bound(n, shard, num_shards_);
    range.end += Bound(n, shard + 1, num_shards_);
  }
  return range;
}

void ShardLayout::ToWire(const float* flat, float* wire) const {
  for (int s = 0; s < num_shards_; ++s) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const ShardRange slice = Slice(s, b);
      wire = std::copy(flat + slice.begin, flat + slice.end, wire);
    }
  }
}

void ShardLayout::FromWire(const float* wire, float* flat) const {
  for (int s = 0; s < num_shards_; ++s) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const ShardRange slice = Slice(s, b);
      std::copy(wire, wire + slice.size(), flat + slice.begin);
      wire += slice.size();
    }
  }
}

std::string ShardLayout::Describe() const { return flat() ? "flat" : absl::StrCat(buckets_.size(), " buckets"); }

bool ShardLayout::operator==(const ShardLayout& o) const {
  return total_ == o.total_ && num_shards_ == o.num_shards_ && buckets_ == o.buckets_;
}

}  // namespace psring::ps
