#include "ps/service.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace psring::ps {
namespace {

const char* ModeName(Mode mode) { return mode == Mode::kSync ? "sync" : "async"; }

trainer::SgdOptions FromProto(const proto::Hyperparameters& h) {
  return trainer::SgdOptions{h.lr(), h.momentum(), h.weight_decay()};
}

// Runs fn(begin, end) over [0, n) split across up to 4 threads (one for small n). Blocks until done.
void ParallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  constexpr size_t kMinPerThread = 1 << 18;
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>({4, hardware, std::max<size_t>(1, n / kMinPerThread)});
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) {
    workers.emplace_back(fn, n * t / threads, n * (t + 1) / threads);
  }
  fn(0, n / threads);
  for (std::thread& w : workers) w.join();
}

bool SameHyperparameters(const trainer::SgdOptions& a, const trainer::SgdOptions& b) {
  return a.lr == b.lr && a.momentum == b.momentum && a.weight_decay == b.weight_decay;
}

std::string Describe(const trainer::SgdOptions& h) {
  return absl::StrCat("lr=", h.lr, " momentum=", h.momentum, " weight_decay=", h.weight_decay);
}

// Constant-time comparison, so the token cannot be guessed byte by byte from response times.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServerService>> ParameterServerService::Create(
    const ServiceOptions& options) {
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard=", options.shard, " must be in [0, --num_shards=", options.num_shards, ")"));
  }
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers=", options.workers, " must be at least 1"));
  }
  if (options.staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--staleness=", options.staleness, " must be >= 0"));
  }
  if (options.step_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--step_timeout must be positive");
  }
  if (options.chunk_bytes < sizeof(float) || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk size ", options.chunk_bytes, " must be in [4, ", kMaxChunkBytes, "] bytes"));
  }
  std::unique_ptr<ParameterServerService> service(new ParameterServerService(options));
  if (options.checkpoint_dir.empty()) return service;
  // Created now (like mkdir -p), so a bad folder fails at start rather than at the first checkpoint.
  std::error_code error;
  std::filesystem::create_directories(options.checkpoint_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create --checkpoint_dir=", options.checkpoint_dir,
                                                      ": ", error.message(), "; give a writable folder"));
  }

  const std::string path = ShardCheckpointPath(options.checkpoint_dir, options.shard, options.num_shards);
  absl::StatusOr<ShardCheckpoint> checkpoint = ReadShardCheckpoint(path);
  if (absl::IsNotFound(checkpoint.status())) return service;
  if (!checkpoint.ok()) return checkpoint.status();
  const ShardRange expected = ComputeShardRange(checkpoint->total_params, options.shard, options.num_shards);
  if (checkpoint->shard != options.shard || checkpoint->num_shards != options.num_shards ||
      checkpoint->begin != expected.begin || checkpoint->end != expected.end) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " holds shard ", checkpoint->shard, " of ", checkpoint->num_shards,
        ", not shard ", options.shard, " of ", options.num_shards, "; use another --checkpoint_dir"));
  }
  ParameterServerService* s = service.get();
  absl::MutexLock lock(&s->mu_);
  absl::WriterMutexLock params_lock(&s->params_mu_);
  s->layout_known_ = true;
  s->initialized_ = true;
  s->total_params_ = checkpoint->total_params;
  s->range_ = expected;
  s->hyperparameters_ = checkpoint->hyperparameters;
  s->version_ = checkpoint->version;
  for (size_t r = 0; r < s->ranks_.size() && r < checkpoint->clocks.size(); ++r) {
    s->ranks_[r].clock = checkpoint->clocks[r];
  }
  s->params_ = std::move(checkpoint->params);
  s->momentum_ = std::move(checkpoint->momentum);
  return service;
}

ParameterServerService::ParameterServerService(const ServiceOptions& options)
    : options_(options),
      aggregate_(options.mode == Mode::kSync || options.staleness == 0),
      chunk_elements_(options.chunk_bytes / sizeof(float)),
      ranks_(options.workers),
      // Sessions from a restarted server must not collide with old ones: start at a random point.
      next_session_(absl::Uniform<uint64_t>(absl::BitGen(), 1, uint64_t{1} << 62)) {
  constexpr int kPushPullMethod = 1;  // index in ps.proto's service
  MarkMethodStreamed(
      kPushPullMethod,
      new grpc::internal::BidiStreamingHandler<ParameterServerService, TensorFrame, TensorFrame>(
          [](ParameterServerService* service, grpc::ServerContext* context,
             grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream) {
            return service->PushPullFrames(context, stream);
          },
          this));
}

absl::Status ParameterServerService::CheckAuth(grpc::ServerContext* context) const {
  if (options_.auth_token.empty()) return absl::OkStatus();
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kAuthMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("this server requires --auth_token (metadata \"", kAuthMetadataKey, "\")"));
  }
  if (!SameSecret(absl::string_view(it->second.data(), it->second.size()), options_.auth_token)) {
    return absl::UnauthenticatedError("wrong --auth_token");
  }
  return absl::OkStatus();
}

