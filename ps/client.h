// The parameter-server client: a trainer::GradientExchange that pushes each rank's gradient to every shard
// and pulls back the parameters the servers computed (ExchangeOutcome::kParametersUpdated).
//
//   PsClientOptions options;
//   options.servers = {"10.0.0.1:50051", "10.0.0.2:50051"};   // shard order
//   options.rank = 1;  options.world_size = 4;  options.hyperparameters = {0.05f, 0.9f, 5e-4f};
//   ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> ps, PsExchange::Create(options));
//   RETURN_IF_ERROR(ps->SyncInitialParameters(params));   // registers; params := the servers' values
//   ASSIGN_OR_RETURN(auto outcome, ps->Exchange(step, grads, params));   // params := updated values
//
// Shards are served in parallel: one thread per shard beyond the first, for the duration of each call.
// A shard that becomes unreachable, or that restarted and forgot this rank, is re-registered with retries
// and exponential backoff (up to reconnect_timeout), and the step's gradient is pushed to it again; the
// parameters it returns (resumed from its checkpoint) replace this rank's copy of that range. If the shard
// is already past the step (it applied the push, and saved it, before the call broke), the gradient is not
// pushed a second time.
//
// A synchronous step is pipelined: each shard stream pushes the gradient on the calling (or shard) thread
// while a reader thread takes the updated parameters the server streams back range by range. The pusher
// keeps within push_window_bytes of what the reader has received (a flow-control window whose
// acknowledgements are the averaged ranges), so no rank runs far ahead of the slowest on a shared link. If a shard
// drops the step midway (another rank's push broke), it rolls its parameters back and answers UNAVAILABLE;
// this client then re-registers (which rewrites this rank's copy of the range with the shard's values, so
// a partly received reply leaves nothing behind) and pushes the step again, within reconnect_timeout.
// When Exchange fails for good, `params` may hold a mix of old and new values for the failing shard's range
// (call PullParameters() to resynchronise).
//
// Backup workers (servers with --backup_workers=B): a push whose step the shard already closed without it is
// dropped there and answered with the shard's current parameters (not an error): Exchange returns them
// like any step, the rank pushes its next step from them, and dropped_pushes() counts it. Such shards
// reply after the whole push (no push window). The update rule reported is kMeanOfFirstPushes.
//
// Bucketed steps (BeginStep/GradientReady/FinishStep, --bucket_mb): the servers hold the model in the element
// layout of the job's bucket plan (ps/shard_layout.h): every bucket is cut into K balanced slices, one per
// shard, and each shard holds its slices in launch order. So every bucket is pushed to all K shards at once
// (no server link idles while backward runs), and what a shard receives is a prefix that grows bucket by
// bucket, exactly the prefix order a synchronous shard applies in (ps/sync_step.h). Since the optimizer is
// element-wise, the result is bit for bit the flat exchange's. The layout is fixed at registration from the
// plan given to SetBucketPlan (flat without one) and every shard refuses a worker whose layout differs from
// the one it holds (its first registration's, or its checkpoint's): every worker of a job must use the same
// --bucket_mb. BeginStep starts every shard's PushPull stream on a step thread; each stream pushes its slice
// of each bucket as soon as GradientReady completed the bucket (copying it into a wire buffer: the shards'
// element sequences one after another), and reads the new parameters back as the servers apply them;
// FinishStep waits for all shards and copies the parameters back in trainer order. With the flat layout the
// wire order is the trainer's own (no copies); otherwise Exchange and PullParameters copy through the wire
// buffers too.
// Timeline spans (GradientExchange::timeline()), on CommTrack(shard): "push" per bucket and shard (args:
// step, shard, bucket (-1 when flat), bytes) and "pull" per shard, from the reply's first range to its end.
//
// With a token (auth_token), the client opens one authenticated channel per server (ps/call_auth.h: the
// token is proven, never sent) before its first call, and again after the server forgot it (it restarted);
// its channel owns this rank's session there, so only this client may use or re-register it while it is live
// (ps/auth_channels.h).
//
// Blocking: every call blocks until all shards answered, failed, or `timeout` passed.
// Ownership: buffers stay the caller's; they are read/written only during a call.
// Thread-safety: not thread-safe (one training thread), like every GradientExchange.
#ifndef PSRING_PS_CLIENT_H_
#define PSRING_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.grpc.pb.h"
#include "ps/call_auth.h"
#include "ps/shard_layout.h"
#include "ps/wire.h"
#include "trainer/bucket_tracker.h"
#include "trainer/exchange.h"
#include "trainer/optimizer.h"

