#include "ps/sync_step.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psring::ps {

SyncStep::SyncStep(int workers, int backup_workers, ShardTensors* tensors, PendingTensors* pending,
                   absl::Mutex* tensors_mu)
    : tensors_mu_(tensors_mu),
      tensors_(tensors),
      pending_(pending),
      slots_(workers),
      quorum_(workers - backup_workers),
      accepted_id_(workers, 0),
      outrun_id_(workers, 0),
      dropped_by_rank_(workers, 0) {}

absl::Status SyncStep::AlignTrainerStep(int rank, int64_t trainer_step) {
  std::optional<int64_t> pending;
  for (const Slot& slot : slots_) {
    if (slot.id != 0) pending = slot.trainer_step;
  }
  if (!pending.has_value() || *pending == trainer_step) return absl::OkStatus();
  if (trainer_step < *pending) {
    return absl::AbortedError(absl::StrCat("skipped: rank ", rank, " pushed trainer step ", trainer_step,
                                           " but the other ranks are at step ", *pending,
                                           "; pull the parameters and go on"));
  }
  Drop(absl::StatusCode::kAborted, absl::StrCat("skipped: rank ", rank, " is at trainer step ", trainer_step,
                                                ", ahead of step ", *pending, "; pull the parameters and go on"));
  return absl::OkStatus();
}

SyncStep::Ticket SyncStep::Enter(int rank, float* gradient, int64_t trainer_step) {
  Slot& slot = slots_[rank];
  slot.id = next_id_++;
  slot.gradient = gradient;
  slot.delivered = 0;
  slot.trainer_step = trainer_step;
  return Ticket{rank, slot.id, generation_};
}

bool SyncStep::Late(int64_t trainer_step) const {
  std::optional<int64_t> pending = next_trainer_step_;
  for (const Slot& slot : slots_) {
    if (slot.id != 0) pending = slot.trainer_step;
  }
  return pending.has_value() && trainer_step < *pending;
}

uint64_t SyncStep::Progress() const {
  if (!backup()) return applied_;
  uint64_t delivered = 0;
  for (const Slot& slot : slots_) delivered += slot.id != 0 ? slot.delivered : 0;
  return delivered;
}

absl::StatusOr<bool> SyncStep::Deliver(const Ticket& ticket, uint64_t filled,
                                       const trainer::SgdOptions& hyperparameters) {
  if (backup()) return DeliverBackup(ticket, filled, hyperparameters);
  slots_[ticket.rank].delivered = filled;
  uint64_t ready = size_;
  for (const Slot& slot : slots_) ready = std::min(ready, slot.id != 0 ? slot.delivered : 0);
  if (ready <= applied_) return false;
  std::vector<float*> grads;
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(slots_.size()); ++r) {
    grads.push_back(slots_[r].gradient);
    ranks.push_back(r);
  }
  return Apply(grads, ranks, ready, hyperparameters);
}

absl::StatusOr<bool> SyncStep::DeliverBackup(const Ticket& ticket, uint64_t filled,
                                             const trainer::SgdOptions& hyperparameters) {
  Slot& slot = slots_[ticket.rank];
  slot.delivered = filled;
  if (filled < size_ || slot.in) return false;
  slot.in = true;
  if (++in_ < quorum_) return false;
  // The first N - B pushes are in: the step is theirs, averaged in rank order over N - B; the pushes still
  // streaming are outrun (their buffers are not read).
  std::vector<float*> grads;
  std::vector<int> ranks;
  std::vector<uint64_t> ids(slots_.size());
  for (int r = 0; r < static_cast<int>(slots_.size()); ++r) {
    ids[r] = slots_[r].id;
    if (!slots_[r].in) continue;
    grads.push_back(slots_[r].gradient);
    ranks.push_back(r);
  }
  const int64_t trainer_step = slot.trainer_step;
  absl::StatusOr<bool> completed = Apply(grads, ranks, size_, hyperparameters);
  if (!completed.ok()) return completed;
  for (int r : ranks) accepted_id_[r] = std::exchange(ids[r], 0);
  for (int r = 0; r < static_cast<int>(ids.size()); ++r) {
    if (ids[r] == 0) continue;
    outrun_id_[r] = ids[r];
    ++dropped_by_rank_[r];
  }
  next_trainer_step_ = trainer_step + 1;
  return completed;
}