absl::Status ParameterServerService::CheckAddress(const proto::ShardAddress& address) const {
  if (address.shard() != options_.shard || address.num_shards() != options_.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("request for shard ", address.shard(), " of ",
                                                   address.num_shards(), " reached shard ", options_.shard,
                                                   " of ", options_.num_shards,
                                                   "; list --servers in shard order and match --num_shards"));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerService::CheckServingLocked() const {
  if (shutting_down_) return absl::UnavailableError("parameter server is shutting down");
  return absl::OkStatus();
}

absl::Status ParameterServerService::CheckSessionLocked(int rank, uint64_t session) const {
  if (rank < 0 || rank >= options_.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker rank ", rank, ": this server expects ranks 0..", options_.workers - 1));
  }
  const uint64_t current = ranks_[rank].session;
  if (current == session && session != 0) return absl::OkStatus();
  if (current == 0) {
    return absl::NotFoundError(absl::StrCat("rank ", rank, " is not registered with shard ", options_.shard,
                                            " (never registered, or the server restarted); call Register"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "session of rank ", rank, " was replaced by a newer registration of that rank (a replacement worker, or "
      "two workers started with the same --rank); this worker is stale: give every worker its own rank"));
}

std::vector<float> ParameterServerService::TakeBufferLocked() {
  if (!buffer_pool_.empty()) {
    std::vector<float> buffer = std::move(buffer_pool_.back());
    buffer_pool_.pop_back();
    return buffer;
  }
  return std::vector<float>(range_.size());
}

void ParameterServerService::ReturnBufferLocked(std::vector<float> buffer) {
  if (buffer.size() == range_.size()) buffer_pool_.push_back(std::move(buffer));
}

template <typename Writer>
bool ParameterServerService::WriteParametersLocked(Writer* writer, uint64_t version) {
  proto::PullReply header;
  header.mutable_header()->set_version(version);
  header.mutable_header()->set_num_elements(params_.size());
  if (!writer->Write(header)) return false;
  uint64_t sent = 0;
  const bool ok =
      WriteChunks<proto::PullReply>(writer, params_.data(), params_.size(), chunk_elements_, &sent);
  bytes_sent_ += sent;
  return ok;
}

// ---- Register ---------------------------------------------------------------------------------------------

absl::StatusOr<std::pair<uint64_t, uint64_t>> ParameterServerService::DoRegister(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream, int* rank_out) {
  proto::RegisterRequest first;
  if (!stream->Read(&first) || !first.has_header()) {
    return absl::InvalidArgumentError("Register must start with a RegisterHeader");
  }
  const proto::RegisterHeader& h = first.header();
  RETURN_IF_ERROR(CheckAddress(h.address()));
  if (h.rank() < 0 || h.rank() >= options_.workers || h.world_size() != options_.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker rank ", h.rank(), " of world size ", h.world_size(),
                     " does not fit this server's --workers=", options_.workers));
  }
  if (h.total_params() == 0) return absl::InvalidArgumentError("total_params must be positive");
  const trainer::SgdOptions hp = FromProto(h.hyperparameters());
  if (!std::isfinite(hp.lr) || !std::isfinite(hp.momentum) || !std::isfinite(hp.weight_decay) || hp.lr < 0 ||
      hp.momentum < 0 || hp.weight_decay < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hyperparameters must be finite and >= 0: ", Describe(hp)));
  }
  ShardRange range;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckServingLocked());
    if (!layout_known_) {
      layout_known_ = true;
      total_params_ = h.total_params();
      range_ = ComputeShardRange(total_params_, options_.shard, options_.num_shards);
      hyperparameters_ = hp;
    } else if (h.total_params() != total_params_) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker model has ", h.total_params(), " parameters but this server holds a model of ",
                       total_params_, "; all workers must train the same model"));
    } else if (!SameHyperparameters(hp, hyperparameters_)) {
      return absl::FailedPreconditionError(absl::StrCat("worker hyperparameters (", Describe(hp),
                                                        ") differ from the registered ones (",
                                                        Describe(hyperparameters_), "); use the same flags"));
    }
    range = range_;
  }

  if (h.offers_parameters()) {
    std::vector<float> initial(range.size());
    uint64_t received = 0;
    absl::Status status = ReadChunks<proto::RegisterRequest>(stream, initial.data(), initial.size(),
                                                             &received, "initial parameters");
    bytes_received_ += received;
    RETURN_IF_ERROR(status);
    absl::MutexLock lock(&mu_);
    if (!initialized_) {
      absl::WriterMutexLock params_lock(&params_mu_);
      params_ = std::move(initial);
      momentum_.assign(params_.size(), 0.0f);
      initialized_ = true;
    }
  } else {
    proto::RegisterRequest extra;
    if (stream->Read(&extra)) {
      return absl::InvalidArgumentError("chunks after a RegisterHeader without offers_parameters");
    }
  }

  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  if (!initialized_) {
    return absl::FailedPreconditionError(
        "this shard has no parameters yet; the first worker to register must offer its initial parameters");
  }
  RankState& rank = ranks_[h.rank()];
  // A replacement starts clean: the part of the pending step its predecessor pushed is dropped (the whole
  // step is rolled back if some of it was applied already), it will push that step again.
  if (aggregate_) {
    WithdrawRankLocked(h.rank(), absl::StrCat("rank ", h.rank(), " registered again during step ", version_));
  }
  rank.metrics_arrived = false;
  rank.session = next_session_++;
  *rank_out = h.rank();
  cv_.SignalAll();
  return std::make_pair(rank.session, version_);
}

