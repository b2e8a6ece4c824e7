#include "trainer/bucket_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psring::trainer {

void BucketTracker::Begin(const BucketPlan& plan) {
  absl::MutexLock lock(&mu_);
  plan_ = &plan;
  missing_.clear();
  for (const FloatRange& b : plan.buckets()) missing_.push_back(b.count);
  complete_ = 0;
  error_ = absl::OkStatus();
  // Empty buckets (a model with no parameters) are complete from the start.
  while (complete_ < static_cast<int>(missing_.size()) && missing_[complete_] == 0) ++complete_;
}

void BucketTracker::Ready(size_t offset, size_t count) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok() || plan_ == nullptr) return;
  if (offset > plan_->total() || count > plan_->total() - offset) {
    error_ = absl::InvalidArgumentError(absl::StrCat("GradientReady(", offset, ", ", count,
                                                     ") reaches past the gradient's ", plan_->total(),
                                                     " elements"));
    changed_.SignalAll();
    return;
  }
  const std::vector<FloatRange>& buckets = plan_->buckets();
  // Buckets run from high offsets to low: the range's pieces are in buckets b, b-1, ...
  for (int b = count > 0 ? plan_->BucketOf(offset) : 0; count > 0; --b) {
    const size_t piece = std::min(count, buckets[b].end() - offset);
    if (piece > missing_[b]) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat("GradientReady(", offset, ", ", count, ") reports elements of bucket ", b,
                       " that were already reported this step"));
      changed_.SignalAll();
      return;
    }
    missing_[b] -= piece;
    offset += piece;
    count -= piece;
  }
  while (complete_ < static_cast<int>(missing_.size()) && missing_[complete_] == 0) ++complete_;
  changed_.SignalAll();
}

absl::Status BucketTracker::WaitFor(int index) {
  absl::MutexLock lock(&mu_);
  while (complete_ <= index && error_.ok()) changed_.Wait(&mu_);
  return complete_ > index ? absl::OkStatus() : error_;
}

void BucketTracker::Abort(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(status);
  changed_.SignalAll();
}

absl::Status BucketTracker::Close() {
  absl::MutexLock lock(&mu_);
  if (error_.ok() && complete_ < static_cast<int>(missing_.size())) {
    error_ = absl::FailedPreconditionError(absl::StrCat(
        "backward ended with ", missing_[complete_], " elements of gradient bucket ", complete_,
        " never reported through GradientReady; every layer must be reported once per step"));
    changed_.SignalAll();
  }
  return error_;
}

}  // namespace psring::trainer
