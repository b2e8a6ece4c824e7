// ShardCore: everything one parameter-server shard decides, without any transport (the gRPC service in
// ps/service.h is a thin adapter from streams to these calls, as ps-lite's KVServer separates the request
// handle from the update). It owns the shard's state under one mutex:
//   - registration: the layout (total size, the element layout of ps/shard_layout.h and so this shard's
//     range of the wire order, hyperparameters) and the initial parameters
//     fixed together by the first registration that offers parameters and passes every check (a checkpoint
//     wins over every offer; a refused call fixes nothing), and one session per rank (a newer
//     registration of a rank replaces the older session);
//   - the synchronous step, pipelined per range with rollback and trainer-step alignment (ps/sync_step.h);
//   - the asynchronous bounded-staleness policy (ps/async_policy.h);
//   - the metrics barrier (ps/metrics_barrier.h);
//   - checkpoints: resumed in Create(); every checkpoint_every versions the state is copied under the lock
//     and written to disk (ps/checkpoint.h) without it, by the call that completed that version.
// Status codes are those documented at the top of ps/service.h (the adapter passes them through).
//
// A synchronous push, as a transport drives it (each call may run on its own thread; replies are streamed
// by a second thread while the first reads):
//   ASSIGN_OR_RETURN(SyncPush push, core->StartSyncPush(info));        // buffer from the core's pool
//   reader:  receive into push.gradient.data(), calling Delivered(push, filled, cancelled) as it fills
//   writer:  for each range: AwaitApplied(push, end) then ReadParameters(range) and send it
//   core->FinishSyncPush(std::move(push), status);                   // leaves the step, recycles the buffer
// With backup workers (backup_workers > 0) nothing is pipelined, so one thread does it all:
//   ASSIGN_OR_RETURN(SyncPush push, core->StartSyncPush(info));        // push.late: dropped on arrival
//   receive into push.gradient.data(), calling Delivered(push, filled, cancelled) as it fills
//   ASSIGN_OR_RETURN(StepReply reply, core->AwaitStepReply(push));    // its step closed, or it was dropped
//   core->FinishSyncPush(std::move(push), status);  then send reply.parameters
//
// Thread-safety: every public method may be called concurrently from any thread.
#ifndef PSRING_PS_SHARD_CORE_H_
#define PSRING_PS_SHARD_CORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/async_policy.h"
#include "ps/checkpoint.h"
#include "ps/metrics_barrier.h"
#include "ps/shard_layout.h"
#include "ps/shard_update.h"
#include "ps/sync_step.h"
#include "trainer/optimizer.h"