grpc::Status ParameterServerService::Register(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) {
  absl::Status auth = CheckAuth(context);
  if (!auth.ok()) return ToGrpc(auth);
  int rank = -1;
  absl::StatusOr<std::pair<uint64_t, uint64_t>> registered = DoRegister(context, stream, &rank);
  if (!registered.ok()) return ToGrpc(registered.status());
  proto::RegisterReply reply;
  proto::RegisterReplyHeader* header = reply.mutable_header();
  {
    absl::MutexLock lock(&mu_);
    header->set_session(registered->first);
    header->set_total_params(total_params_);
    header->set_shard_begin(range_.begin);
    header->set_shard_end(range_.end);
    header->set_version(registered->second);
    header->set_next_step(aggregate_ ? static_cast<int64_t>(registered->second) : ranks_[rank].clock);
    header->set_mode(aggregate_ ? "sync" : "async");
    if (aggregate_) header->set_reply_chunk_elements(chunk_elements_);
  }
  if (!stream->Write(reply)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
  absl::ReaderMutexLock lock(&params_mu_);
  uint64_t sent = 0;
  const bool ok =
      WriteChunks<proto::RegisterReply>(stream, params_.data(), params_.size(), chunk_elements_, &sent);
  bytes_sent_ += sent;
  if (!ok) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
  return grpc::Status::OK;
}

// ---- Push / PushPull --------------------------------------------------------------------------------------

absl::Status ParameterServerService::ValidatePushLocked(const proto::PushHeader& h) {
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(h.rank(), h.session()));
  const int r = h.rank();
  RankState& rank = ranks_[r];
  if (h.num_elements() != range_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient of ", h.num_elements(), " elements for shard ",
                                                   options_.shard, " which holds ", range_.size(),
                                                   " (range [", range_.begin, ", ", range_.end, "))"));
  }
  const int64_t expected = aggregate_ ? static_cast<int64_t>(version_) : rank.clock;
  if (rank.receiving || (h.step() == expected && (rank.arrived || rank.push_id != 0))) {
    return absl::AlreadyExistsError(
        absl::StrCat("rank ", r, " already pushed step ", h.step(), " to shard ", options_.shard));
  }
  if (h.step() < expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", h.step(), " of rank ", r, " is in the past: shard ", options_.shard,
                     " expects step ", expected, " (version ", version_, ")"));
  }
  if (h.step() > expected) {
    return absl::OutOfRangeError(absl::StrCat("step ", h.step(), " of rank ", r, " is in the future: shard ",
                                              options_.shard, " expects step ", expected, " (version ",
                                              version_, ")"));
  }
  if (aggregate_) RETURN_IF_ERROR(AlignTrainerStepLocked(r, h.trainer_step()));
  return absl::OkStatus();
}

// Async mode (staleness > 0): the whole push is received, then applied on its own.
absl::StatusOr<uint64_t> ParameterServerService::DoPush(grpc::ServerContext* context,
                                                        const PushSource& source) {
  RETURN_IF_ERROR(CheckAuth(context));
  ASSIGN_OR_RETURN(const proto::PushHeader h, source.header());
  RETURN_IF_ERROR(CheckAddress(h.address()));
  const int r = h.rank();
  std::vector<float> buffer;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(ValidatePushLocked(h));
    ranks_[r].receiving = true;
    buffer = TakeBufferLocked();
  }

  uint64_t received = 0;
  absl::Status status = source.body(buffer.data(), buffer.size(), &received);
  bytes_received_ += received;
  if (status.ok() && context->IsCancelled()) status = absl::CancelledError("push cancelled by the client");

  absl::MutexLock lock(&mu_);
  RankState& rank = ranks_[r];
  rank.receiving = false;
  if (status.ok()) status = CheckServingLocked();
  if (status.ok()) status = CheckSessionLocked(r, h.session());
  if (!status.ok()) {
    ReturnBufferLocked(std::move(buffer));
    return status;
  }
  ApplyAsyncLocked(&buffer);
  ReturnBufferLocked(std::move(buffer));
  ++rank.clock;
  return AwaitStalenessLocked(r, h.session(), h.step());
}

absl::StatusOr<ParameterServerService::SyncPush> ParameterServerService::StartSyncPush(
    grpc::ServerContext* context, const proto::PushHeader& h, std::vector<float>* buffer) {
  RETURN_IF_ERROR(CheckAuth(context));
  RETURN_IF_ERROR(CheckAddress(h.address()));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(ValidatePushLocked(h));
  RankState& rank = ranks_[h.rank()];
  *buffer = TakeBufferLocked();
  SyncPush push;
  push.rank = h.rank();
  push.session = h.session();
  push.step = h.step();
  push.id = next_push_id_++;
  push.generation = step_generation_;
  rank.push_id = push.id;
  rank.grad = buffer->data();
  rank.delivered = 0;
  rank.receiving = true;
  rank.arrived = false;
  rank.trainer_step = h.trainer_step();
  return push;
}

