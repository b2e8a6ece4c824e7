#include "ps/service.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/call_auth.h"
#include "ps/wire.h"

namespace psring::ps {
namespace {

using FrameStream = grpc::ServerReaderWriter<TensorFrame, TensorFrame>;

grpc::Status ClientGone() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away"); }

}  // namespace

absl::Status ParameterServerService::ChunkMissing() const {
  return absl::DeadlineExceededError(absl::StrCat("gradient: no chunk within --step_timeout=",
                                                  absl::FormatDuration(options_.step_timeout),
                                                  "; the server cancelled the push"));
}

absl::Status ParameterServerService::FirstMessageMissing(const char* method) const {
  return absl::DeadlineExceededError(absl::StrCat(method, ": no message within --first_message_timeout=",
                                                  absl::FormatDuration(options_.first_message_timeout),
                                                  "; the server cancelled the call"));
}

absl::StatusOr<std::unique_ptr<ParameterServerService>> ParameterServerService::Create(
    const ServiceOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShardCore> core, ShardCore::Create(options));
  return std::unique_ptr<ParameterServerService>(new ParameterServerService(options, std::move(core)));
}

ParameterServerService::~ParameterServerService() {
  // gRPC may still hold reply slices over the core's buffers when the last call ended; they go when its
  // write completes. Never free the buffers under them: wait, and keep the core alive if that fails.
  if (!reply_slices_.WaitReleased(absl::Seconds(30))) {
    std::fprintf(stderr, "psring ps: gRPC still holds parameter slices 30 s after shutdown; keeping them\n");
    static_cast<void>(const_cast<std::unique_ptr<ShardCore>&>(core_).release());
  }
}

ParameterServerService::ParameterServerService(const ServiceOptions& options, std::unique_ptr<ShardCore> core)
    : options_(options), core_(std::move(core)),
      channels_(PsKeyFromToken(options.auth_token), options.workers, options.step_timeout) {
  MarkMethodStreamed(PushPullMethodIndex(),
                     new grpc::internal::BidiStreamingHandler<ParameterServerService, TensorFrame, TensorFrame>(
                         [](ParameterServerService* service, grpc::ServerContext* context, FrameStream* stream) {
                           return service->PushPullFrames(context, stream);
                         },
                         this));
  // The unary methods as streams: their request is read only after CheckAuth (see there).
  MarkMethodStreamed(MethodIndex("Pull"),
                     new grpc::internal::SplitServerStreamingHandler<proto::PullRequest, proto::PullReply>(
                         [this](grpc::ServerContext* context,
                                grpc::ServerSplitStreamer<proto::PullRequest, proto::PullReply>* stream) {
                           return StreamedPull(context, stream);
                         }));
  MarkMethodStreamed(MethodIndex("AverageMetrics"),
                     new grpc::internal::StreamedUnaryHandler<proto::MetricsRequest, proto::MetricsReply>(
                         [this](grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<proto::MetricsRequest, proto::MetricsReply>* stream) {
                           return StreamedAverageMetrics(context, stream);
                         }));
  MarkMethodStreamed(MethodIndex("Stats"),
                     new grpc::internal::StreamedUnaryHandler<proto::StatsRequest, proto::StatsReply>(
                         [this](grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<proto::StatsRequest, proto::StatsReply>* stream) {
                           return StreamedStats(context, stream);
                         }));
  MarkMethodStreamed(MethodIndex("Shutdown"),
                     new grpc::internal::StreamedUnaryHandler<proto::ShutdownRequest, proto::ShutdownReply>(
                         [this](grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<proto::ShutdownRequest, proto::ShutdownReply>* stream) {
                           return StreamedShutdown(context, stream);
                         }));
}

absl::Status ParameterServerService::CheckAddress(const proto::ShardAddress& address) const {
  if (address.shard() != options_.shard || address.num_shards() != options_.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("request for shard ", address.shard(), " of ",
                                                   address.num_shards(), " reached shard ", options_.shard, " of ",
                                                   options_.num_shards,
                                                   "; list --servers in shard order and match --num_shards"));
  }
  return absl::OkStatus();
}

// ---- Register ---------------------------------------------------------------------------------------------