absl::StatusOr<bool> SyncStep::Apply(const std::vector<float*>& grads, const std::vector<int>& ranks,
                                     uint64_t ready, const trainer::SgdOptions& hyperparameters) {
  uint64_t bad = ready;
  {
    // Readers of the shard's tensors (replies, pulls, checkpoints) wait only while a range is applied.
    absl::WriterMutexLock lock(tensors_mu_);
    ShardTensors& next = pending_->next;
    if (next.params.size() != tensors_->params.size()) {
      next.params.resize(tensors_->params.size());
      next.momentum.resize(tensors_->momentum.size());
    }
    bad = ApplyMeanStep(hyperparameters, grads, applied_, ready, *tensors_, &next);
    if (bad == ready && ready == size_) {
      // Complete: the new version becomes the shard's, the old buffers take the next step.
      tensors_->params.swap(next.params);
      tensors_->momentum.swap(next.momentum);
      pending_->applied = 0;
    } else {
      pending_->applied = bad == ready ? ready : 0;
    }
  }
  applied_ = ready;
  if (bad < ready) {
    // Finite gradients whose update overflows (near FLT_MAX with a large lr): refused like any failed step,
    // so no Inf/NaN is ever served or checkpointed.
    const std::string reason = absl::StrCat(
        "the update of element ", bad, " is not finite (mean gradient ", grads[0][bad], " with lr=",
        hyperparameters.lr, ", pushed by ranks ", absl::StrJoin(ranks, ","),
        "); the step was refused and rolled back: lower --lr or clip the gradients");
    Drop(absl::StatusCode::kInvalidArgument, reason);
    return absl::InvalidArgumentError(reason);
  }
  if (applied_ < size_) return false;
  Reset();
  return true;
}

absl::Status SyncStep::LeftStatus(const Ticket& ticket, int64_t step, int shard) const {
  if (ticket.generation == generation_) {
    return absl::CancelledError(absl::StrCat("the push of rank ", ticket.rank, " left step ", step));
  }
  return absl::Status(drop_code_,
                      absl::StrCat("synchronous step ", step, " of shard ", shard, " was dropped: ", drop_reason_));
}

void SyncStep::Drop(absl::StatusCode code, std::string reason) {
  if (applied_ > 0) {
    // The shard's tensors never saw the step: forgetting its output is the whole rollback.
    absl::WriterMutexLock lock(tensors_mu_);
    pending_->applied = 0;
  }
  drop_code_ = code;
  drop_reason_ = std::move(reason);
  Reset();
}

void SyncStep::Withdraw(int rank, absl::string_view reason, uint64_t version) {
  if (slots_[rank].id == 0) return;
  if (applied_ == 0) {
    // Nothing of the step was applied (so nothing was sent): forget this rank's part only.
    if (slots_[rank].in) --in_;
    slots_[rank] = Slot();
    return;
  }
  Drop(absl::StatusCode::kUnavailable,
       absl::StrCat(reason, " after part of the step was applied; the shard was rolled back to version ", version,
                    ": re-register and push the step again"));
}

std::vector<int> SyncStep::MissingRanks() const {
  std::vector<int> missing;
  if (backup()) {
    for (int r = 0; r < static_cast<int>(slots_.size()); ++r) {
      if (!slots_[r].in) missing.push_back(r);
    }
    return missing;
  }
  const auto delivered = [&](int r) { return slots_[r].id != 0 ? slots_[r].delivered : 0; };
  uint64_t least = size_;
  for (int r = 0; r < static_cast<int>(slots_.size()); ++r) least = std::min(least, delivered(r));
  for (int r = 0; r < static_cast<int>(slots_.size()); ++r) {
    if (least < size_ && delivered(r) == least) missing.push_back(r);
  }
  return missing;
}

void SyncStep::Reset() {
  for (Slot& slot : slots_) slot = Slot();
  in_ = 0;
  applied_ = 0;
  ++generation_;
}

}  // namespace psring::ps