bool ParameterServerService::OwnsSlotLocked(const SyncPush& push) const {
  return push.generation == step_generation_ && ranks_[push.rank].push_id == push.id;
}

absl::Status ParameterServerService::DroppedStatusLocked(const SyncPush& push) const {
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(push.rank, push.session));
  if (push.generation == step_generation_) {
    return absl::CancelledError(absl::StrCat("the push of rank ", push.rank, " left step ", push.step));
  }
  return absl::Status(last_drop_code_, absl::StrCat("synchronous step ", push.step, " of shard ",
                                                    options_.shard, " was dropped: ", last_drop_reason_));
}

absl::Status ParameterServerService::ReceiveSyncPush(grpc::ServerContext* context, const SyncPush& push,
                                                     uint64_t count, const PieceReader& read) {
  uint64_t reported = 0;
  while (true) {
    uint64_t filled = reported;
    absl::StatusOr<bool> more = read(&filled);
    if (filled > reported) {
      bytes_received_ += (filled - reported) * sizeof(float);
      absl::MutexLock lock(&mu_);
      if (!OwnsSlotLocked(push)) return DroppedStatusLocked(push);
      RankState& rank = ranks_[push.rank];
      rank.delivered = filled;
      if (filled == count) {
        rank.receiving = false;
        rank.arrived = true;
      }
      reported = filled;
      AdvanceStepLocked();
      // Fair share: hold this push while it is too far ahead of the slowest one (see max_lead_bytes). The
      // wait ends when the others catch up, the step is dropped (the writer's --step_timeout does that) or
      // the client cancels.
      const uint64_t lead = options_.max_lead_bytes / sizeof(float);
      while (lead > 0 && reported < count && reported > applied_ + lead && OwnsSlotLocked(push) &&
             !shutting_down_ && !context->IsCancelled()) {
        cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
      }
    }
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  if (reported != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient: stream ended after ", reported, " of ", count, " elements"));
  }
  if (context->IsCancelled()) return absl::CancelledError("push cancelled by the client");
  return absl::OkStatus();
}

absl::Status ParameterServerService::AwaitAppliedLocked(const SyncPush& push, uint64_t want,
                                                        uint64_t* available) {
  absl::Time deadline = absl::Now() + options_.step_timeout;
  uint64_t progress = applied_;
  while (true) {
    if (version_ > static_cast<uint64_t>(push.step)) {
      *available = range_.size();
      return absl::OkStatus();
    }
    if (!OwnsSlotLocked(push)) return DroppedStatusLocked(push);
    RETURN_IF_ERROR(CheckServingLocked());
    RETURN_IF_ERROR(CheckSessionLocked(push.rank, push.session));
    if (applied_ >= want) {
      *available = applied_;
      return absl::OkStatus();
    }
    if (applied_ > progress) {  // the step moves: the timeout counts from its last progress
      progress = applied_;
      deadline = absl::Now() + options_.step_timeout;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline && applied_ == progress &&
        OwnsSlotLocked(push) && !shutting_down_) {
      std::vector<int> missing;
      for (int r = 0; r < options_.workers; ++r) {
        if (ranks_[r].push_id == 0 || ranks_[r].delivered < range_.size()) missing.push_back(r);
      }
      DropPartialStepLocked(absl::StatusCode::kDeadlineExceeded,
                            absl::StrCat("ranks ", absl::StrJoin(missing, ","), " did not push step ",
                                         push.step, " within --step_timeout=",
                                         absl::FormatDuration(options_.step_timeout)));
      return absl::DeadlineExceededError(absl::StrCat(
          "synchronous step ", push.step, " of shard ", options_.shard, " timed out: ", last_drop_reason_,
          " (dead or stuck worker?); the step was rolled back, the server keeps serving"));
    }
  }
}

absl::Status ParameterServerService::StreamStepReplies(
    const SyncPush& push, grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream) {
  uint64_t count = 0;
  {
    absl::MutexLock lock(&mu_);
    count = range_.size();
  }
  proto::PullReplyHeader header;
  header.set_version(static_cast<uint64_t>(push.step) + 1);  // the version this step produces
  header.set_num_elements(count);
  if (!stream->Write(TensorFrame::Header(header))) return absl::UnavailableError("client went away");
  uint64_t sent = 0;
  while (sent < count) {
    uint64_t available = 0;
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(AwaitAppliedLocked(push, std::min(count, sent + chunk_elements_), &available));
    }
    while (sent < available) {
      const uint64_t len = std::min(chunk_elements_, available - sent);
      TensorFrame frame;
      {
        // A copy, taken under the lock: a dropped step may restore these values right after.
        absl::ReaderMutexLock lock(&params_mu_);
        frame = TensorFrame::CopiedChunk(sent, params_.data() + sent, len);
      }
      if (!stream->Write(frame)) return absl::UnavailableError("client went away");
      bytes_sent_ += len * sizeof(float);
      sent += len;
    }
  }
  return absl::OkStatus();
}

