// The ParameterServer gRPC service for one shard: a contiguous range of the model's flat float32 vector,
// the optimizer state for it, and the step logic.
//
//   sync (or async with staleness 0): a push of step t waits until every one of the N ranks pushed step t;
//     the last arrival sums the N gradients in rank order, divides by N, applies the SGD-momentum step
//     (trainer/optimizer.h, the trainer's own function, so bit-identical to a local step), bumps the
//     version and wakes all N calls, which then stream the new parameters back.
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
//   DEADLINE_EXCEEDED   the other ranks did not arrive within --step_timeout (a dead worker); the partial
//                       step is dropped and the server keeps serving (a replacement may register that rank)
//   ABORTED             "skipped": in a synchronous step, ranks pushed different trainer steps (PushHeader.
//                       trainer_step), which happens only after a server restart or a worker replacement
//                       (one rank got the last reply before the crash, another did not). The most advanced
//                       step wins; the pushes of the others are refused (or dropped, if they came first)
//                       and their clients pull the parameters instead, so every rank stays in lockstep
//   UNAVAILABLE         the server is shutting down
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
    bool arrived = false;      // aggregating: its gradient for the current step is in `gradient`
    int64_t trainer_step = 0;  // of the push that is receiving or arrived
    std::vector<float> gradient;
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
  // Both waits end early with FAILED_PRECONDITION when `session` is replaced by a newer registration of
  // `rank` (a replacement worker, or a second worker started with the same --rank).
  absl::StatusOr<uint64_t> AwaitStepLocked(int rank, uint64_t session, int64_t step, uint64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> AwaitStalenessLocked(int rank, uint64_t session, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplySyncStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyAsyncLocked(std::vector<float>* gradient) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AfterVersionBumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the pending step's contributions; its waiters fail with `code` and `reason`.
  void DropPartialStepLocked(absl::StatusCode code, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aggregating mode: a push must carry the pending step's trainer step; see ABORTED above.
  absl::Status AlignTrainerStepLocked(int rank, int64_t trainer_step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<float> TakeBufferLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnBufferLocked(std::vector<float> buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteCheckpointLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Streams a PullReplyHeader and the parameters. Takes params_mu_ shared.
  template <typename Writer>
  bool WriteParameters(Writer* writer, uint64_t version);

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

  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
};

}  // namespace psring::ps

#endif  // PSRING_PS_SERVICE_H_
