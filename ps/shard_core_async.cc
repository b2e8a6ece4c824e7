// ShardCore's asynchronous pushes (ps/shard_core.h): each applied on arrival, then held while the pusher
// is more than `staleness` steps ahead of the slowest rank (ps/async_policy.h).
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard_core.h"
#include "trainer/limits.h"

namespace psring::ps {

absl::StatusOr<AsyncPush> ShardCore::StartAsyncPush(const PushInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(ValidatePushLocked(info));
  staleness_.set_receiving(info.rank, info.session);
  AsyncPush push;
  push.rank = info.rank;
  push.session = info.session;
  push.step = info.step;
  push.gradient = TakeBufferLocked();
  return push;
}

absl::StatusOr<uint64_t> ShardCore::FinishAsyncPush(AsyncPush push, const absl::Status& received) {
  bool checkpoint_due = false;
  {
    const uint64_t bad = trainer::FirstNonFinite(push.gradient.data(), push.gradient.size());  // before the lock
    const double norm = std::sqrt(SumOfSquares(push.gradient.data(), push.gradient.size()));
    absl::MutexLock lock(&mu_);
    if (staleness_.receiving(push.rank) == push.session) staleness_.set_receiving(push.rank, 0);
    absl::Status status = received;
    if (status.ok() && bad < push.gradient.size()) {
      status = absl::InvalidArgumentError(absl::StrCat("gradient element ", bad, " of rank ", push.rank,
                                                       " at step ", push.step, " is ", push.gradient[bad],
                                                       "; the push was refused (non-finite gradients)"));
    }
    if (status.ok() && norm > options_.max_grad_norm) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "rank ", push.rank, " step ", push.step, ": gradient norm ", norm, " on shard ", options_.shard,
          " exceeds --max_grad_norm=", options_.max_grad_norm, "; the push was refused and nothing of it applied"));
    }
    if (status.ok()) status = CheckServingLocked();
    if (status.ok()) status = CheckSessionLocked(push.rank, push.session);
    if (status.ok()) {
      absl::WriterMutexLock tensors_lock(&tensors_mu_);
      const uint64_t bad_update =
          ApplyAsyncStep(hyperparameters_, options_.workers, absl::MakeSpan(push.gradient), &tensors_);
      if (bad_update < push.gradient.size()) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "the update of element ", bad_update, " by the push of rank ", push.rank, " at step ", push.step,
            " is not finite (gradient ", push.gradient[bad_update], " after the division by ", options_.workers,
            ", lr=", hyperparameters_.lr, "); the push was refused: lower --lr or clip the gradients"));
      }
    }
    ReturnBufferLocked(std::move(push.gradient));
    if (!status.ok()) return status;
    // The clock moves before a checkpoint can copy it: a restarted shard must not take this push again.
    staleness_.Advance(push.rank);
    checkpoint_due = BumpVersionLocked();
  }
  if (checkpoint_due) WritePendingCheckpoint();
  absl::MutexLock lock(&mu_);
  return AwaitStalenessLocked(push.rank, push.session, push.step);
}

absl::StatusOr<uint64_t> ShardCore::AwaitStalenessLocked(int rank, absl::uint128 session, int64_t step) {
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  const auto waiting = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !staleness_.MayProceed(step) && !shutting_down_ && sessions_[rank] == session;
  };
  while (waiting()) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && waiting()) {
      return staleness_.TimeoutError(rank, step, options_.step_timeout);
    }
  }
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  return version_;
}

}  // namespace psring::ps