void ParameterServerService::FinishSyncPush(const SyncPush& push, const absl::Status& why,
                                            std::vector<float> buffer) {
  absl::MutexLock lock(&mu_);
  if (OwnsSlotLocked(push)) {
    WithdrawRankLocked(push.rank, absl::StrCat("the push of rank ", push.rank, " ended early (",
                                               why.ToString(), ")"));
  }
  ReturnBufferLocked(std::move(buffer));
}

void ParameterServerService::WithdrawRankLocked(int r, const std::string& reason) {
  RankState& rank = ranks_[r];
  if (rank.push_id == 0) return;
  if (applied_ == 0) {
    // Nothing of the step was applied (so nothing was sent): forget this rank's part only.
    rank.push_id = 0;
    rank.grad = nullptr;
    rank.delivered = 0;
    rank.receiving = false;
    rank.arrived = false;
    cv_.SignalAll();
    return;
  }
  DropPartialStepLocked(absl::StatusCode::kUnavailable,
                        absl::StrCat(reason, " after part of the step was applied; the shard was rolled back "
                                             "to version ",
                                     version_, ": re-register and push the step again"));
}

absl::StatusOr<uint64_t> ParameterServerService::AwaitStalenessLocked(int rank, uint64_t session,
                                                                      int64_t step) {
  // The pusher's clock is now step + 1; it may run ahead of the slowest rank by at most `staleness`.
  const auto slowest = [this]() {
    int64_t min_clock = ranks_[0].clock;
    for (const RankState& r : ranks_) min_clock = std::min(min_clock, r.clock);
    return min_clock;
  };
  const int64_t needed = step + 1 - options_.staleness;
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  const auto waiting = [&]() {
    return slowest() < needed && !shutting_down_ && ranks_[rank].session == session;
  };
  while (waiting()) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && waiting()) {
      std::vector<int> behind;
      for (int r = 0; r < options_.workers; ++r) {
        if (ranks_[r].clock < needed) behind.push_back(r);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank, " is more than --staleness=", options_.staleness, " steps ahead of ranks ",
          absl::StrJoin(behind, ","), " which did not reach step ", needed, " within --step_timeout=",
          absl::FormatDuration(options_.step_timeout), " (dead or stuck worker?)"));
    }
  }
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  return version_;
}

void ParameterServerService::AdvanceStepLocked() {
  const uint64_t n = range_.size();
  uint64_t ready = n;
  for (const RankState& rank : ranks_) ready = std::min(ready, rank.push_id != 0 ? rank.delivered : 0);
  if (ready <= applied_) return;
  ApplyRangeLocked(applied_, ready);
  applied_ = ready;
  cv_.SignalAll();
  if (applied_ == n) {
    ResetStepLocked();
    AfterVersionBumpLocked();
  }
}

void ParameterServerService::ApplyRangeLocked(uint64_t range_begin, uint64_t range_end) {
  // Mean of the N gradients, summed in rank order (deterministic whatever the arrival order), then the
  // optimizer; fused in cache-sized blocks so the range is streamed through memory once, and split over a
  // few threads for large ranges (element-wise work: the result depends neither on the split nor on the
  // ranges the step is applied in). The old values are saved first, for a rollback.
  std::vector<const float*> grads;
  for (const RankState& rank : ranks_) grads.push_back(rank.grad);
  float* sum = ranks_[0].grad;
  const float count = static_cast<float>(ranks_.size());
  const trainer::SgdOptions hyperparameters = hyperparameters_;
  absl::WriterMutexLock lock(&params_mu_);
  if (undo_params_.size() != params_.size()) {
    undo_params_.resize(params_.size());
    undo_momentum_.resize(momentum_.size());
  }
  const auto apply = [&](size_t begin, size_t end) {
    constexpr size_t kBlock = 2048;
    for (size_t b = range_begin + begin; b < range_begin + end; b += kBlock) {
      const size_t len = std::min(kBlock, range_begin + end - b);
      std::copy_n(params_.data() + b, len, undo_params_.data() + b);
      std::copy_n(momentum_.data() + b, len, undo_momentum_.data() + b);
      float* s = sum + b;
      for (size_t r = 1; r < grads.size(); ++r) {
        const float* g = grads[r] + b;
        for (size_t i = 0; i < len; ++i) s[i] += g[i];
      }
      if (grads.size() > 1) {
        for (size_t i = 0; i < len; ++i) s[i] /= count;
      }
      trainer::SgdMomentumStep(hyperparameters, s, params_.data() + b, momentum_.data() + b, len);
    }
  };
  ParallelFor(range_end - range_begin, apply);
}

void ParameterServerService::ResetStepLocked() {
  for (RankState& rank : ranks_) {
    rank.push_id = 0;
    rank.grad = nullptr;
    rank.delivered = 0;
    rank.receiving = false;
    rank.arrived = false;
  }
  applied_ = 0;
  ++step_generation_;
  cv_.SignalAll();
}

