#include "trainer/exchange.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psring::trainer {

BucketPlan BucketPlan::Flat(size_t total) {
  BucketPlan plan;
  plan.buckets_.push_back(FloatRange{0, total});
  plan.total_ = total;
  plan.flat_ = true;
  return plan;
}

absl::StatusOr<BucketPlan> BucketPlan::Create(absl::Span<const size_t> layers, double bucket_mb,
                                              double first_bucket_mb) {
  if (!std::isfinite(bucket_mb) || bucket_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_mb=", bucket_mb, ": must be >= 0 (0: one flat exchange after backward)"));
  }
  if (!std::isfinite(first_bucket_mb) || first_bucket_mb < 0) {
    return absl::InvalidArgumentError(absl::StrCat("first bucket cap ", first_bucket_mb, " MB must be >= 0"));
  }
  size_t total = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] == 0) return absl::InvalidArgumentError(absl::StrCat("layer ", i, " has no parameters"));
    total += layers[i];
  }
  if (bucket_mb == 0 || layers.empty()) return Flat(total);

  // Caps in bytes, truncated as DDP's int(bucket_cap_mb * 1024 * 1024).
  auto cap_bytes = [](double mb) { return static_cast<size_t>(mb * kBytesPerMb); };
  const size_t cap = cap_bytes(bucket_mb);
  size_t current_cap = cap_bytes(std::min(first_bucket_mb, bucket_mb));

  BucketPlan plan;
  plan.total_ = total;
  plan.flat_ = false;
  size_t end = total;  // the open bucket is [begin, end)
  size_t begin = total;
  for (size_t i = layers.size(); i-- > 0;) {
    begin -= layers[i];
    // DDP's rule: the layer joins the open bucket first, and the bucket closes once it holds >= its cap.
    if ((end - begin) * sizeof(float) >= current_cap) {
      plan.buckets_.push_back(FloatRange{begin, end - begin});
      end = begin;
      current_cap = cap;
    }
  }
  if (begin < end) plan.buckets_.push_back(FloatRange{begin, end - begin});
  return plan;
}

int BucketPlan::BucketOf(size_t offset) const {
  // Buckets are in descending offset order.
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), offset,
                             [](const FloatRange& b, size_t o) { return b.offset > o; });
  return static_cast<int>(it - buckets_.begin());
}

}  // namespace psring::trainer