absl::StatusOr<RegisteredRank> ParameterServerService::DoRegister(
    grpc::ServerContext* context, grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) {
  ASSIGN_OR_RETURN(const CallGrant call, CheckAuth(context, "Register"));
  CallWatchdog::Guard guard(&watchdog_, context, options_.first_message_timeout);
  proto::RegisterRequest first;
  if (!stream->Read(&first) || !first.has_header()) {
    if (guard.fired()) return FirstMessageMissing("Register");
    return absl::InvalidArgumentError("Register must start with a RegisterHeader");
  }
  const proto::RegisterHeader& h = first.header();
  guard.Extend();  // now for the first chunk
  RETURN_IF_ERROR(call.CheckFields(RegisterFields(h)));
  RETURN_IF_ERROR(CheckAddress(h.address()));
  if (h.rank() < 0 || h.rank() >= options_.workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", h.rank(), " does not fit this server's --workers=",
                                                   options_.workers));
  }
  // Before any offer is read: a caller that may not take this rank streams nothing. The rank is claimed
  // only once the registration is about to complete (RegisterClaimed), so a caller that stalls holds nothing.
  RETURN_IF_ERROR(channels_.MayClaimRank(call, h.rank()));
  return RegisterClaimed(context, call, h, stream, &guard);
}

absl::StatusOr<RegisteredRank> ParameterServerService::RegisterClaimed(grpc::ServerContext* context,
                                                                       const CallGrant& call,
                                                                       const proto::RegisterHeader& h,
                                                                       RegisterStream* stream,
                                                                       CallWatchdog::Guard* guard) {
  Registration registration;
  registration.rank = h.rank();
  registration.world_size = h.world_size();
  registration.total_params = h.total_params();
  registration.hyperparameters = {h.hyperparameters().lr(), h.hyperparameters().momentum(),
                                  h.hyperparameters().weight_decay()};
  registration.layout_buckets.assign(h.layout().bucket_elements().begin(), h.layout().bucket_elements().end());
  registration.layout_settings = h.layout().settings();
  ASSIGN_OR_RETURN(const ShardRange range, core_->BeginRegistration(registration));
  bool offer_was_kept = false;
  if (h.offers_parameters()) {
    ASSIGN_OR_RETURN(offer_was_kept, ReceiveOffer(context, registration, range, stream, guard));
  } else {
    proto::RegisterRequest extra;
    if (stream->Read(&extra)) {
      return absl::InvalidArgumentError("chunks after a RegisterHeader without offers_parameters");
    }
  }
  guard->Disarm();
  if (h.offers_parameters() && !offer_was_kept) RETURN_IF_ERROR(AwaitOtherOffer(context));
  ASSIGN_OR_RETURN(std::string previous_owner, channels_.ClaimRank(call, h.rank()));
  absl::StatusOr<RegisteredRank> completed = core_->CompleteRegistration(registration);
  if (!completed.ok()) {
    channels_.ReleaseClaim(call, h.rank(), std::move(previous_owner));
    return completed.status();
  }
  RegisteredRank& registered = *completed;
  // One line per registration: an operator sees workers (re)joining, e.g. after a restart.
  if (options_.log_registrations) {
    std::fprintf(stderr, "ps shard %d: rank %d registered at version %llu\n", options_.shard, h.rank(),
                 static_cast<unsigned long long>(registered.version));
  }
  return std::move(registered);
}

absl::StatusOr<bool> ParameterServerService::ReceiveOffer(grpc::ServerContext* context,
                                                          const Registration& registration, ShardRange range,
                                                          RegisterStream* stream, CallWatchdog::Guard* guard) {
  // Memory grows with what arrives, and only one offer at a time keeps what it receives: a caller that
  // announces the largest model and sends nothing costs nothing, and any number of concurrent offers cost
  // one shard, not one each. The others (and every offer once the shard has parameters) are checked chunk
  // by chunk and dropped.
  std::vector<float> initial;
  bool keeping = false;
  bool decided = false;
  uint64_t filled = 0;
  absl::Status status;
  proto::RegisterRequest message;
  while (status.ok() && stream->Read(&message)) {
    guard->Extend();
    if (!message.has_chunk()) {
      status = absl::InvalidArgumentError("initial parameters: expected only chunks after the header");
      break;
    }
    if (!decided) {
      decided = true;
      keeping = !core_->has_parameters() && TakeOfferSlot();
      // Address space only (pages are touched as chunks are copied in), so no reallocation copies.
      if (keeping) initial.reserve(range.size());
    }
    const uint64_t before = filled;
    if (keeping) {
      initial.resize(std::min<uint64_t>(range.size(), filled + message.chunk().data().size() / sizeof(float)));
    }
    status = AcceptChunk(message.chunk(), keeping ? initial.data() : nullptr, range.size(), &filled,
                         "initial parameters");
    bytes_received_ += (filled - before) * sizeof(float);
  }
  if (status.ok() && guard->fired()) {
    status = absl::DeadlineExceededError(absl::StrCat("initial parameters: no chunk for --first_message_timeout=",
                                                      absl::FormatDuration(options_.first_message_timeout)));
  }
  if (status.ok() && filled != range.size()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("initial parameters: stream ended after ", filled, " of ", range.size(), " elements"));
  }
  if (keeping && status.ok()) status = core_->OfferInitialParameters(registration, std::move(initial));
  if (keeping) ReleaseOfferSlot();
  RETURN_IF_ERROR(status);
  return keeping;
}