void ParameterServerService::ApplyAsyncLocked(std::vector<float>* gradient) {
  const float count = static_cast<float>(ranks_.size());
  trainer::SgdOptions scaled = hyperparameters_;
  scaled.weight_decay = hyperparameters_.weight_decay / count;
  float* g = gradient->data();
  {
    absl::WriterMutexLock lock(&params_mu_);
    ParallelFor(gradient->size(), [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) g[i] /= count;
      trainer::SgdMomentumStep(scaled, g + begin, params_.data() + begin, momentum_.data() + begin,
                               end - begin);
    });
  }
  AfterVersionBumpLocked();
}

void ParameterServerService::AfterVersionBumpLocked() {
  ++version_;
  cv_.SignalAll();
  if (options_.checkpoint_every > 0 && version_ % options_.checkpoint_every == 0) {
    absl::Status status = WriteCheckpointLocked();
    if (!status.ok()) {
      // Training goes on; the next checkpoint may succeed (e.g. after the disk got space back).
      std::fprintf(stderr, "ps shard %d: checkpoint at version %lu failed: %s\n", options_.shard,
                   static_cast<unsigned long>(version_), status.ToString().c_str());
    }
  }
}

absl::Status ParameterServerService::AlignTrainerStepLocked(int rank, int64_t trainer_step) {
  // The pending step's trainer step, from any rank that pushed (or is pushing) it.
  std::optional<int64_t> pending;
  for (const RankState& other : ranks_) {
    if (other.arrived || other.receiving || other.push_id != 0) pending = other.trainer_step;
  }
  if (!pending.has_value() || *pending == trainer_step) return absl::OkStatus();
  // Only after a restart or a replacement do ranks disagree (e.g. one rank got the last reply before the
  // server died, another did not). The most advanced rank wins: the others skip their step.
  if (trainer_step < *pending) {
    return absl::AbortedError(absl::StrCat("skipped: rank ", rank, " pushed trainer step ", trainer_step,
                                           " but the other ranks are at step ", *pending,
                                           "; pull the parameters and go on"));
  }
  DropPartialStepLocked(absl::StatusCode::kAborted,
                        absl::StrCat("skipped: rank ", rank, " is at trainer step ", trainer_step,
                                     ", ahead of step ", *pending, "; pull the parameters and go on"));
  return absl::OkStatus();
}

void ParameterServerService::DropPartialStepLocked(absl::StatusCode code, const std::string& reason) {
  if (applied_ > 0) {
    absl::WriterMutexLock lock(&params_mu_);
    std::copy_n(undo_params_.data(), applied_, params_.data());
    std::copy_n(undo_momentum_.data(), applied_, momentum_.data());
  }
  last_drop_reason_ = reason;
  last_drop_code_ = code;
  ResetStepLocked();
}

grpc::Status ParameterServerService::PushPullFrames(
    grpc::ServerContext* context, grpc::ServerReaderWriter<TensorFrame, TensorFrame>* stream) {
  TensorFrame first;
  proto::PushHeader header;
  if (!stream->Read(&first) || !first.error().ok() || !first.is_header() ||
      !header.ParseFromString(first.header_bytes())) {
    return ToGrpc(absl::InvalidArgumentError("a push must start with a PushHeader"));
  }
  if (!aggregate_) {
    PushSource source;
    source.header = [&]() -> absl::StatusOr<proto::PushHeader> { return header; };
    source.body = [&](float* dst, uint64_t count, uint64_t* bytes) {
      return ReadFrameChunks(stream, dst, count, bytes, "gradient");
    };
    absl::StatusOr<uint64_t> version = DoPush(context, source);
    if (!version.ok()) return ToGrpc(version.status());
    absl::ReaderMutexLock lock(&params_mu_);
    proto::PullReplyHeader reply;
    reply.set_version(*version);
    reply.set_num_elements(params_.size());
    bool ok = stream->Write(TensorFrame::Header(reply));
    for (uint64_t offset = 0; ok && offset < params_.size(); offset += chunk_elements_) {
      const uint64_t len = std::min<uint64_t>(chunk_elements_, params_.size() - offset);
      ok = stream->Write(TensorFrame::CopiedChunk(offset, params_.data() + offset, len));
      if (ok) bytes_sent_ += len * sizeof(float);
    }
    if (!ok) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
    return grpc::Status::OK;
  }

  // Synchronous: this thread reads the push while a second one streams the updated ranges back (a gRPC
  // sync stream allows one reader and one writer at a time).
  std::vector<float> buffer;
  absl::StatusOr<SyncPush> push = StartSyncPush(context, header, &buffer);
  if (!push.ok()) return ToGrpc(push.status());
  absl::Status write_status;
  std::thread writer([&] { write_status = StreamStepReplies(*push, stream); });
  TensorFrame frame;
  frame.ExpectInto(buffer.data(), buffer.size());
  absl::Status read_status =
      ReceiveSyncPush(context, *push, buffer.size(), [&](uint64_t* filled) -> absl::StatusOr<bool> {
        const bool more = stream->Read(&frame);
        *filled = frame.filled();
        if (more && !frame.error().ok()) {
          return absl::Status(frame.error().code(), absl::StrCat("gradient: ", frame.error().message()));
        }
        if (more && frame.is_header()) {
          return absl::InvalidArgumentError("gradient: expected only chunks after the header");
        }
        return more;
      });
  if (!read_status.ok()) {
    // Ends the writer's wait at once (this push leaves the step) and keeps the buffer alive until then.
    absl::MutexLock lock(&mu_);
    if (OwnsSlotLocked(*push)) {
      WithdrawRankLocked(push->rank, absl::StrCat("the push of rank ", push->rank, " of step ", push->step,
                                                  " failed (", read_status.ToString(), ")"));
    }
  }
  writer.join();
  FinishSyncPush(*push, read_status.ok() ? write_status : read_status, std::move(buffer));
  if (!read_status.ok()) return ToGrpc(read_status);
  return ToGrpc(write_status);
}

