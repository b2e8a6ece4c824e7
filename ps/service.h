// The ParameterServer gRPC service for one shard: its slice of every bucket of the model's flat float32
// vector (the element layout, ps/shard_layout.h; one contiguous range in the flat layout), the optimizer
// state for it, and the step logic. The service is a thin adapter from gRPC streams to the
// shard's core (ps/shard_core.h, no gRPC), which holds the state and makes every decision below; the
// adapter authenticates calls, checks shard addresses, moves tensors between streams and buffers and
// counts the bytes.
//
//   sync (or async with staleness 0): step t is pipelined per element range, as in BytePS/ps-lite
//     partitioned servers. Each push streams into its own buffer; as soon as all N ranks have delivered
//     elements [0, k) of step t, the server sums them in rank order, divides by N and applies the SGD-momentum
//     step (trainer/optimizer.h, the trainer's own element-wise function, so bit-identical to a whole-shard or
//     local step) to the new range, and every PushPull of step t streams the updated range back while later
//     chunks are still being pushed. A rank's share of a step costs about N*S/B on a full-duplex link instead
//     of 2*N*S/B. Once the whole shard is applied the version becomes t + 1.
//     A step is all or nothing: it is applied out of place (ps/sync_step.h) and becomes the shard's version
//     only when complete, and a step that is dropped (timeout, a push that breaks or is refused after part
//     of the step was applied, a re-registration mid-step, shutdown) is forgotten, so the shard stays
//     exactly at version t. Replies are sent straight from those buffers (zero copy). PushPulls
//     that already received part of the new values then fail; UNAVAILABLE tells them to re-register (which
//     returns the shard's version-t parameters) and push the step again. A push that breaks before anything
//     was applied is simply forgotten (the other ranks keep waiting for that rank, as before).
//   sync with backup workers B > 0 (--backup_workers, TensorFlow SyncReplicasOptimizer's semantics): a push
//     belongs to the step of its trainer_step; step t closes as soon as N - B of its pushes arrived whole,
//     and its update is the sum of those N - B gradients (in rank order) divided by N - B, applied to the
//     whole shard at once (not pipelined). Every reply then carries the new parameters. A push of step t
//     still streaming at the close, and any push that arrives after its step closed (or tagged with an older
//     step or version), is dropped: read to its end, none of it added, counted (StatsReply.dropped_pushes
//     and dropped_by_rank), and answered OK at once with the shard's current parameters and
//     PullReplyHeader.dropped, so that rank goes on with its next step. Replies are not zero copy: the steps
//     no longer wait for every rank to receive its reply, so each version is copied once under the lock and
//     each reply's chunks once more. A step that gathers fewer than N - B pushes within --step_timeout fails
//     DEADLINE_EXCEEDED as below.
//   async with staleness s > 0: a push is applied on arrival as one optimizer step on gradient/N with
//     weight_decay/N (so one round of N pushes moves the parameters about as far as one synchronous step
//     in the long run); the call returns once no rank is more than s steps behind the pusher's new clock,
//     i.e. a rank more than s steps ahead of the slowest waits.
//
// Every request is validated before anything changes; failures leave parameters untouched:
//   INVALID_ARGUMENT    malformed request: wrong shard address, rank out of range, wrong world size, wrong
//                       tensor length, bad chunks, a total size that differs from the registered layout
//   FAILED_PRECONDITION wrong state: hyperparameters or the element layout (--bucket_mb) differ from the
//                       registered (or checkpointed) ones, session replaced by a newer registration of the
//                       rank, a step from the past, no parameters yet
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
//                       was applied because another rank's push broke: re-register and push again; with a
//                       token, also a Register of a rank another worker holds live (retry: see below)
//   UNAUTHENTICATED     --auth_token set and the call is not authenticated (ps/call_auth.h: no channel, a
//                       wrong MAC, a replayed counter, fields other than those the MAC covers)
//   PERMISSION_DENIED   --auth_token set and the caller acts as another rank than its channel's, uses a session
//                       another worker registered, or asks for Shutdown without being rank 0 while the job runs
//                       (ps/auth_channels.h)
//
// Per-rank credentials and bounds (issue 34): with a token, re-registering a rank whose session is live needs
// that session's channel (another caller gets UNAVAILABLE and may retry: it gets the rank once the live
// worker has been silent for --step_timeout, as a crashed one is). A pushed gradient whose norm on this shard
// exceeds max_grad_norm is refused (INVALID_ARGUMENT naming rank, step and norm) and nothing of it is
// applied: a synchronous step it was part of is rolled back, the other ranks push it again (UNAVAILABLE), and
// the server goes on. Nothing of a call is read before it is authenticated: the unary methods are served as
// streams so their request is read only after the metadata check; every wait for a push's next chunk is
// bounded by --step_timeout (a call watchdog).
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server runs each call on its own
// thread). Replies send the shard's parameters without holding its lock (zero-copy slices in aggregating
// mode, copies taken under the lock in asynchronous mode), so a slow client never holds up other calls.
#ifndef PSRING_PS_SERVICE_H_
#define PSRING_PS_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.grpc.pb.h"
#include "absl/synchronization/mutex.h"
#include "ps/auth_channels.h"
#include "ps/call_watchdog.h"
#include "ps/shard_core.h"
#include "ps/tensor_frame.h"

