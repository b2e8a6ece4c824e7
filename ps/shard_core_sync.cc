// ShardCore's synchronous step (ps/shard_core.h): pushes entering the pending step (ps/sync_step.h),
// delivering into it, awaiting and reading the applied ranges (or, with backup workers, the closed step),
// and pushes leaving it.
#include <cmath>
#include <memory>
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
  bool late = false;
  RETURN_IF_ERROR(ValidatePushLocked(info, sync_.backup() ? &late : nullptr));
  SyncPush push;
  push.session = info.session;
  push.step = info.step;
  push.gradient = TakeBufferLocked();
  if (late) {
    push.late = true;
    push.ticket.rank = info.rank;
    sync_.CountDropped(info.rank);
    return push;
  }
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
    push.sum_squares += SumOfSquares(push.gradient.data() + push.checked, filled - push.checked);
    push.checked = filled;
    // Refused as soon as the part received is over the bound: nothing of this push is applied for good (the
    // caller abandons it, which rolls back a step it was part of).
    if (push.sum_squares > options_.max_grad_norm * options_.max_grad_norm) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", push.ticket.rank, " step ", push.step, ": gradient norm ", std::sqrt(push.sum_squares),
          " on shard ", options_.shard, " exceeds --max_grad_norm=", options_.max_grad_norm,
          "; the push was refused and nothing of it applied"));
    }
  }
  if (push.late) return absl::OkStatus();  // read and dropped
  bool checkpoint_due = false;
  {
    absl::MutexLock lock(&mu_);
    if (sync_.Outrun(push.ticket)) return absl::OkStatus();  // its step closed without it: read and dropped
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    absl::StatusOr<bool> completed = sync_.Deliver(push.ticket, filled, hyperparameters_);
    cv_.SignalAll();
    if (!completed.ok()) return completed.status();
    if (*completed) checkpoint_due = BumpVersionLocked();
    // Fair share: hold this push while it is too far ahead of the slowest one (see max_lead_bytes). The
    // wait ends when the others catch up, the step is dropped (AwaitApplied's step_timeout does that) or
    // the client cancels, which is polled. Not with backup workers: nothing is applied before the close.
    const uint64_t lead = sync_.backup() ? 0 : options_.max_lead_bytes / sizeof(float);
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

StepReply ShardCore::ReplyLocked(bool dropped) {
  if (reply_parameters_ == nullptr || reply_parameters_->version != version_) {
    // A copy, so a whole reply is one version: with backup workers the steps go on without a rank whose
    // reply is still on its way, and the shard's own buffers may be written again under it (ps/sync_step.h's
    // two-step rule needs every rank to wait for its reply).
    auto snapshot = std::make_shared<ParameterSnapshot>();
    snapshot->version = version_;
    absl::ReaderMutexLock tensors_lock(&tensors_mu_);
    snapshot->params = tensors_.params;
    reply_parameters_ = std::move(snapshot);
  }
  return StepReply{dropped, reply_parameters_};
}

absl::StatusOr<StepReply> ShardCore::AwaitStepReply(const SyncPush& push) {
  absl::MutexLock lock(&mu_);
  absl::Time deadline = absl::Now() + options_.step_timeout;
  uint64_t progress = sync_.Progress();
  while (true) {
    RETURN_IF_ERROR(CheckServingLocked());
    RETURN_IF_ERROR(CheckSessionLocked(push.ticket.rank, push.session));
    if (push.late || sync_.Outrun(push.ticket)) return ReplyLocked(/*dropped=*/true);
    if (sync_.Accepted(push.ticket)) return ReplyLocked(/*dropped=*/false);
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    if (sync_.Progress() != progress) {  // the timeout counts from the last progress
      progress = sync_.Progress();
      deadline = absl::Now() + options_.step_timeout;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline && sync_.Progress() == progress &&
        sync_.Owns(push.ticket) && !shutting_down_) {
      const std::string reason = absl::StrCat(
          "only ", options_.workers - static_cast<int>(sync_.MissingRanks().size()), " of the ",
          options_.workers - options_.backup_workers, " pushes step ", push.step, " needs (--workers=",
          options_.workers, " --backup_workers=", options_.backup_workers, ") arrived within --step_timeout=",
          absl::FormatDuration(options_.step_timeout), "; ranks ", absl::StrJoin(sync_.MissingRanks(), ","),
          " did not complete one");
      DropStepLocked(absl::StatusCode::kDeadlineExceeded, reason);
      return absl::DeadlineExceededError(absl::StrCat("synchronous step ", push.step, " of shard ",
                                                      options_.shard, " timed out: ", reason,
                                                      "; the step was dropped, the server keeps serving"));
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