grpc::Status ParameterServerService::Push(grpc::ServerContext* context,
                                          grpc::ServerReader<proto::PushRequest>* reader,
                                          proto::PushReply* reply) {
  proto::PushRequest first;
  if (!reader->Read(&first) || !first.has_header()) {
    return ToGrpc(absl::InvalidArgumentError("a push must start with a PushHeader"));
  }
  if (!aggregate_) {
    PushSource source;
    source.header = [&]() -> absl::StatusOr<proto::PushHeader> { return first.header(); };
    source.body = [&](float* dst, uint64_t count, uint64_t* bytes) {
      return ReadChunks<proto::PushRequest>(reader, dst, count, bytes, "gradient");
    };
    absl::StatusOr<uint64_t> version = DoPush(context, source);
    if (!version.ok()) return ToGrpc(version.status());
    reply->set_version(*version);
    return grpc::Status::OK;
  }
  std::vector<float> buffer;
  absl::StatusOr<SyncPush> push = StartSyncPush(context, first.header(), &buffer);
  if (!push.ok()) return ToGrpc(push.status());
  proto::PushRequest message;
  absl::Status status =
      ReceiveSyncPush(context, *push, buffer.size(), [&](uint64_t* filled) -> absl::StatusOr<bool> {
        if (!reader->Read(&message)) return false;
        if (!message.has_chunk()) {
          return absl::InvalidArgumentError("gradient: expected only chunks after the header");
        }
        RETURN_IF_ERROR(AcceptChunk(message.chunk(), buffer.data(), buffer.size(), filled, "gradient"));
        return true;
      });
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    uint64_t available = 0;
    status = AwaitAppliedLocked(*push, buffer.size(), &available);
  }
  FinishSyncPush(*push, status, std::move(buffer));
  if (!status.ok()) return ToGrpc(status);
  reply->set_version(static_cast<uint64_t>(push->step) + 1);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                                          grpc::ServerWriter<proto::PullReply>* writer) {
  absl::Status status = CheckAuth(context);
  if (status.ok()) status = CheckAddress(request->address());
  uint64_t version = 0;
  absl::ReleasableMutexLock lock(&mu_);
  if (status.ok()) status = CheckServingLocked();
  if (status.ok()) status = CheckSessionLocked(request->rank(), request->session());
  // Never half a step: wait until the pending synchronous step is not partly applied (it completes or is
  // dropped, which step_timeout bounds), then hold the parameters while they stream out.
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  while (status.ok() && applied_ > 0) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && applied_ > 0) {
      status = absl::DeadlineExceededError(
          absl::StrCat("Pull from shard ", options_.shard, ": a synchronous step stayed half-applied for "
                       "--step_timeout; try again"));
    }
  }
  if (!status.ok()) return ToGrpc(status);
  version = version_;
  absl::ReaderMutexLock params_lock(&params_mu_);
  lock.Release();
  if (!WriteParametersLocked(writer, version))
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
  return grpc::Status::OK;
}

// ---- Metrics, stats, shutdown -----------------------------------------------------------------------------