namespace psring::ps {

// The core's options plus what only the transport needs.
struct ServiceOptions : ShardOptions {
  std::string auth_token;  // empty: no authentication
  // Longest wait for a call's first message (and, while initial parameters stream in, for each next chunk):
  // a caller that opens a stream and sends nothing gives its thread back after this (DEADLINE_EXCEEDED).
  absl::Duration first_message_timeout = absl::Seconds(10);
  // With a token: at most this many Authenticate handshakes (the only calls served before authentication)
  // wait for their next message at once, each at most handshake_timeout per message; more are refused with
  // RESOURCE_EXHAUSTED (clients retry), so strangers never hold more than these threads, and never those of
  // running steps (a handshake message over 1 KiB is refused).
  int max_pending_handshakes = 16;
  absl::Duration handshake_timeout = absl::Seconds(2);
  // One stderr line per registration ("ps shard 0: rank 3 registered at version 12"): an operator sees
  // workers (re)join. Benchmarks that start hundreds of short-lived servers turn it off.
  bool log_registrations = true;
};

class ParameterServerService final : public proto::ParameterServer::Service {
 public:
  // Validates options and resumes from the shard's checkpoint in checkpoint_dir when there is one
  // (kDataLoss when it is corrupt, kFailedPrecondition when it belongs to another shard layout).
  static absl::StatusOr<std::unique_ptr<ParameterServerService>> Create(const ServiceOptions& options);
  ~ParameterServerService() override;