namespace psring::ps {

enum class Mode { kSync, kAsync };

struct ShardOptions {
  int shard = 0;
  int num_shards = 1;
  int workers = 1;  // N: ranks 0..N-1 take part in every synchronous step
  Mode mode = Mode::kSync;
  int staleness = 0;                                // async only; 0 behaves exactly as sync
  // Sync only, 0 <= B < workers: a step averages the first N - B pushes that arrive complete (the sum of
  // those N - B gradients divided by N - B) and drops the rest (ps/sync_step.h). 0: each step waits for N.
  int backup_workers = 0;
  absl::Duration step_timeout = absl::Seconds(60);  // longest wait for the other ranks (steps, metrics)
  std::string checkpoint_dir;                       // empty: no checkpoints
  int64_t checkpoint_every = 0;                     // versions between checkpoints; 0: only on shutdown
  size_t chunk_bytes = 1 << 20;                     // size of the parameter ranges replies are cut into
  // Sync: a push stops being read while it is more than this many bytes ahead of the slowest rank's push, so
  // TCP gives every rank a fair share of the shard's downlink and the pipelined replies never wait on one
  // straggling push (0: no limit).
  size_t max_lead_bytes = 1 << 20;
  // Largest model (total_params, all shards together) a registration may announce: bounds what one caller
  // can make the shard allocate. 2^30 floats = 4 GiB.
  uint64_t max_params = uint64_t{1} << 30;
  // A push whose gradient on this shard has an L2 norm above this is refused (INVALID_ARGUMENT naming the
  // rank, the step and the norm) and nothing of it is applied; a synchronous step it was part of is rolled
  // back (ps/service.h). Per shard: a slice's norm never exceeds the whole gradient's, so every refused
  // gradient is over the bound, and with K shards a gradient passes with a norm of at most sqrt(K) times it.
  // Training never comes near the default (gradient-only mode's largest model, 2^30 values near 1, has a
  // norm of 32768); it stops huge finite gradients from poisoning the model. Infinity: no bound.
  double max_grad_norm = 1e6;
};

// The largest --workers a server accepts: per-rank state is allocated up front.
inline constexpr int kMaxWorkers = 1 << 16;


// What a worker says about itself when it registers.
struct Registration {
  int rank = 0;
  int world_size = 0;
  uint64_t total_params = 0;  // the whole flat vector, all shards together
  trainer::SgdOptions hyperparameters;
  // The element layout (ps/shard_layout.h): bucket sizes in launch order, empty for flat; and the worker
  // settings that chose it ("--bucket_mb=25"), named in messages only.
  std::vector<uint64_t> layout_buckets;
  std::string layout_settings;
};

// Longest Registration::layout_settings a shard keeps (longer ones are cut).
inline constexpr size_t kMaxLayoutSettingsBytes = 256;

// What a registered worker gets back.
struct RegisteredRank {
  absl::uint128 session = 0;
  uint64_t total_params = 0;
  ShardRange range;
  uint64_t version = 0;
  int64_t next_step = 0;  // the step this rank pushes next
  bool aggregating = true;
  std::vector<float> params;  // the shard's parameters at `version`
};

// The header of a push (proto PushHeader without the shard address, which the transport checks).
struct PushInfo {
  int rank = 0;
  absl::uint128 session = 0;
  int64_t step = 0;
  uint64_t num_elements = 0;
  int64_t trainer_step = 0;
};

// A push admitted into the pending synchronous step. `gradient` (the shard's length, from the core's pool)
// receives the push; the core reads [0, filled) of it until the push is finished, so it must not be
// resized or freed before FinishSyncPush, which takes it back.
struct SyncPush {
  SyncStep::Ticket ticket;
  absl::uint128 session = 0;
  int64_t step = 0;
  std::vector<float> gradient;
  uint64_t checked = 0;  // gradient[0, checked) was found finite by Delivered()
  double sum_squares = 0;  // of gradient[0, checked)
  // Backup workers: its step had closed when it arrived (an older trainer step or version): it is read and
  // dropped, never entering a step.
  bool late = false;
};

// An admitted asynchronous push: the caller fills `gradient`, then hands it to FinishAsyncPush.
struct AsyncPush {
  int rank = 0;
  absl::uint128 session = 0;
  int64_t step = 0;
  std::vector<float> gradient;
};

struct ParameterSnapshot {
  uint64_t version = 0;
  std::vector<float> params;
};

// Backup workers: what a push's reply sends once its step closed. `parameters` (shared by every reply of
// that version, never written again) are the shard's at parameters->version; `dropped`: the push came too
// late (or was outrun by the N - B others) and none of it reached them.
struct StepReply {
  bool dropped = false;
  std::shared_ptr<const ParameterSnapshot> parameters;
};

struct ShardStats {
  int registered_workers = 0;
  uint64_t version = 0;
  uint64_t total_params = 0;  // 0 until the first registration
  ShardRange range;           // of the layout's wire order
  std::string layout;         // "flat (--bucket_mb=0)", "5 buckets (--bucket_mb=25)"; empty until registered
  uint64_t checkpoints_written = 0;
  std::vector<uint64_t> dropped_by_rank;  // backup workers: pushes dropped per rank (N entries)
  uint64_t dropped_pushes = 0;            // their sum
};

class ShardCore {
 public:
  // Validates options; resumes from the shard's checkpoint in checkpoint_dir (created if missing) when
  // there is one (kDataLoss when it is corrupt, kFailedPrecondition when it belongs to another layout).
  static absl::StatusOr<std::unique_ptr<ShardCore>> Create(const ShardOptions& options);
  ShardCore(const ShardCore&) = delete;
  ShardCore& operator=(const ShardCore&) = delete;

  const ShardOptions& options() const { return options_; }
  // Sync, or async with staleness 0: pushes go through the pipelined step. Otherwise applied on arrival.
  bool aggregating() const { return aggregating_; }
  // Sync with backup workers: pushes go through StartSyncPush, Delivered and AwaitStepReply (no pipelining).
  bool backup() const { return options_.backup_workers > 0; }
  // Replies are cut into ranges of at most this many elements.
  uint64_t chunk_elements() const { return chunk_elements_; }