namespace psring::ps {

// gRPC's reconnect backoff for every server channel, in milliseconds (initial, minimum and maximum).
inline constexpr int kReconnectBackoffMs = 100;
// A run of skipped steps is reported on its first step and then once per this many.
inline constexpr int64_t kSkipReportEvery = 100;

struct PsClientOptions {
  std::vector<std::string> servers;  // "host:port" per shard, in shard order
  int rank = 0;
  int world_size = 1;
  trainer::SgdOptions hyperparameters;         // sent at registration; servers reject values that differ
  absl::Duration timeout = absl::Seconds(60);  // deadline of each RPC (a step includes waiting for peers)
  absl::Duration reconnect_timeout = absl::Seconds(60);  // how long to keep re-registering a lost shard
  // Between attempts to re-register a lost shard. Capped low so a restarted server is back in use within
  // about max_backoff + kReconnectBackoffMs of accepting connections (README, Recovery).
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Milliseconds(100);
  size_t chunk_bytes = 1 << 20;  // tensor chunk size on the wire (tests shrink it to hit many chunks)
  // Synchronous shards: push at most this many bytes beyond the updated parameters already received back
  // (the server averages a range only once every worker pushed it, so this bounds how far a worker runs
  // ahead of the slowest, end to end, whatever the transport buffers). 0: no window. Never less than one
  // chunk of ours plus one reply range of the server's (smaller would deadlock), so it is raised to that.
  // The default covers the loop (push a chunk, the server applies it, its reply comes back) of a loopback or
  // datacenter link at 2-3 GB/s: with 1 MiB a one-shard 64 MiB step on loopback took 70-91 ms against 65-74
  // with 8 MiB and 59-68 with none (bench/PERFORMANCE.md 10.5). Slow shared links want less (the flag's help).
  size_t push_window_bytes = 8 << 20;
  // HTTP/2 receive window of each server connection, bytes (gRPC's lookahead, with its BDP probing off): at
  // most this much of our replies is queued for us in the server's transport and socket buffers, so the push
  // window's loop (the reply is its acknowledgement) stays tight on a slow shared link. Must cover the link's
  // bandwidth-delay product of this connection's share of the link, or replies are held to window/RTT (on
  // the emulated 100 Mbit/s links 256 KiB helps one server with 8 workers and slows one with 1-2 workers:
  // bench/PERFORMANCE.md 7.1). 0: gRPC's adaptive window (grows to megabytes per stream on a fast link).
  size_t receive_window_bytes = 0;
  // The job's token: proven per server with Authenticate and per call with a MAC, never sent (ps/call_auth.h).
  std::string auth_token;
  std::string tls_ca_file;       // PEM root certificate: TLS when set
  std::string tls_target_name;   // overrides the name checked against the server certificate
  std::string name = "ps";       // reported by name(): "ps-sync" / "ps-async" from the server's mode
};

// Parses "h1:p1,h2:p2". kInvalidArgument when empty or malformed.
absl::StatusOr<std::vector<std::string>> ParseServerList(const std::string& text);

class PsExchange final : public trainer::GradientExchange {
 public:
  // Creates channels (no connection yet: the first call connects). kInvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<PsExchange>> Create(const PsClientOptions& options);
  ~PsExchange() override;

