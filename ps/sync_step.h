// The pending synchronous step of one shard, pipelined per element range (as in BytePS / ps-lite
// partitioned servers), all or nothing:
//
//   rank 0 push  [#########|#####      ]   delivered 0: 14 of 22 elements
//   rank 1 push  [#########|##         ]   delivered 1: 11
//   rank 2 push  [#########|######     ]   delivered 2: 15
//   parameters   [=========|           ]   applied: 9 = what was applied so far
//                           ^ min(delivered) = 11: Deliver() applies [9, 11) now
//
// Every push streams into its own buffer. As soon as all N ranks delivered elements [0, k), [applied, k) is
// averaged (ps/shard_update.h) and applied, so the replies can stream it back while the rest is pushed. The
// step is applied out of place, into PendingTensors::next, and the shard's tensors keep the last complete
// version: a step that is dropped (timeout, a push that breaks after part of it was applied, a
// re-registration, a trainer-step mismatch) is simply forgotten, with nothing to copy back, and the pushes
// still in it learn why through DroppedStatus(). When the whole shard is applied the step is complete: the
// two buffers swap (no copy) and the state resets for the next one. So no applied byte is ever written
// again until two steps later, which lets replies send the parameters straight from these buffers.
//
// Backup workers (B > 0, TensorFlow SyncReplicasOptimizer's semantics): a push is "in" when its last element
// arrived, and the step closes as soon as N - B pushes are in. Its update is
//     g = (sum of the N - B complete pushes, in rank order) / (N - B)
// applied to the whole shard at once (no pipelining: which pushes count is known only at the close). The
// pushes still streaming then are outrun: their buffers were never read, so no part of them reaches the
// parameters, and they are dropped (counted per rank) like pushes that arrive tagged with a trainer step the
// shard already closed (Late()). Every push streams into its own buffer either way, so a dropped push needs
// no staging of its own.
//
// Trainer-step alignment: all pushes of a step must carry the same trainer step (PushHeader.trainer_step).
// Ranks differ only after a server restart or a worker replacement; the most advanced wins: a push behind
// the pending step is refused with ABORTED, a push ahead of it drops the pending step (its pushes get
// ABORTED) and starts a new one.
//
// Thread-compatible: the owner (ps/shard_core.h) serializes every call with its own mutex. SyncStep writes
// the shard's tensors only with *tensors_mu held exclusively; readers of the tensors hold it shared.
#ifndef PSRING_PS_SYNC_STEP_H_
#define PSRING_PS_SYNC_STEP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "ps/shard_update.h"
#include "trainer/optimizer.h"

namespace psring::ps {

// The pending step's output, beside the shard's tensors and guarded by the same mutex: next[0, applied)
// holds the pending step's new parameters and momentum (applied = 0: no step is partly applied).
struct PendingTensors {
  ShardTensors next;
  uint64_t applied = 0;
};

// Where the parameters of [offset, end) of the newest applied values are: the pending step's output when it
// has applied them, else the shard's last complete version. `tensors_mu` held (shared is enough).
inline const float* NewestParameters(const ShardTensors& tensors, const PendingTensors& pending, uint64_t end) {
  return pending.applied >= end ? pending.next.params.data() : tensors.params.data();
}

class SyncStep {
 public:
  // Identifies one push in one step: a push whose step was dropped or completed no longer owns its slot.
  struct Ticket {
    int rank = 0;
    uint64_t id = 0;
    uint64_t generation = 0;
  };

  // `tensors` (guarded by *tensors_mu) is the shard the steps apply to, `pending` (same mutex) where a step
  // is applied until it completes; all must outlive this object. 0 <= backup_workers < workers.
  SyncStep(int workers, int backup_workers, ShardTensors* tensors, PendingTensors* pending,
           absl::Mutex* tensors_mu);
  SyncStep(const SyncStep&) = delete;
  SyncStep& operator=(const SyncStep&) = delete;

  // The shard's length in elements; set once the layout is known, before the first push.
  void set_size(uint64_t size) { size_ = size; }

  // Whether `rank` has a push in the step, and whether it is still streaming in.
  bool HasPush(int rank) const { return slots_[rank].id != 0; }
  bool Receiving(int rank) const { return slots_[rank].id != 0 && slots_[rank].delivered < size_; }

  // OK when a push at `trainer_step` may join the step; ABORTED ("skipped") when the step's pushes carry a
  // later trainer step. A later trainer step than the pending one drops the pending step first.
  absl::Status AlignTrainerStep(int rank, int64_t trainer_step);

  // Enters `rank`'s push; gradient[0, size) receives it and must stay valid until the push leaves the step
  // (Withdraw, Drop, completion). The rank must not have a push in the step.
  Ticket Enter(int rank, float* gradient, int64_t trainer_step);
  bool Owns(const Ticket& ticket) const {
    return ticket.id != 0 && ticket.generation == generation_ && slots_[ticket.rank].id == ticket.id;
  }