  // ---- Registration, in three calls so that a transport can read the offered parameters in between.
  // None of them changes the shard's state when it fails: the layout, the hyperparameters and the
  // parameters are fixed together by the first successful OfferInitialParameters.
  // Validates `registration` (against --max_params, the hyperparameter ranges and the layout already fixed,
  // if any: a worker whose element layout differs gets kFailedPrecondition naming both) and returns the
  // shard's range of the wire order for it. Changes nothing. Non-blocking.
  absl::StatusOr<ShardRange> BeginRegistration(const Registration& registration);
  // Fixes `registration`'s layout and hyperparameters with `initial` (the shard's length, all finite) as
  // the parameters unless the shard has them already (then only checks that `registration` matches).
  absl::Status OfferInitialParameters(const Registration& registration, std::vector<float> initial);
  // Gives the rank a new session (replacing any older one, whose waiting calls end) and returns the state
  // it starts from; fails when the shard has no parameters yet or `registration` does not match them. A
  // part of the pending synchronous step the old session pushed is withdrawn.
  absl::StatusOr<RegisteredRank> CompleteRegistration(const Registration& registration);
  // Whether the shard's parameters are fixed (by a checkpoint or an accepted offer). Non-blocking.
  bool has_parameters();

  // ---- The synchronous step (aggregating mode).
  // Validates the push and enters it into the pending step. Non-blocking.
  absl::StatusOr<SyncPush> StartSyncPush(const PushInfo& info);
  // Records that push->gradient[0, filled) arrived (filled never decreases) and applies every range all
  // ranks delivered. A non-finite value in the new part fails with INVALID_ARGUMENT before anything of it
  // is applied (the caller then abandons the push, which rolls the step back). Blocks on the arithmetic, on writing a checkpoint this completed, and while the push
  // is more than max_lead_bytes ahead of the slowest push, until the others catch up, the step is
  // dropped, the server shuts down or cancelled() (polled) says so. Fails when the push left the step.
  absl::Status Delivered(SyncPush* push, uint64_t filled, absl::FunctionRef<bool()> cancelled);
  // Backup workers, once the whole push was delivered: blocks until its step closed and returns the shard's
  // parameters then; at once for a push that is late or was outrun. Fails when the step is dropped, and
  // drops it (DEADLINE_EXCEEDED) when no push of it made progress within step_timeout (fewer than N - B
  // ranks push).
  absl::StatusOr<StepReply> AwaitStepReply(const SyncPush& push);
  // Blocks until elements [0, want) of the push's step are applied and returns how many are (the whole
  // shard once the step completed). Fails when the step is dropped, and drops it (DEADLINE_EXCEEDED) when
  // it made no progress within step_timeout.
  absl::StatusOr<uint64_t> AwaitApplied(const SyncPush& push, uint64_t want);
  // Calls read(params + offset) with the newest applied parameters of [offset, offset + count) (which must
  // lie in the shard) held still: the pending step's output where it has applied that range, else the last
  // complete version. Blocks only while an update is being applied. Aggregating mode: those bytes are not
  // written again until two steps later (ps/sync_step.h), so `read` may keep the pointer for a reply that a
  // rank must receive before it can push the next step; it stays valid as long as this core.
  void ReadParameters(uint64_t offset, uint64_t count, absl::FunctionRef<void(const float*)> read);
  // The push broke (`why`): takes it out of the step at once (rolling the step back when part of it was
  // applied), so the other waiters end now. The buffer stays valid.
  void AbandonSyncPush(const SyncPush& push, const absl::Status& why);
  // Takes the push out of the step if it is still in it (it ended early: `why`) and recycles its buffer.
  void FinishSyncPush(SyncPush push, const absl::Status& why);

  // ---- Asynchronous pushes (staleness > 0).
  // Validates the push and hands out the buffer to receive it into. Non-blocking.
  absl::StatusOr<AsyncPush> StartAsyncPush(const PushInfo& info);
  // Applies the push when `received` is OK, the session still current and every value finite
  // (INVALID_ARGUMENT otherwise, nothing applied), then blocks until the pusher
  // is within `staleness` steps of the slowest rank; returns the shard's version then.
  absl::StatusOr<uint64_t> FinishAsyncPush(AsyncPush push, const absl::Status& received);

  // The shard's parameters and their version, never half a synchronous step: waits (at most step_timeout)
  // while a step is partly applied.
  absl::StatusOr<ParameterSnapshot> Pull(int rank, absl::uint128 session);

  // Blocks until all ranks called it (a round), then returns the element-wise mean of their values.
  absl::StatusOr<std::vector<double>> AverageMetrics(int rank, absl::uint128 session, std::vector<double> values);