  std::string name() const override { return name_; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  // The servers own the optimizer; the update rule follows the mode shard 0 reported at registration
  // (async with staleness 0 reports sync), so it is kMeanPerStep until SyncInitialParameters.
  trainer::OptimizerInfo optimizer() const override;

  // Fixes the element layout from `plan` (see above; `settings`, e.g. "--bucket_mb=25", is named in the
  // servers' errors). Before SyncInitialParameters (kFailedPrecondition after); without it the layout is flat.
  // kInvalidArgument for a plan whose buckets do not tile the vector from its end, as BucketPlan's do.
  absl::Status SetBucketPlan(const trainer::BucketPlan& plan, absl::string_view settings) override;
  // Registers with every shard (retrying until reconnect_timeout while servers come up), offering `params`
  // as initial values, and overwrites `params` with the servers' values. kFailedPrecondition when a shard
  // holds another element layout (another --bucket_mb), naming both.
  absl::Status SyncInitialParameters(trainer::FloatBuffer params) override;
  // Pushes `grads`, waits for the step, and leaves the new parameters in `params`. `step` must be the same
  // on every rank; shards number their own steps (from registration) and use `step` only to keep the ranks
  // in lockstep after a server restart (a rank whose step the others are already past pulls instead).
  absl::StatusOr<trainer::ExchangeOutcome> Exchange(int64_t step, trainer::FloatBuffer grads,
                                                    trainer::FloatBuffer params) override;
  // Element-wise mean across ranks, through shard 0.
  absl::Status AverageMetrics(absl::Span<double> values) override;
  absl::Status Barrier() override;

  // Bucketed steps: see above. BeginStep takes only the plan given to SetBucketPlan (kFailedPrecondition for
  // another: the servers' element layout follows it).
  bool SupportsBuckets() const override { return true; }
  absl::Status BeginStep(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                         const trainer::BucketPlan& plan) override;
  void GradientReady(size_t offset, size_t count) override;
  absl::StatusOr<trainer::ExchangeOutcome> FinishStep() override;

  // Pulls every shard's current parameters into `params` without pushing.
  absl::Status PullParameters(trainer::FloatBuffer params) override;
  // Asks every server to checkpoint and exit. Call once, after a Barrier, from one rank.
  absl::Status ShutdownServers();
  absl::StatusOr<proto::StatsReply> Stats(int shard);

  // Backup workers: how many steps every shard closed beyond this rank's pushes since the last call (the
  // fewest over the shards; the rest stays for the next call). The trainer skips that many steps, so its step
  // count stays the job's (SyncReplicasOptimizer's workers take the global step): its periodic barriers
  // (metrics windows, held-out evaluations) then fall at the same job step on every rank, and a slow rank
  // no longer holds the others back there. 0 without backup workers.
  int64_t TakeSkippedSteps() override;

  // Backup workers: this rank's pushes the shards dropped because their step had closed, summed over shards
  // (each shard decides on its own).
  uint64_t dropped_pushes() const;
  // Tensor payload bytes this client sent / received (all shards, all calls).
  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }
  int num_shards() const { return static_cast<int>(shards_.size()); }

 private:
  struct Shard {
    int index = 0;
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::ParameterServer::Stub> stub;
    std::unique_ptr<grpc::internal::RpcMethod> push_pull;  // PushPull on TensorFrame messages
    // The authenticated channel with this server (with a token), opened on first use and again after the
    // server forgot it (NOT_FOUND: it restarted). Its owner registered this rank's session there.
    std::unique_ptr<ChannelCredential> credential;
    ShardRange range;  // of the wire order (ShardLayout::WireRange)
    absl::uint128 session = 0;
    int64_t next_step = 0;
    uint64_t version = 0;
    // Sync shards: the most elements they gather before streaming a range back during the push; 0 for
    // async shards (they answer after the whole push) and servers that do not say.
    uint64_t reply_chunk_elements = 0;
    int backup_workers = 0;       // the shard's B (RegisterReplyHeader.backup_workers)
    uint64_t dropped_pushes = 0;  // this rank's pushes the shard dropped (backup workers)
    // Backup workers: steps the shard closed beyond this rank's pushes (its next push is tagged with the
    // shard's current step), not yet handed to the trainer by TakeSkippedSteps.
    int64_t steps_ahead = 0;
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
    // Steps this shard skipped (ABORTED) in the current run of skips: a restarted worker catching up may
    // skip hundreds, so only the first and every kSkipReportEvery-th are reported.
    int64_t skipped = 0;
  };

  // Where a bucketed step's gradient comes from: PushPullOnce waits for each bucket (in plan order) and
  // copies the shard's slice of it from the trainer's `grads` into the wire buffer before pushing.
  struct BucketFeed {
    trainer::BucketTracker* tracker = nullptr;
    const trainer::BucketPlan* plan = nullptr;
    trainer::FloatBuffer grads;  // trainer order
  };

