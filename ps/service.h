// The ParameterServer gRPC service for one shard: a contiguous range of the model's flat float32 vector,
// the optimizer state for it, and the step logic.
//
//   sync (or async with staleness 0): step t is pipelined per element range, as in BytePS/ps-lite
//     partitioned servers. Each push streams into its own buffer; as soon as all N ranks have delivered
//     elements [0, k) of step t, the server sums them in rank order, divides by N and applies the SGD-momentum
//     step (trainer/optimizer.h, the trainer's own element-wise function, so bit-identical to a whole-shard or
//     local step) to the new range, and every PushPull of step t streams the updated range back while later
//     chunks are still being pushed. A rank's share of a step costs about N*S/B on a full-duplex link instead
//     of 2*N*S/B. Once the whole shard is applied the version becomes t + 1.
//     A step is all or nothing: before a range is updated its old parameters and momentum are saved, and a
//     step that is dropped (timeout, a push that breaks or is refused after part of the step was applied, a
//     re-registration mid-step, shutdown) restores them, so the shard stays exactly at version t. PushPulls
//     that already received part of the new values then fail; UNAVAILABLE tells them to re-register (which
//     returns the shard's version-t parameters) and push the step again. A push that breaks before anything
//     was applied is simply forgotten (the other ranks keep waiting for that rank, as before).
//   async with staleness s > 0: a push is applied on arrival as one optimizer step on gradient/N with
//     weight_decay/N (so one round of N pushes moves the parameters about as far as one synchronous step
//     in the long run); the call returns once no rank is more than s steps behind the pusher's new clock,
//     i.e. a rank more than s steps ahead of the slowest waits.
//
// Every request is validated before anything changes; failures leave parameters untouched:
//   INVALID_ARGUMENT    malformed request: wrong shard address, rank out of range, wrong world size, wrong
//                       tensor length, bad chunks, a total size that differs from the registered layout
//   FAILED_PRECONDITION wrong state: hyperparameters differ from the registered ones, session replaced by a
//                       newer registration of the rank, a step from the past, no parameters yet
//   NOT_FOUND           the session is unknown to this server (never registered, or the server restarted):
//                       re-register
//   ALREADY_EXISTS      duplicate push of the same step
//   OUT_OF_RANGE        a step from the future
//   DEADLINE_EXCEEDED   the step made no progress within --step_timeout (some rank did not push, or stalled
//                       mid-push: a dead worker); the partial step is rolled back and dropped and the server
//                       keeps serving (a replacement may register that rank)
//   ABORTED             "skipped": in a synchronous step, ranks pushed different trainer steps (PushHeader.
//                       trainer_step), which happens only after a server restart or a worker replacement
//                       (one rank got the last reply before the crash, another did not). The most advanced
//                       step wins; the pushes of the others are refused (or dropped, if they came first)
//                       and their clients pull the parameters instead, so every rank stays in lockstep
//   UNAVAILABLE         the server is shutting down, or (sync) the step was rolled back after part of it
//                       was applied because another rank's push broke: re-register and push again
//   UNAUTHENTICATED     --auth_token set and the call's "x-psring-token" metadata does not match
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server runs each call on its own
// thread).
#ifndef PSRING_PS_SERVICE_H_
#define PSRING_PS_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/ps.grpc.pb.h"
#include "ps/checkpoint.h"
#include "ps/tensor_frame.h"
#include "ps/wire.h"
#include "trainer/optimizer.h"

namespace psring::ps {

enum class Mode { kSync, kAsync };

struct ServiceOptions {
  int shard = 0;
  int num_shards = 1;
  int workers = 1;  // N: ranks 0..N-1 take part in every synchronous step
  Mode mode = Mode::kSync;
  int staleness = 0;                                // async only; 0 behaves exactly as sync
  absl::Duration step_timeout = absl::Seconds(60);  // longest wait for the other ranks (steps, metrics)
  std::string checkpoint_dir;                       // empty: no checkpoints
  int64_t checkpoint_every = 0;                     // versions between checkpoints; 0: only on shutdown
  std::string auth_token;                           // empty: no authentication
  size_t chunk_bytes = 1 << 20;                     // size of the parameter chunks the server streams back
  // Sync: a push stops being read while it is more than this many bytes ahead of the slowest rank's push, so
  // TCP gives every rank a fair share of the shard's downlink and the pipelined replies never wait on one
  // straggling push (0: no limit).
  size_t max_lead_bytes = 1 << 20;
};

class ParameterServerService final : public proto::ParameterServer::Service {
 public:
  // Validates options and resumes from the shard's checkpoint in checkpoint_dir when there is one
  // (kDataLoss when it is corrupt, kFailedPrecondition when it belongs to another shard layout).
  static absl::StatusOr<std::unique_ptr<ParameterServerService>> Create(const ServiceOptions& options);