bool ParameterServerService::TakeOfferSlot() {
  absl::MutexLock lock(&offer_mu_);
  if (offer_busy_) return false;
  offer_busy_ = true;
  return true;
}

void ParameterServerService::ReleaseOfferSlot() {
  absl::MutexLock lock(&offer_mu_);
  offer_busy_ = false;
}

absl::Status ParameterServerService::AwaitOtherOffer(grpc::ServerContext* context) {
  if (core_->has_parameters()) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  absl::MutexLock lock(&offer_mu_);
  const auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(offer_mu_) { return !offer_busy_; };
  while (!offer_mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(100))) {
    if (context->IsCancelled() || absl::Now() > deadline) break;
  }
  if (core_->has_parameters()) return absl::OkStatus();
  // Its offer failed (or is still streaming): this caller dropped its own, so it must offer again.
  return absl::UnavailableError(
      "another worker was offering the initial parameters and did not finish; register again to offer them");
}

grpc::Status ParameterServerService::Register(
    grpc::ServerContext* context, grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) {
  absl::StatusOr<RegisteredRank> registered = DoRegister(context, stream);
  if (!registered.ok()) return ToGrpc(registered.status());

  proto::RegisterReply reply;
  proto::RegisterReplyHeader* header = reply.mutable_header();
  SetSession(registered->session, header);
  header->set_total_params(registered->total_params);
  header->set_shard_begin(registered->range.begin);
  header->set_shard_end(registered->range.end);
  header->set_version(registered->version);
  header->set_next_step(registered->next_step);
  header->set_mode(registered->aggregating ? "sync" : "async");
  // Backup workers: the reply follows the whole push (no push window), as in async mode.
  if (registered->aggregating && !core_->backup()) header->set_reply_chunk_elements(core_->chunk_elements());
  header->set_backup_workers(core_->options().backup_workers);
  if (!stream->Write(reply)) return ClientGone();
  uint64_t sent = 0;
  const bool ok = WriteChunks<proto::RegisterReply>(stream, registered->params.data(), registered->params.size(),
                                                    core_->chunk_elements(), &sent);
  bytes_sent_ += sent;
  return ok ? grpc::Status::OK : ClientGone();
}

// ---- PushPull ---------------------------------------------------------------------------------------------

grpc::Status ParameterServerService::PushPullFrames(grpc::ServerContext* context, FrameStream* stream) {
  // Nothing of the call is read before it is authenticated (see CheckAuth in service.h).
  absl::StatusOr<CallGrant> call = CheckAuth(context, "PushPull");
  if (!call.ok()) return ToGrpc(call.status());
  TensorFrame first;
  proto::PushHeader header;
  {
    CallWatchdog::Guard guard(&watchdog_, context, options_.first_message_timeout);
    if (!stream->Read(&first) || !first.error().ok() || !first.is_header() ||
        !header.ParseFromString(first.header_bytes())) {
      if (guard.fired()) return ToGrpc(FirstMessageMissing("PushPull"));
      return ToGrpc(absl::InvalidArgumentError("a push must start with a PushHeader"));
    }
  }
  absl::Status status = call->CheckFields(PushFields(header));
  if (status.ok()) status = CheckAddress(header.address());
  if (status.ok() && header.rank() >= 0 && header.rank() < options_.workers) {
    status = channels_.CheckOwner(*call, header.rank());
  }
  if (!status.ok()) return ToGrpc(status);
  PushInfo info;
  info.rank = header.rank();
  info.session = GetSession(header);
  info.step = header.step();
  info.num_elements = header.num_elements();
  info.trainer_step = header.trainer_step();
  if (!core_->aggregating()) return AsyncPushPull(context, info, stream);
  return core_->backup() ? BackupPushPull(context, info, stream) : SyncPushPull(context, info, stream);
}