  ShardStats Stats();
  // A copy of the shard's parameters (empty before the first registration). For tests and tools.
  std::vector<float> CopyParameters();
  uint64_t version();

  // Blocks until RequestShutdown() or `timeout`; true when requested.
  bool WaitForShutdownRequest(absl::Duration timeout);
  void RequestShutdown();
  // Fails every waiting and future call with UNAVAILABLE. Non-blocking; idempotent.
  void BeginShutdown();

  // Writes the shard checkpoint now (a partly applied step is dropped first). OK without effect when
  // there is no checkpoint_dir or no parameters. Blocks on disk I/O, without holding the shard's lock.
  absl::Status WriteCheckpoint();

 private:
  explicit ShardCore(const ShardOptions& options);

  absl::Status CheckServingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSessionLocked(int rank, absl::uint128 session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The registration's checks that need no state; returns its element layout.
  absl::StatusOr<ShardLayout> CheckRegistration(const Registration& registration) const;
  // Whether `registration` (of element layout `layout`) agrees with the fixed layout and hyperparameters
  // (OK before they are fixed).
  absl::Status CheckMatchesLocked(const Registration& registration, const ShardLayout& layout) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Header checks shared by sync and async pushes (session, length, duplicate, past/future, trainer step).
  // With `late` (backup workers), a push of a step already closed sets *late instead of failing.
  absl::Status ValidatePushLocked(const PushInfo& info, bool* late = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current version's parameters for replies (backup workers), copied once per version.
  StepReply ReplyLocked(bool dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DroppedStatusLocked(const SyncPush& push) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WithdrawLocked(int rank, absl::string_view reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropStepLocked(absl::StatusCode code, std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> AwaitStalenessLocked(int rank, absl::uint128 session, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The version moved on; true when a checkpoint is due (snapshotted into pending_checkpoint_).
  bool BumpVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<ShardCheckpoint> SnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes pending_checkpoint_, if any; logs a failure (training goes on). Call without mu_.
  void WritePendingCheckpoint() ABSL_LOCKS_EXCLUDED(mu_, checkpoint_mu_);
  absl::Status WriteSnapshot(const ShardCheckpoint& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);
  std::vector<float> TakeBufferLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnBufferLocked(std::vector<float> buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShardOptions options_;
  const bool aggregating_;
  const uint64_t chunk_elements_;

  // Serializes checkpoint writes, so files are written in version order.
  absl::Mutex checkpoint_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  absl::CondVar cv_;  // signalled on every state change anyone waits for
  // The layout, hyperparameters and tensors_ are fixed (by a checkpoint or the first accepted offer).
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t total_params_ ABSL_GUARDED_BY(mu_) = 0;
  // The element layout, the settings that chose it, and the checkpoint it was resumed from ("" when a
  // worker fixed it).
  ShardLayout layout_ ABSL_GUARDED_BY(mu_) = ShardLayout::Flat(0, 1);
  std::string layout_settings_ ABSL_GUARDED_BY(mu_);
  std::string layout_checkpoint_ ABSL_GUARDED_BY(mu_);
  ShardRange range_ ABSL_GUARDED_BY(mu_);  // this shard's range of the layout's wire order
  trainer::SgdOptions hyperparameters_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // Per rank; 0: no live registration. 128 random bits each (not a counter: a caller that knows its own
  // session must not be able to guess another rank's, nor one of a restarted server).
  std::vector<absl::uint128> sessions_ ABSL_GUARDED_BY(mu_);
  SyncStep sync_ ABSL_GUARDED_BY(mu_);
  StalenessPolicy staleness_ ABSL_GUARDED_BY(mu_);
  MetricsBarrier metrics_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<float>> buffer_pool_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ShardCheckpoint> pending_checkpoint_ ABSL_GUARDED_BY(mu_);
  uint64_t checkpoints_written_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const ParameterSnapshot> reply_parameters_ ABSL_GUARDED_BY(mu_);  // see ReplyLocked
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  // The tensors are written only with mu_ held AND tensors_mu_ held exclusively; readers that copy them
  // out hold tensors_mu_ shared (without mu_, so copying a reply never blocks other calls' checks).
  absl::Mutex tensors_mu_ ABSL_ACQUIRED_AFTER(mu_);
  ShardTensors tensors_ ABSL_GUARDED_BY(tensors_mu_);
  PendingTensors pending_ ABSL_GUARDED_BY(tensors_mu_);  // the pending synchronous step's output
};

}  // namespace psring::ps

#endif  // PSRING_PS_SHARD_CORE_H_