  grpc::Status Register(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) override;
  // PushPull runs on TensorFrame messages (ps/tensor_frame.h: the same bytes as PushRequest/PullReply,
  // without copying tensors through protobuf); installed in the constructor.
  grpc::Status PushPullFrames(grpc::ServerContext* context,
                              grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<proto::PushRequest>* reader,
                    proto::PushReply* reply) override;
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    grpc::ServerWriter<proto::PullReply>* writer) override;
  grpc::Status AverageMetrics(grpc::ServerContext* context, const proto::MetricsRequest* request,
                              proto::MetricsReply* reply) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsReply* reply) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const proto::ShutdownRequest* request,
                        proto::ShutdownReply* reply) override;

  // Blocks until a Shutdown RPC (or RequestShutdown()) arrives or `timeout` passes; true when requested.
  bool WaitForShutdownRequest(absl::Duration timeout);
  void RequestShutdown();
  // Fails every waiting and future call with UNAVAILABLE. Non-blocking; idempotent.
  void BeginShutdown();

  // Writes the shard checkpoint now. OK without effect when there is no checkpoint_dir or no parameters.
  // Blocks on disk I/O.
  absl::Status WriteCheckpoint();

  proto::StatsReply GetStats();
  // A copy of the shard's parameters (empty before the first registration). For tests and tools.
  std::vector<float> CopyParameters();
  uint64_t version();

 private:
  struct RankState {
    uint64_t session = 0;      // 0: no live registration
    int64_t clock = 0;         // async: the next step this rank pushes
    bool receiving = false;    // a push from this rank is streaming in
    bool arrived = false;      // aggregating: its whole gradient for the current step arrived
    // Aggregating: the push taking part in the pending step (0: none), the buffer it streams into (owned
    // by that push's handler) and how many elements of it arrived so far.
    uint64_t push_id = 0;
    float* grad = nullptr;
    uint64_t delivered = 0;
    int64_t trainer_step = 0;  // of the push that is receiving or arrived
    bool metrics_arrived = false;
    std::vector<double> metrics;
  };

  explicit ParameterServerService(const ServiceOptions& options);

  absl::Status CheckAuth(grpc::ServerContext* context) const;
  absl::Status CheckAddress(const proto::ShardAddress& address) const;
  absl::Status CheckServingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSessionLocked(int rank, uint64_t session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<std::pair<uint64_t, uint64_t>> DoRegister(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream, int* rank);
  // Receives one push and applies it (sync: waits for the step to complete). Returns the version it
  // produced.
  // Where a push comes from: its header, then its gradient into a buffer (proto or TensorFrame stream).
  struct PushSource {
    std::function<absl::StatusOr<proto::PushHeader>()> header;
    std::function<absl::Status(float* dst, uint64_t count, uint64_t* bytes)> body;
  };
  absl::StatusOr<uint64_t> DoPush(grpc::ServerContext* context, const PushSource& source);
  // Header checks shared by sync and async pushes (length, duplicate, past/future step, trainer step).
  absl::Status ValidatePushLocked(const proto::PushHeader& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- The pipelined synchronous step (aggregating mode).
  struct SyncPush {
    int rank = 0;
    uint64_t session = 0;
    int64_t step = 0;
    uint64_t id = 0;
    uint64_t generation = 0;
  };
  // Reads one piece of the push body into the buffer; false at the end of the stream; *filled = elements
  // of the buffer filled so far.
  using PieceReader = std::function<absl::StatusOr<bool>(uint64_t* filled)>;
  // Validates the header and enters the push into the pending step; `buffer` receives the gradient and
  // must stay alive until FinishSyncPush.
  absl::StatusOr<SyncPush> StartSyncPush(grpc::ServerContext* context, const proto::PushHeader& h,
                                         std::vector<float>* buffer);
  // Reads the body, applying every range all ranks delivered. Non-blocking beyond the reads.
  absl::Status ReceiveSyncPush(grpc::ServerContext* context, const SyncPush& push, uint64_t count,
                               const PieceReader& read);
  // Blocks until elements [0, want) of the push's step are applied (*available: how many are), the step is
  // dropped, or it made no progress within step_timeout (then drops it: DEADLINE_EXCEEDED).
  absl::Status AwaitAppliedLocked(const SyncPush& push, uint64_t want, uint64_t* available)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Streams the reply header and the step's updated parameters as they are applied.
  absl::Status StreamStepReplies(const SyncPush& push,
                                 grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  // Takes the push out of the pending step if it is still in it (see the class comment) and recycles
  // `buffer`. `why` says why the push ended early.
  void FinishSyncPush(const SyncPush& push, const absl::Status& why, std::vector<float> buffer);
  bool OwnsSlotLocked(const SyncPush& push) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DroppedStatusLocked(const SyncPush& push) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the ranges every rank delivered; completes the step when the whole shard is applied.
  void AdvanceStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyRangeLocked(uint64_t begin, uint64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResetStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears one rank's part of the pending step when nothing was applied yet; drops (rolls back) the whole
  // step otherwise.
  void WithdrawRankLocked(int rank, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Async: waits until the pusher is within `staleness` steps of the slowest rank. Ends early with
  // FAILED_PRECONDITION when `session` is replaced by a newer registration of `rank`.
  absl::StatusOr<uint64_t> AwaitStalenessLocked(int rank, uint64_t session, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyAsyncLocked(std::vector<float>* gradient) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AfterVersionBumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rolls back what the pending step applied and drops its contributions; its waiters fail with `code`
  // and `reason`.
  void DropPartialStepLocked(absl::StatusCode code, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aggregating mode: a push must carry the pending step's trainer step; see ABORTED above.
  absl::Status AlignTrainerStepLocked(int rank, int64_t trainer_step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<float> TakeBufferLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnBufferLocked(std::vector<float> buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteCheckpointLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Streams a PullReplyHeader and the parameters. The caller holds params_mu_ shared.
  template <typename Writer>
  bool WriteParametersLocked(Writer* writer, uint64_t version) ABSL_SHARED_LOCKS_REQUIRED(params_mu_);

  const ServiceOptions options_;
  const bool aggregate_;  // sync, or async with staleness 0
  const uint64_t chunk_elements_;

  absl::Mutex mu_;
  absl::CondVar cv_;  // signalled on every state change anyone waits for
  bool layout_known_ ABSL_GUARDED_BY(mu_) = false;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;  // params_ hold real values
  uint64_t total_params_ ABSL_GUARDED_BY(mu_) = 0;
  ShardRange range_ ABSL_GUARDED_BY(mu_);
  trainer::SgdOptions hyperparameters_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<RankState> ranks_ ABSL_GUARDED_BY(mu_);
  uint64_t step_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when a step completes or is dropped
  std::string last_drop_reason_ ABSL_GUARDED_BY(mu_);
  absl::StatusCode last_drop_code_ ABSL_GUARDED_BY(mu_) = absl::StatusCode::kDeadlineExceeded;
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;      // elements of the pending sync step applied so far
  uint64_t next_push_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::vector<float>> buffer_pool_ ABSL_GUARDED_BY(mu_);
  uint64_t next_session_ ABSL_GUARDED_BY(mu_);
  uint64_t metrics_round_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t metrics_result_round_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  std::vector<double> metrics_result_ ABSL_GUARDED_BY(mu_);
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t checkpoints_written_ ABSL_GUARDED_BY(mu_) = 0;

  // params_ and momentum_ are written only with mu_ held AND params_mu_ held exclusively; readers that
  // stream them out hold params_mu_ shared (without mu_, so a slow client never blocks other calls' checks).
  absl::Mutex params_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<float> params_;
  std::vector<float> momentum_;
  // Values of params_/momentum_ over [0, applied_) before the pending step: what a dropped step restores.
  std::vector<float> undo_params_;
  std::vector<float> undo_momentum_;

  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
};

}  // namespace psring::ps

#endif  // PSRING_PS_SERVICE_H_