  // ---- Backup workers (B > 0; see above).
  bool backup() const { return quorum_ < static_cast<int>(slots_.size()); }
  // Whether a push at `trainer_step` belongs to a step this shard already closed (or to an older step than
  // the pending one): it is then dropped without entering the step.
  bool Late(int64_t trainer_step) const;
  // Forgets the trainer step of the last close, so the next push may start the pending step at any trainer
  // step (as with B = 0): called on every registration, since a new job may count its steps from 0.
  void ForgetClosedStep() { next_trainer_step_.reset(); }
  // Counts a push of `rank` dropped on arrival (Late, or tagged with an older version).
  void CountDropped(int rank) { ++dropped_by_rank_[rank]; }
  // Whether the push was among the N - B of the last step that closed with it / was outrun by that close.
  bool Accepted(const Ticket& ticket) const {
    return ticket.id != 0 && accepted_id_[ticket.rank] == ticket.id;
  }
  bool Outrun(const Ticket& ticket) const { return ticket.id != 0 && outrun_id_[ticket.rank] == ticket.id; }
  // Dropped pushes per rank since this object was made.
  const std::vector<uint64_t>& dropped_by_rank() const { return dropped_by_rank_; }
  // What a step's timeout watches: the elements applied (B = 0) or delivered into the step (B > 0).
  uint64_t Progress() const;

  // Records that gradient[0, filled) of an owned push arrived and applies every range all ranks delivered
  // (B > 0: the whole step once N - B pushes are in; blocks on the arithmetic). True when this completed the
  // step: the state is reset for the next one.
  // kInvalidArgument when the update is not finite somewhere: the step is dropped (rolled back) with it.
  absl::StatusOr<bool> Deliver(const Ticket& ticket, uint64_t filled, const trainer::SgdOptions& hyperparameters);

  // Elements of the pending step applied so far (0: the tensors hold exactly the last complete version).
  uint64_t applied() const { return applied_; }
  // Bumped whenever a step completes or is dropped.
  uint64_t generation() const { return generation_; }

  // For a push that no longer owns its slot: CANCELLED when it left a step that is still pending, else the
  // code and reason its step was dropped with.
  absl::Status LeftStatus(const Ticket& ticket, int64_t step, int shard) const;

  // Forgets what the step applied and ends it; its pushes fail with `code` and `reason`.
  void Drop(absl::StatusCode code, std::string reason);
  // Takes `rank`'s push out of the step: only its part is forgotten while nothing was applied; otherwise
  // the whole step is dropped with UNAVAILABLE (the shard rolls back to `version`). No-op without a push.
  void Withdraw(int rank, absl::string_view reason, uint64_t version);

  // The ranks the pending step waits for: those that delivered least (nothing, when they have not pushed),
  // i.e. not the ones held back by them (a push window stops a fast rank a little ahead of the slowest).
  // B > 0: the ranks whose push is not in.
  std::vector<int> MissingRanks() const;

 private:
  struct Slot {
    uint64_t id = 0;  // 0: no push in the step
    float* gradient = nullptr;
    uint64_t delivered = 0;
    int64_t trainer_step = 0;
    bool in = false;  // B > 0: the whole push arrived (counts towards the N - B)
  };
  // Averages grads (the pushes of `ranks`) over [applied_, ready) into the pending output and makes the
  // step the shard's version once ready == size_. The update not finite: drops the step (kInvalidArgument).
  absl::StatusOr<bool> Apply(const std::vector<float*>& grads, const std::vector<int>& ranks, uint64_t ready,
                             const trainer::SgdOptions& hyperparameters);
  absl::StatusOr<bool> DeliverBackup(const Ticket& ticket, uint64_t filled,
                                     const trainer::SgdOptions& hyperparameters);
  void Reset();

  absl::Mutex* const tensors_mu_;
  ShardTensors* const tensors_ ABSL_PT_GUARDED_BY(tensors_mu_);
  PendingTensors* const pending_ ABSL_PT_GUARDED_BY(tensors_mu_);
  std::vector<Slot> slots_;
  const int quorum_;  // N - B: the pushes a step averages
  int in_ = 0;        // B > 0: slots whose push is in
  // B > 0: per rank, the push accepted by / outrun at the last close that involved it; drops per rank; the
  // trainer step after the last step closed (none before the first close).
  std::vector<uint64_t> accepted_id_;
  std::vector<uint64_t> outrun_id_;
  std::vector<uint64_t> dropped_by_rank_;
  std::optional<int64_t> next_trainer_step_;
  uint64_t size_ = 0;
  uint64_t applied_ = 0;
  uint64_t generation_ = 0;
  uint64_t next_id_ = 1;
  absl::StatusCode drop_code_ = absl::StatusCode::kDeadlineExceeded;
  std::string drop_reason_;
};

}  // namespace psring::ps

#endif  // PSRING_PS_SYNC_STEP_H_