bool ParameterServerService::WriteParameterFrames(FrameStream* stream, uint64_t begin, uint64_t end) {
  const uint64_t chunk = core_->chunk_elements();
  for (uint64_t offset = begin; offset < end; offset += chunk) {
    const uint64_t len = std::min(chunk, end - offset);
    TensorFrame frame;
    core_->ReadParameters(offset, len, [&](const float* data) {
      // Aggregating mode: straight from the shard's buffers, which nothing writes again before this rank has
      // received the reply and pushed the next step (ps/sync_step.h). Asynchronous pushes update the
      // parameters in place at any time: a copy taken under the lock.
      frame = core_->aggregating() ? TensorFrame::Chunk(offset, data, len, &reply_slices_)
                                   : TensorFrame::CopiedChunk(offset, data, len);
    });
    if (!stream->Write(frame)) return false;
    bytes_sent_ += len * sizeof(float);
  }
  return true;
}

grpc::Status ParameterServerService::AsyncPushPull(grpc::ServerContext* context, const PushInfo& info,
                                                   FrameStream* stream) {
  absl::StatusOr<AsyncPush> push = core_->StartAsyncPush(info);
  if (!push.ok()) return ToGrpc(push.status());
  const uint64_t count = push->gradient.size();
  uint64_t received = 0;
  // Every next chunk within --step_timeout: a push that stalls after its header gives its thread back.
  CallWatchdog::Guard guard(&watchdog_, context, options_.step_timeout);
  absl::Status status = ReadFrameChunks(stream, push->gradient.data(), count, &received, "gradient",
                                        [&guard](uint64_t) { guard.Extend(); });
  if (guard.fired()) status = ChunkMissing();
  guard.Disarm();
  bytes_received_ += received;
  if (status.ok() && context->IsCancelled()) status = absl::CancelledError("push cancelled by the client");
  absl::StatusOr<uint64_t> version = core_->FinishAsyncPush(std::move(*push), status);
  if (!version.ok()) return ToGrpc(version.status());
  // Chunk by chunk, so other pushes may be applied in between: like the shards of one model, an
  // asynchronous reply is not one atomic version (bounded staleness tolerates that).
  proto::PullReplyHeader reply;
  reply.set_version(*version);
  reply.set_num_elements(count);
  if (!stream->Write(TensorFrame::Header(reply)) || !WriteParameterFrames(stream, 0, count)) return ClientGone();
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::BackupPushPull(grpc::ServerContext* context, const PushInfo& info,
                                                    FrameStream* stream) {
  absl::StatusOr<SyncPush> push = core_->StartSyncPush(info);
  if (!push.ok()) return ToGrpc(push.status());
  // The whole push first, dropped or not (the worker writes it all before it reads; its reply must not reach
  // its parameters while its backward pass may still read them), then the step's outcome.
  const absl::Status received = ReceiveSyncPush(context, &*push, stream);
  absl::StatusOr<StepReply> reply =
      received.ok() ? core_->AwaitStepReply(*push) : absl::StatusOr<StepReply>(received);
  core_->FinishSyncPush(std::move(*push), reply.status());
  if (!reply.ok()) return ToGrpc(reply.status());
  const std::shared_ptr<const ParameterSnapshot>& parameters = reply->parameters;
  proto::PullReplyHeader header;
  header.set_version(parameters->version);
  header.set_num_elements(parameters->params.size());
  header.set_dropped(reply->dropped);
  if (!stream->Write(TensorFrame::Header(header))) return ClientGone();
  const uint64_t count = parameters->params.size();
  for (uint64_t offset = 0; offset < count; offset += core_->chunk_elements()) {
    const uint64_t len = std::min(core_->chunk_elements(), count - offset);
    // A copy per reply (gRPC may hold a slice after Write returns, longer than `parameters` lives).
    const float* data = parameters->params.data() + offset;
    if (!stream->Write(TensorFrame::CopiedChunk(offset, data, len))) return ClientGone();
    bytes_sent_ += len * sizeof(float);
  }
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::SyncPushPull(grpc::ServerContext* context, const PushInfo& info,
                                                  FrameStream* stream) {
  absl::StatusOr<SyncPush> push = core_->StartSyncPush(info);
  if (!push.ok()) return ToGrpc(push.status());
  absl::Status write_status;
  std::thread writer([&] { write_status = StreamStepReplies(*push, stream); });
  const absl::Status read_status = ReceiveSyncPush(context, &*push, stream);
  // Ends the writer's wait at once (this push leaves the step); the buffer stays alive until the join.
  if (!read_status.ok()) core_->AbandonSyncPush(*push, read_status);
  writer.join();
  const absl::Status status = read_status.ok() ? write_status : read_status;
  core_->FinishSyncPush(std::move(*push), status);
  return ToGrpc(status);
}

absl::Status ParameterServerService::ReceiveSyncPush(grpc::ServerContext* context, SyncPush* push,
                                                     FrameStream* stream) {
  const uint64_t count = push->gradient.size();
  TensorFrame frame;
  frame.ExpectInto(push->gradient.data(), count);
  const auto cancelled = [context] { return context->IsCancelled(); };
  uint64_t reported = 0;
  while (true) {
    // Every next chunk within --step_timeout, counted only while waiting for it (not while Delivered holds a
    // push that is ahead of the others): a push that stalls after its header gives its thread back.
    bool more = false;
    {
      CallWatchdog::Guard guard(&watchdog_, context, options_.step_timeout);
      more = stream->Read(&frame);
      if (guard.fired()) return ChunkMissing();
    }
    if (frame.filled() > reported) {
      bytes_received_ += (frame.filled() - reported) * sizeof(float);
      RETURN_IF_ERROR(core_->Delivered(push, frame.filled(), cancelled));
      reported = frame.filled();
    }
    if (!more) break;
    if (!frame.error().ok()) {
      return absl::Status(frame.error().code(), absl::StrCat("gradient: ", frame.error().message()));
    }
    if (frame.is_header()) return absl::InvalidArgumentError("gradient: expected only chunks after the header");
  }
  if (reported != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient: stream ended after ", reported, " of ", count, " elements"));
  }
  if (context->IsCancelled()) return absl::CancelledError("push cancelled by the client");
  return absl::OkStatus();
}

absl::Status ParameterServerService::StreamStepReplies(const SyncPush& push, FrameStream* stream) {
  const uint64_t count = push.gradient.size();
  proto::PullReplyHeader header;
  header.set_version(static_cast<uint64_t>(push.step) + 1);  // the version this step produces
  header.set_num_elements(count);
  if (!stream->Write(TensorFrame::Header(header))) return absl::UnavailableError("client went away");
  uint64_t sent = 0;
  while (sent < count) {
    absl::StatusOr<uint64_t> available = core_->AwaitApplied(push, std::min(count, sent + core_->chunk_elements()));
    if (!available.ok()) {
      // The step was dropped (or the shard stops) while the worker may still be pushing, held by its push
      // window until more of this reply arrives, and our reader waits for the rest of its push: tell it the
      // reply is over (ps.proto), so it pushes on and the call ends with this status.
      proto::PullReplyHeader ended;
      ended.set_ended_code(static_cast<int32_t>(available.status().code()));
      ended.set_ended_message(std::string(available.status().message()));
      stream->Write(TensorFrame::Header(ended));
      return available.status();
    }
    if (!WriteParameterFrames(stream, sent, *available)) return absl::UnavailableError("client went away");
    sent = *available;
  }
  return absl::OkStatus();
}

proto::StatsReply ParameterServerService::GetStats() {
  const ShardStats stats = core_->Stats();
  proto::StatsReply reply;
  reply.set_shard(options_.shard);
  reply.set_num_shards(options_.num_shards);
  reply.set_mode(options_.mode == Mode::kSync ? "sync" : "async");
  reply.set_workers(options_.workers);
  reply.set_registered_workers(stats.registered_workers);
  reply.set_version(stats.version);
  reply.set_total_params(stats.total_params);
  reply.set_shard_begin(stats.range.begin);
  reply.set_shard_end(stats.range.end);
  reply.set_bytes_sent(bytes_sent_.load());
  reply.set_bytes_received(bytes_received_.load());
  reply.set_checkpoints_written(stats.checkpoints_written);
  reply.set_layout(stats.layout);
  reply.set_backup_workers(options_.backup_workers);
  reply.set_dropped_pushes(stats.dropped_pushes);
  for (uint64_t dropped : stats.dropped_by_rank) reply.add_dropped_by_rank(dropped);
  return reply;
}

}  // namespace psring::ps