  explicit PsExchange(const PsClientOptions& options);
  // Exchange() on buffers in the servers' element order (`feed`: a bucketed step, else grads is complete).
  absl::Status ExchangeWire(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                            const BucketFeed* feed);
  // `buffer` in the wire order of layout_: `buffer` itself for the flat layout, else copied into `*wire`
  // (resized).
  trainer::FloatBuffer ToWire(trainer::FloatBuffer buffer, std::vector<float>* wire) const;
  // The inverse of ToWire for `wire` (no-op when it is `buffer` itself).
  void FromWire(trainer::FloatBuffer wire, trainer::FloatBuffer buffer) const;
  // With a token: opens the shard's authenticated channel unless it is open (kUnauthenticated when the
  // server does not prove the token; kUnavailable while it cannot be reached).
  absl::Status EnsureChannel(Shard* shard);
  // Sets the call's deadline (now + options_.timeout) and, with a token, the metadata that authenticates
  // `method` with `fields` on the shard's channel (EnsureChannel first); returns the deadline.
  absl::Time PrepareContext(Shard* shard, grpc::ClientContext* context, absl::string_view method,
                            const std::string& fields = "") const;
  // FromCall, after forgetting the shard's channel when the server no longer knows it (NOT_FOUND).
  absl::Status CallResult(Shard* shard, const grpc::Status& status, absl::Time deadline, const std::string& where);
  // FromGrpc, with a hint when the call ran out of this client's own deadline (options_.timeout), which is
  // told from a server's DEADLINE_EXCEEDED (its --step_timeout) by the call's deadline having passed.
  absl::Status FromCall(const grpc::Status& status, absl::Time deadline, const std::string& where) const;
  proto::ShardAddress Address(const Shard& shard) const;
  // One Register call; on success fills the shard's session/step and params[range] from the server.
  absl::Status RegisterOnce(Shard* shard, trainer::FloatBuffer params);
  // Register with retries and backoff while the shard is unreachable or forgot us.
  absl::Status RegisterWithRetries(Shard* shard, trainer::FloatBuffer params);
  absl::Status PushPullOnce(Shard* shard, int64_t trainer_step, trainer::FloatBuffer grads,
                            trainer::FloatBuffer params, const BucketFeed* feed);
  absl::Status PullOnce(Shard* shard, trainer::FloatBuffer params);
  // Runs fn(shard) for every shard in parallel and returns the first error (all complete first).
  absl::Status ForEachShard(const std::function<absl::Status(Shard*)>& fn);
  absl::Status CheckBuffer(trainer::FloatBuffer buffer, const char* what) const;

  const PsClientOptions options_;
  const std::string ps_key_;  // PsKeyFromToken(auth_token); empty without a token
  const uint64_t chunk_elements_;
  std::vector<Shard> shards_;
  uint64_t total_params_ = 0;
  bool registered_ = false;
  std::string name_;
  trainer::ServerUpdate server_update_ = trainer::ServerUpdate::kMeanPerStep;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;

  // The element layout: the buckets and settings SetBucketPlan gave (empty: flat), and the layout they make
  // with the model's size (fixed by SyncInitialParameters).
  std::vector<trainer::FloatRange> layout_plan_;
  std::string layout_settings_;
  ShardLayout layout_ = ShardLayout::Flat(0, 1);
  // Not the flat layout: the gradient and parameters in the wire order.
  std::vector<float> wire_grads_;
  std::vector<float> wire_params_;
  // The open bucketed step (BeginStep to FinishStep); step_status_ is written by step_thread_ and read
  // after joining it.
  trainer::BucketPlan plan_ = trainer::BucketPlan::Flat(0);
  trainer::BucketTracker tracker_;
  BucketFeed feed_;
  trainer::FloatBuffer step_params_;
  trainer::FloatBuffer step_wire_params_;  // step_params_ in the wire order (step_params_ itself when flat)
  std::thread step_thread_;
  absl::Status step_status_;
};

}  // namespace psring::ps

#endif  // PSRING_PS_CLIENT_H_
