// ShardCore's synchronous step (ps/shard_core.h): pushes entering the pending step (ps/sync_step.h),
// delivering into it, awaiting and reading the applied ranges, and pushes leaving it.
#include <string>
#include <utility>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "ps/shard_core.h"
#include "trainer/limits.h"

namespace psring::ps {

absl::StatusOr<SyncPush> ShardCore::StartSyncPush(const PushInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(ValidatePushLocked(info));
  SyncPush push;
  push.session = info.session;
  push.step = info.step;
  push.gradient = TakeBufferLocked();
  push.ticket = sync_.Enter(info.rank, push.gradient.data(), info.trainer_step);
  return push;
}

absl::Status ShardCore::DroppedStatusLocked(const SyncPush& push) const {
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(push.ticket.rank, push.session));
  return sync_.LeftStatus(push.ticket, push.step, options_.shard);
}

void ShardCore::DropStepLocked(absl::StatusCode code, std::string reason) {
  sync_.Drop(code, std::move(reason));
  cv_.SignalAll();
}

void ShardCore::WithdrawLocked(int rank, absl::string_view reason) {
  sync_.Withdraw(rank, reason, version_);
  cv_.SignalAll();
}

absl::Status ShardCore::Delivered(SyncPush* push_ptr, uint64_t filled, absl::FunctionRef<bool()> cancelled) {
  SyncPush& push = *push_ptr;
  // Only the new part is checked (cheap: once per received chunk), without the lock: the buffer is ours.
  if (filled > push.checked) {
    const uint64_t bad = push.checked + trainer::FirstNonFinite(push.gradient.data() + push.checked, filled - push.checked);
    if (bad < filled) {
      return absl::InvalidArgumentError(absl::StrCat("gradient element ", bad, " of rank ", push.ticket.rank,
                                                     " at step ", push.step, " is ", push.gradient[bad],
                                                     "; the step was refused (non-finite gradients)"));
    }
    push.checked = filled;
  }
  bool checkpoint_due = false;
  {
    absl::MutexLock lock(&mu_);
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    absl::StatusOr<bool> completed = sync_.Deliver(push.ticket, filled, hyperparameters_);
    cv_.SignalAll();
    if (!completed.ok()) return completed.status();
    if (*completed) checkpoint_due = BumpVersionLocked();
    // Fair share: hold this push while it is too far ahead of the slowest one (see max_lead_bytes). The
    // wait ends when the others catch up, the step is dropped (AwaitApplied's step_timeout does that) or
    // the client cancels, which is polled.
    const uint64_t lead = options_.max_lead_bytes / sizeof(float);
    while (lead > 0 && filled < range_.size() && filled > sync_.applied() + lead && sync_.Owns(push.ticket) &&
           !shutting_down_ && !cancelled()) {
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
    }
  }
  if (checkpoint_due) WritePendingCheckpoint();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ShardCore::AwaitApplied(const SyncPush& push, uint64_t want) {
  absl::MutexLock lock(&mu_);
  absl::Time deadline = absl::Now() + options_.step_timeout;
  uint64_t progress = sync_.applied();
  while (true) {
    if (version_ > static_cast<uint64_t>(push.step)) return range_.size();
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    RETURN_IF_ERROR(CheckServingLocked());
    RETURN_IF_ERROR(CheckSessionLocked(push.ticket.rank, push.session));
    if (sync_.applied() >= want) return sync_.applied();
    if (sync_.applied() > progress) {  // the step moves: the timeout counts from its last progress
      progress = sync_.applied();
      deadline = absl::Now() + options_.step_timeout;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline && sync_.applied() == progress &&
        sync_.Owns(push.ticket) && !shutting_down_) {
      const std::string reason =
          absl::StrCat("ranks ", absl::StrJoin(sync_.MissingRanks(), ","), " did not push step ", push.step,
                       " within --step_timeout=", absl::FormatDuration(options_.step_timeout));
      DropStepLocked(absl::StatusCode::kDeadlineExceeded, reason);
      return absl::DeadlineExceededError(absl::StrCat(
          "synchronous step ", push.step, " of shard ", options_.shard, " timed out: ", reason,
          " (dead or stuck worker?); the step was rolled back, the server keeps serving"));
    }
  }
}

void ShardCore::ReadParameters(uint64_t offset, uint64_t count, absl::FunctionRef<void(const float*)> read) {
  absl::ReaderMutexLock lock(&tensors_mu_);
  ABSL_ASSERT(offset + count <= tensors_.params.size());
  read(NewestParameters(tensors_, pending_, offset + count) + offset);
}

void ShardCore::AbandonSyncPush(const SyncPush& push, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (sync_.Owns(push.ticket)) {
    WithdrawLocked(push.ticket.rank, absl::StrCat("the push of rank ", push.ticket.rank, " of step ", push.step,
                                                  " failed (", why.ToString(), ")"));
  }
}

void ShardCore::FinishSyncPush(SyncPush push, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (sync_.Owns(push.ticket)) {
    WithdrawLocked(push.ticket.rank,
                   absl::StrCat("the push of rank ", push.ticket.rank, " ended early (", why.ToString(), ")"));
  }
  ReturnBufferLocked(std::move(push.gradient));
}

}  // namespace psring::ps