grpc::Status ParameterServerService::AverageMetrics(grpc::ServerContext* context,
                                                    const proto::MetricsRequest* request,
                                                    proto::MetricsReply* reply) {
  absl::Status status = CheckAuth(context);
  if (status.ok()) status = CheckAddress(request->address());
  if (!status.ok()) return ToGrpc(status);
  absl::MutexLock lock(&mu_);
  status = CheckServingLocked();
  if (status.ok()) status = CheckSessionLocked(request->rank(), request->session());
  if (!status.ok()) return ToGrpc(status);
  RankState& rank = ranks_[request->rank()];
  if (rank.metrics_arrived) {
    return ToGrpc(absl::AlreadyExistsError(
        absl::StrCat("rank ", request->rank(), " is already waiting in AverageMetrics/Barrier")));
  }
  for (const RankState& other : ranks_) {
    if (other.metrics_arrived && static_cast<int>(other.metrics.size()) != request->values_size()) {
      return ToGrpc(absl::InvalidArgumentError(absl::StrCat("rank ", request->rank(), " averages ",
                                                            request->values_size(), " values, others ",
                                                            other.metrics.size())));
    }
  }
  rank.metrics.assign(request->values().begin(), request->values().end());
  rank.metrics_arrived = true;
  const uint64_t round = metrics_round_;
  bool all = true;
  for (const RankState& other : ranks_) all = all && other.metrics_arrived;
  if (all) {
    metrics_result_.assign(rank.metrics.size(), 0.0);
    for (RankState& other : ranks_) {
      for (size_t i = 0; i < metrics_result_.size(); ++i) metrics_result_[i] += other.metrics[i];
      other.metrics_arrived = false;
    }
    for (double& v : metrics_result_) v /= ranks_.size();
    metrics_result_round_ = round;
    ++metrics_round_;
    cv_.SignalAll();
  } else {
    const absl::Time deadline = absl::Now() + options_.step_timeout;
    // Ends early when this session is replaced (its metrics were dropped by the new registration).
    const auto waiting = [&]() {
      return metrics_round_ == round && !shutting_down_ && rank.session == request->session();
    };
    while (waiting()) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && waiting()) {
        std::vector<int> missing;
        for (int r = 0; r < options_.workers; ++r) {
          if (!ranks_[r].metrics_arrived) missing.push_back(r);
        }
        for (RankState& other : ranks_) other.metrics_arrived = false;
        ++metrics_round_;
        cv_.SignalAll();
        return ToGrpc(
            absl::DeadlineExceededError(absl::StrCat("AverageMetrics/Barrier timed out after --step_timeout=",
                                                     absl::FormatDuration(options_.step_timeout),
                                                     " waiting for ranks ", absl::StrJoin(missing, ","))));
      }
    }
    status = CheckServingLocked();
    if (status.ok() && metrics_result_round_ != round) {
      status = CheckSessionLocked(request->rank(), request->session());
    }
    if (status.ok() && metrics_result_round_ != round) {
      status = absl::DeadlineExceededError("AverageMetrics/Barrier round timed out waiting for other ranks");
    }
    if (!status.ok()) return ToGrpc(status);
  }
  for (double v : metrics_result_) reply->add_values(v);
  return grpc::Status::OK;
}

proto::StatsReply ParameterServerService::GetStats() {
  proto::StatsReply reply;
  absl::MutexLock lock(&mu_);
  reply.set_shard(options_.shard);
  reply.set_num_shards(options_.num_shards);
  reply.set_mode(ModeName(options_.mode));
  reply.set_workers(options_.workers);
  int registered = 0;
  for (const RankState& r : ranks_) registered += r.session != 0;
  reply.set_registered_workers(registered);
  reply.set_version(version_);
  reply.set_total_params(total_params_);
  reply.set_shard_begin(range_.begin);
  reply.set_shard_end(range_.end);
  reply.set_bytes_sent(bytes_sent_.load());
  reply.set_bytes_received(bytes_received_.load());
  reply.set_checkpoints_written(checkpoints_written_);
  return reply;
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext* context, const proto::StatsRequest*,
                                           proto::StatsReply* reply) {
  absl::Status status = CheckAuth(context);
  if (!status.ok()) return ToGrpc(status);
  *reply = GetStats();
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Shutdown(grpc::ServerContext* context, const proto::ShutdownRequest*,
                                              proto::ShutdownReply*) {
  absl::Status status = CheckAuth(context);
  if (!status.ok()) return ToGrpc(status);
  RequestShutdown();
  return grpc::Status::OK;
}

void ParameterServerService::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
  cv_.SignalAll();
}

bool ParameterServerService::WaitForShutdownRequest(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  while (!shutdown_requested_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  return shutdown_requested_;
}

void ParameterServerService::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

absl::Status ParameterServerService::WriteCheckpoint() {
  absl::MutexLock lock(&mu_);
  return WriteCheckpointLocked();
}

absl::Status ParameterServerService::WriteCheckpointLocked() {
  if (options_.checkpoint_dir.empty() || !initialized_) return absl::OkStatus();
  if (applied_ > 0) {  // never save half a step
    DropPartialStepLocked(absl::StatusCode::kUnavailable,
                          "the server saved its checkpoint mid-step; re-register and push the step again");
  }
  ShardCheckpoint header;
  header.shard = options_.shard;
  header.num_shards = options_.num_shards;
  header.total_params = total_params_;
  header.begin = range_.begin;
  header.end = range_.end;
  header.version = version_;
  header.hyperparameters = hyperparameters_;
  for (const RankState& r : ranks_) header.clocks.push_back(r.clock);
  absl::ReaderMutexLock params_lock(&params_mu_);
  RETURN_IF_ERROR(
      WriteShardCheckpoint(ShardCheckpointPath(options_.checkpoint_dir, options_.shard, options_.num_shards),
                           header, params_, momentum_));
  ++checkpoints_written_;
  return absl::OkStatus();
}

std::vector<float> ParameterServerService::CopyParameters() {
  absl::ReaderMutexLock lock(&params_mu_);
  return params_;
}

uint64_t ParameterServerService::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

}  // namespace psring::ps