  grpc::Status Register(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) override;
  // PushPull runs on TensorFrame messages (ps/tensor_frame.h: the same bytes as PushRequest/PullReply,
  // without copying tensors through protobuf); installed in the constructor.
  grpc::Status PushPullFrames(grpc::ServerContext* context,
                              grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  // Pull, AverageMetrics, Stats and Shutdown are served as streams (installed in the constructor), so their
  // request is read only once the call is authenticated; Authenticate opens a channel (ps/call_auth.h).
  grpc::Status StreamedPull(grpc::ServerContext* context,
                            grpc::ServerSplitStreamer<proto::PullRequest, proto::PullReply>* stream);
  grpc::Status StreamedAverageMetrics(grpc::ServerContext* context,
                                      grpc::ServerUnaryStreamer<proto::MetricsRequest, proto::MetricsReply>* stream);
  grpc::Status StreamedStats(grpc::ServerContext* context,
                             grpc::ServerUnaryStreamer<proto::StatsRequest, proto::StatsReply>* stream);
  grpc::Status StreamedShutdown(grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<proto::ShutdownRequest, proto::ShutdownReply>* stream);
  grpc::Status Authenticate(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<proto::AuthReply, proto::AuthRequest>* stream) override;

  // Blocks until a Shutdown RPC (or RequestShutdown()) arrives or `timeout` passes; true when requested.
  bool WaitForShutdownRequest(absl::Duration timeout) { return core_->WaitForShutdownRequest(timeout); }
  void RequestShutdown() { core_->RequestShutdown(); }
  // Fails every waiting and future call with UNAVAILABLE. Non-blocking; idempotent.
  void BeginShutdown() { core_->BeginShutdown(); }

  // Writes the shard checkpoint now. OK without effect when there is no checkpoint_dir or no parameters.
  // Blocks on disk I/O.
  absl::Status WriteCheckpoint() { return core_->WriteCheckpoint(); }

  proto::StatsReply GetStats();
  // A copy of the shard's parameters (empty before the first registration). For tests and tools.
  std::vector<float> CopyParameters() { return core_->CopyParameters(); }
  uint64_t version() { return core_->version(); }

 private:
  ParameterServerService(const ServiceOptions& options, std::unique_ptr<ShardCore> core);

  // The first statement of every handler, before anything of the call is read: its metadata arrived with
  // the call, and gRPC's sync server reads a streamed call's messages only when the handler asks. (Not an
  // AuthMetadataProcessor: gRPC 1.51 aborts when one is set on insecure credentials, the loopback case;
  // nor an interceptor: a C++ server interceptor cannot end a call.) Threads are bounded by the server's
  // ResourceQuota and per-connection stream limit (ps/server.cc), so a refused caller costs a thread for
  // one metadata lookup and one HMAC.
  absl::StatusOr<CallGrant> CheckAuth(grpc::ServerContext* context, absl::string_view method) {
    return channels_.Verify(*context, method);
  }
  // Reads the one request of a streamed unary call (or a handshake's next message), within `limit`.
  template <typename Stream, typename Request>
  absl::Status ReadRequest(grpc::ServerContext* context, Stream* stream, Request* request, const char* method,
                           absl::Duration limit);
  // The Authenticate handshake (ps/call_auth.h); returns the status the call ends with.
  absl::Status RunHandshake(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<proto::AuthReply, proto::AuthRequest>* stream);
  bool TakeHandshakeSlot();
  void ReleaseHandshakeSlot();
  absl::Status FirstMessageMissing(const char* method) const;
  absl::Status ChunkMissing() const;
  absl::Status CheckAddress(const proto::ShardAddress& address) const;
  using RegisterStream = grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>;
  // Reads the offered initial parameters of `range`; true when this offer was the one kept (it then fixed
  // the shard's parameters, or failed).
  absl::StatusOr<bool> ReceiveOffer(grpc::ServerContext* context, const Registration& registration,
                                    ShardRange range, RegisterStream* stream, CallWatchdog::Guard* guard);
  bool TakeOfferSlot();
  void ReleaseOfferSlot();
  // An offer that was not kept: waits (at most step_timeout) for the one being kept, OK once the shard
  // has parameters, UNAVAILABLE (register again) when that offer failed.
  absl::Status AwaitOtherOffer(grpc::ServerContext* context);
  absl::StatusOr<RegisteredRank> DoRegister(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream);
  // DoRegister once the header is read and checked: the offer, then the rank's claim and its session.
  absl::StatusOr<RegisteredRank> RegisterClaimed(grpc::ServerContext* context, const CallGrant& call,
                                                 const proto::RegisterHeader& h, RegisterStream* stream,
                                                 CallWatchdog::Guard* guard);
  // PushPull with staleness > 0: the whole push, then the parameters after it.
  grpc::Status AsyncPushPull(grpc::ServerContext* context, const PushInfo& info,
                             grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  // PushPull of the pipelined step: this thread reads the push while a second one streams the applied
  // ranges back (a gRPC sync stream allows one reader and one writer at a time).
  grpc::Status SyncPushPull(grpc::ServerContext* context, const PushInfo& info,
                            grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  // PushPull with backup workers: the whole push, then (once its step closed, or at once when it was
  // dropped) the parameters; nothing is pipelined.
  grpc::Status BackupPushPull(grpc::ServerContext* context, const PushInfo& info,
                              grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  absl::Status ReceiveSyncPush(grpc::ServerContext* context, SyncPush* push,
                               grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  absl::Status StreamStepReplies(const SyncPush& push, grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream);
  // Writes parameters [begin, end) as chunk frames: zero-copy slices over the shard's buffers in aggregating
  // mode, copies taken under the core's lock in asynchronous mode. False when the stream broke.
  bool WriteParameterFrames(grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream, uint64_t begin,
                            uint64_t end);

  const ServiceOptions options_;
  const std::unique_ptr<ShardCore> core_;
  AuthChannels channels_;
  CallWatchdog watchdog_;
  absl::Mutex handshake_mu_;
  int pending_handshakes_ ABSL_GUARDED_BY(handshake_mu_) = 0;
  absl::Mutex offer_mu_;
  bool offer_busy_ ABSL_GUARDED_BY(offer_mu_) = false;  // an offer of initial parameters is being kept
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  SliceTracker reply_slices_;  // zero-copy reply slices gRPC still holds (the destructor waits for them)
};

}  // namespace psring::ps

#endif  // PSRING_PS_SERVICE_H_
