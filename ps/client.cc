#include "ps/client.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "ps/tensor_frame.h"

namespace psring::ps {
namespace {

// A shard that restarted or went away: re-register and carry on. CANCELLED counts too: this client never
// cancels its calls, so it comes from a server that stopped in the middle of one.
// RESOURCE_EXHAUSTED: the server had no thread for the call (its ResourceQuota, ps/server.h); nothing was
// done, so registering and pushing again is safe.
bool NeedsReregistration(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsNotFound(status) || absl::IsCancelled(status) ||
         absl::IsResourceExhausted(status);
}

}  // namespace

absl::Status PsExchange::FromCall(const grpc::Status& status, absl::Time deadline,
                                  const std::string& where) const {
  absl::Status result = FromGrpc(status, where);
  // TLS against a plaintext server: the server's HTTP/2 bytes are no TLS record ("wrong version number").
  if (!options_.tls_ca_file.empty() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StrContains(status.error_message(), "wrong version number")) {
    return absl::UnavailableError(absl::StrCat(
        result.message(), " (TLS handshake failed: the server answered in plaintext, so it does not use TLS: "
        "start it with --tls_cert and --tls_key, or run this worker without --tls_ca)"));
  }
  // A failed TLS handshake surfaces from gRPC as a bare "tcp handshaker shutdown", an SSL error or a peer
  // name "not in peer certificate": say what to check.
  if (!options_.tls_ca_file.empty() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      (absl::StrContains(status.error_message(), "handshake") || absl::StrContains(status.error_message(), "SSL") ||
       absl::StrContains(status.error_message(), "certificate"))) {
    return absl::UnavailableError(absl::StrCat(
        result.message(), " (TLS handshake failed: check that --tls_ca signed the server's --tls_cert, that the "
        "certificate names the address in --servers or --tls_target_name, and that the server uses TLS)"));
  }
  // Past our own deadline the call ran out of --timeout (a server's --step_timeout answers before it); say
  // why that happens.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        result.message(), " (no answer within --timeout=", absl::FormatDuration(options_.timeout),
        "; a step waits for every worker and server: is one of them dead, stopped or not started?)"));
  }
  return result;
}

absl::StatusOr<std::vector<std::string>> ParseServerList(const std::string& text) {
  std::vector<std::string> servers;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    RETURN_IF_ERROR(ParseHostPort(part, "--servers entry").status());
    servers.emplace_back(part);
  }
  if (servers.empty()) return absl::InvalidArgumentError("--servers is empty; give host:port per shard");
  return servers;
}

absl::StatusOr<std::unique_ptr<PsExchange>> PsExchange::Create(const PsClientOptions& options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("no parameter servers given (--servers)");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " must be in [0, world size ", options.world_size, ")"));
  }
  if (options.chunk_bytes < sizeof(float) || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk size ", options.chunk_bytes, " must be in [4, ", kMaxChunkBytes, "] bytes"));
  }
  if (options.receive_window_bytes != 0 &&
      (options.receive_window_bytes < 16384 || options.receive_window_bytes > 1073741823)) {
    return absl::InvalidArgumentError(absl::StrCat("receive window of ", options.receive_window_bytes,
                                                   " bytes must be 0 (gRPC's adaptive window) or in 16384 .. "
                                                   "1073741823 (HTTP/2's limits)"));
  }
  if (options.timeout <= absl::ZeroDuration() || options.reconnect_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeouts must be positive");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadTextFile(options.tls_ca_file));
    credentials = grpc::SslCredentials(ssl);
  }
  std::unique_ptr<PsExchange> exchange(new PsExchange(options));
  for (size_t i = 0; i < options.servers.size(); ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // Each exchange gets its own TCP connection, even when several ranks share a process (tests, bench).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // A restarted server is found again within a fraction of a second: gRPC retries the connection at
    // most kReconnectBackoffMs apart (its default grows to 120 s), and RegisterWithRetries below at most
    // max_backoff apart, so re-registration follows the server's return by about their sum. The minimum
    // is also gRPC's connect timeout (TCP + HTTP/2 handshake): at 100 ms a freshly started server, slow to
    // answer its first handshakes, was refused for seconds, so it stays at a second.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
    if (options.receive_window_bytes > 0) {
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(options.receive_window_bytes));
    }
    if (!options.tls_target_name.empty()) args.SetSslTargetNameOverride(options.tls_target_name);
    Shard shard;
    shard.index = static_cast<int>(i);
    shard.address = options.servers[i];
    shard.channel = grpc::CreateCustomChannel(shard.address, credentials, args);
    shard.stub = proto::ParameterServer::NewStub(shard.channel);
    shard.push_pull =
        std::make_unique<grpc::internal::RpcMethod>(PushPullMethodName().c_str(),
                                                    grpc::internal::RpcMethod::BIDI_STREAMING, shard.channel);
    exchange->shards_.push_back(std::move(shard));
  }
  return exchange;
}

PsExchange::PsExchange(const PsClientOptions& options)
    : options_(options), chunk_elements_(options.chunk_bytes / sizeof(float)), name_(options.name) {}

PsExchange::~PsExchange() {
  if (step_thread_.joinable()) {
    // A step left open (the trainer failed before FinishStep): stop waiting for its gradients.
    tracker_.Abort(absl::CancelledError("the exchange was destroyed during a bucketed step"));
    step_thread_.join();
  }
}

trainer::OptimizerInfo PsExchange::optimizer() const {
  return trainer::OptimizerInfo{trainer::OptimizerOwner::kServer, server_update_, options_.hyperparameters};
}

absl::Time PsExchange::PrepareContext(grpc::ClientContext* context) const {
  const absl::Time deadline = absl::Now() + options_.timeout;
  context->set_deadline(absl::ToChronoTime(deadline));
  if (!options_.auth_token.empty()) context->AddMetadata(kAuthMetadataKey, options_.auth_token);
  return deadline;
}

proto::ShardAddress PsExchange::Address(const Shard& shard) const {
  proto::ShardAddress address;
  address.set_shard(shard.index);
  address.set_num_shards(static_cast<int>(shards_.size()));
  return address;
}

absl::Status PsExchange::CheckBuffer(trainer::FloatBuffer buffer, const char* what) const {
  if (buffer.memory != trainer::MemoryKind::kHost) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parameter server takes host buffers only (", what, ")"));
  }
  if (buffer.count == 0 || (buffer.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " buffer is empty"));
  }
  if (total_params_ != 0 && buffer.count != total_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", buffer.count, " elements, the model ", total_params_));
  }
  return absl::OkStatus();
}

absl::Status PsExchange::ForEachShard(const std::function<absl::Status(Shard*)>& fn) {
  std::vector<absl::Status> results(shards_.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < shards_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = fn(&shards_[i]); });
  }
  results[0] = fn(&shards_[0]);
  for (std::thread& t : threads) t.join();
  for (Shard& shard : shards_) {
    bytes_sent_ += shard.bytes_sent;
    bytes_received_ += shard.bytes_received;
    shard.bytes_sent = shard.bytes_received = 0;
  }
  for (const absl::Status& status : results) RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

absl::Status PsExchange::RegisterOnce(Shard* shard, trainer::FloatBuffer params) {
  const std::string where = absl::StrCat("Register with shard ", shard->index, " (", shard->address, ")");
  const ShardRange range = layout_.WireRange(shard->index);
  grpc::ClientContext context;
  const absl::Time deadline = PrepareContext(&context);
  auto stream = shard->stub->Register(&context);
  proto::RegisterRequest request;
  proto::RegisterHeader* header = request.mutable_header();
  *header->mutable_address() = Address(*shard);
  header->set_rank(options_.rank);
  header->set_world_size(options_.world_size);
  header->set_total_params(params.count);
  header->mutable_hyperparameters()->set_lr(options_.hyperparameters.lr);
  header->mutable_hyperparameters()->set_momentum(options_.hyperparameters.momentum);
  header->mutable_hyperparameters()->set_weight_decay(options_.hyperparameters.weight_decay);
  header->set_offers_parameters(true);
  if (!layout_.flat()) {
    for (uint64_t n : layout_.buckets()) header->mutable_layout()->add_bucket_elements(n);
  }
  header->mutable_layout()->set_settings(layout_settings_);
  bool ok = stream->Write(request) &&
            WriteChunks<proto::RegisterRequest>(stream.get(), params.data + range.begin, range.size(),
                                                chunk_elements_, &shard->bytes_sent);
  if (ok) ok = stream->WritesDone();
  proto::RegisterReply reply;
  absl::Status received = absl::OkStatus();
  if (ok && stream->Read(&reply) && reply.has_header()) {
    const proto::RegisterReplyHeader& h = reply.header();
    if (h.total_params() != params.count || h.shard_begin() != range.begin || h.shard_end() != range.end) {
      received = absl::FailedPreconditionError(absl::StrCat(
          where, ": server holds range [", h.shard_begin(), ", ", h.shard_end(), ") of ", h.total_params(),
          " parameters, this worker expects [", range.begin, ", ", range.end, ") of ", params.count));
    } else {
      received = ReadChunks<proto::RegisterReply>(stream.get(), params.data + range.begin, range.size(),
                                                  &shard->bytes_received, "registered parameters");
      if (received.ok()) {
        shard->session = GetSession(h);
        shard->next_step = h.next_step();
        shard->version = h.version();
        shard->range = range;
        shard->reply_chunk_elements = h.reply_chunk_elements();
        if (shard->index == 0) {
          name_ = absl::StrCat("ps-", h.mode());
          server_update_ =
              h.mode() == "async" ? trainer::ServerUpdate::kEachPush : trainer::ServerUpdate::kMeanPerStep;
        }
      }
    }
  }
  // Drain what the server still sends, so Finish() reports how the call really ended.
  while (!received.ok() && stream->Read(&reply)) {
  }
  grpc::Status status = stream->Finish();
  RETURN_IF_ERROR(FromCall(status, deadline, where));
  if (!received.ok()) return absl::Status(received.code(), absl::StrCat(where, ": ", received.message()));
  if (!ok) return absl::UnavailableError(absl::StrCat(where, ": stream broke"));
  return absl::OkStatus();
}

absl::Status PsExchange::RegisterWithRetries(Shard* shard, trainer::FloatBuffer params) {
  const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    absl::Status status = RegisterOnce(shard, params);
    if (status.ok() || !NeedsReregistration(status) || absl::Now() + backoff > give_up) {
      if (!status.ok() && NeedsReregistration(status)) {
        return absl::UnavailableError(absl::StrCat(
            status.message(), " (gave up after --timeout=", absl::FormatDuration(options_.reconnect_timeout),
            " of retries; is the server running?)"));
      }
      return status;
    }
    // Wait on the channel rather than sleep: with the synchronous API a connection attempt progresses only
    // while some call polls for it, so a plain sleep left a restarted server's handshakes pending for
    // seconds (re-registration took 3.7 s after a 0.2 s outage). This returns as soon as it is connected.
    const absl::Time next = absl::Now() + backoff;
    shard->channel->WaitForConnected(absl::ToChronoTime(next));
    absl::SleepFor(next - absl::Now());
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status PsExchange::SetBucketPlan(const trainer::BucketPlan& plan, absl::string_view settings) {
  if (registered_) {
    return absl::FailedPreconditionError(
        "SetBucketPlan after SyncInitialParameters: the servers' element layout is fixed at registration");
  }
  // The layout names buckets by size only: they must tile the vector from its end, in launch order.
  size_t end = plan.total();
  for (const trainer::FloatRange& bucket : plan.buckets()) {
    if (bucket.count == 0 || bucket.end() != end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket plan: bucket [", bucket.offset, ", ", bucket.end(), ") does not end where the previous one "
          "begins (", end, "); the parameter server takes plans in launch order, last layers first"));
    }
    end = bucket.offset;
  }
  layout_plan_ = plan.buckets();
  layout_settings_ = std::string(settings);
  return absl::OkStatus();
}

absl::Status PsExchange::SyncInitialParameters(trainer::FloatBuffer params) {
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  if (params.count < shards_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model of ", params.count, " parameters cannot be split over ", shards_.size(), " shards"));
  }
  std::vector<uint64_t> buckets;
  size_t planned = 0;
  for (const trainer::FloatRange& bucket : layout_plan_) {
    buckets.push_back(bucket.count);
    planned += bucket.count;
  }
  if (!layout_plan_.empty() && planned != params.count) {
    return absl::InvalidArgumentError(absl::StrCat("the bucket plan (SetBucketPlan) covers ", planned,
                                                   " elements but the model has ", params.count));
  }
  ASSIGN_OR_RETURN(layout_, ShardLayout::Create(params.count, std::move(buckets), num_shards()));
  total_params_ = params.count;
  const trainer::FloatBuffer wire = ToWire(params, &wire_params_);
  RETURN_IF_ERROR(ForEachShard([&](Shard* shard) { return RegisterWithRetries(shard, wire); }));
  registered_ = true;
  FromWire(wire, params);
  return absl::OkStatus();
}

trainer::FloatBuffer PsExchange::ToWire(trainer::FloatBuffer buffer, std::vector<float>* wire) const {
  if (layout_.flat()) return buffer;
  wire->resize(buffer.count);
  layout_.ToWire(buffer.data, wire->data());
  return trainer::FloatBuffer{wire->data(), wire->size(), trainer::MemoryKind::kHost};
}

void PsExchange::FromWire(trainer::FloatBuffer wire, trainer::FloatBuffer buffer) const {
  if (wire.data == buffer.data) return;
  layout_.FromWire(wire.data, buffer.data);
}

absl::Status PsExchange::PushPullOnce(Shard* shard, int64_t trainer_step, trainer::FloatBuffer grads,
                                      trainer::FloatBuffer params, const BucketFeed* feed) {
  const std::string where = absl::StrCat("PushPull step ", shard->next_step, " with shard ", shard->index,
                                         " (", shard->address, ")");
  // The gradient chunks are slices of `grads` (zero copy): the tracker must see them all released before
  // this function returns. It outlives `stream` (declared first).
  SliceTracker tracker;
  absl::Status received = absl::OkStatus();
  absl::Status feed_error;  // the bucketed step ended before this shard's part was complete
  bool ok = false;
  uint64_t version = 0;
  grpc::Status status;
  absl::Time deadline;
  {
    grpc::ClientContext context;
    deadline = PrepareContext(&context);
    std::unique_ptr<grpc::ClientReaderWriter<TensorFrame, TensorFrame>> stream(
        grpc::internal::ClientReaderWriterFactory<TensorFrame, TensorFrame>::Create(
            shard->channel.get(), *shard->push_pull, &context));
    proto::PushHeader header;
    *header.mutable_address() = Address(*shard);
    header.set_rank(options_.rank);
    SetSession(shard->session, &header);
    header.set_step(shard->next_step);
    header.set_num_elements(shard->range.size());
    header.set_trainer_step(trainer_step);
    // The server streams each updated range back while later chunks are still being pushed: read the reply
    // on a second thread while this one writes (a gRPC stream allows one reader and one writer at a time).
    bool got_reply = false;
    int64_t pull_start_us = 0;  // when the reply's header arrived
    // Push window: chunk [o, o+len) goes out once the reply reached o + len - window (or the reply ended).
    // Only sync servers stream replies during the push and announce their range; an async server or an
    // older one (0) gets no window: it answers after the whole push, or we could not size it safely.
    const uint64_t window =
        options_.push_window_bytes > 0 && shard->reply_chunk_elements > 0
            ? std::max<uint64_t>(options_.push_window_bytes / sizeof(float),
                                 chunk_elements_ + shard->reply_chunk_elements)
            : 0;
    absl::Mutex window_mu;
    absl::CondVar window_cv;
    uint64_t replied = 0;
    bool reply_over = false;
    std::function<void(uint64_t)> on_reply;
    std::function<void(uint64_t, uint64_t)> before_chunk;
    if (window > 0) {
      on_reply = [&](uint64_t filled) {
        absl::MutexLock lock(&window_mu);
        replied = filled;
        window_cv.SignalAll();
      };
      before_chunk = [&](uint64_t offset, uint64_t len) {
        absl::MutexLock lock(&window_mu);
        const uint64_t need = offset + len > window ? offset + len - window : 0;
        // The server's --step_timeout ends a stuck step, which ends the reply; the call deadline bounds it too.
        const absl::Time give_up = absl::Now() + options_.timeout;
        while (!reply_over && replied < need) {
          if (window_cv.WaitWithDeadline(&window_mu, give_up)) break;
        }
      };
    }
    std::thread reader([&] {
      // However the reader ends, the writer stops waiting for it.
      const auto end_reply = [&] {
        absl::MutexLock lock(&window_mu);
        reply_over = true;
        window_cv.SignalAll();
      };
      struct MarkOver {
        const std::function<void()> end;
        ~MarkOver() { end(); }
      } mark_over{end_reply};
      TensorFrame first;
      proto::PullReplyHeader reply;
      if (!stream->Read(&first) || !first.error().ok() || !first.is_header() ||
          !reply.ParseFromString(first.header_bytes())) {
        return;
      }
      got_reply = true;
      pull_start_us = trainer::Timeline::NowMicros();
      version = reply.version();
      if (reply.num_elements() != shard->range.size()) {
        received = absl::InternalError(absl::StrCat("server sent ", reply.num_elements(),
                                                    " elements for a shard of ", shard->range.size()));
      } else {
        // A second header ends the reply early (the step was dropped while we push; ps.proto): stop waiting
        // for replies, so the push goes on and the call ends with the server's status.
        const auto ended = [](const std::string& bytes) {
          proto::PullReplyHeader end;
          if (!end.ParseFromString(bytes) || end.ended_code() == 0) {
            return absl::InvalidArgumentError("parameters: expected only chunks after the header");
          }
          const int code = end.ended_code();
          return absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
                              absl::StrCat("the server ended the reply: ", end.ended_message()));
        };
        received = ReadFrameChunks(stream.get(), params.data + shard->range.begin, shard->range.size(),
                                   &shard->bytes_received, "parameters", on_reply, ended);
      }
      if (!received.ok()) {
        end_reply();  // before draining: the server ends the call only once our push is complete
        // Drain what the server still sends (nothing is copied once a frame holds an error), so Finish()
        // reports how the call really ended.
        TensorFrame sink;
        sink.ExpectInto(nullptr, 0);
        while (stream->Read(&sink)) {
        }
      }
    });
    trainer::Timeline* const timeline = this->timeline();
    // Pushes wire elements [begin, end) of the shard (offsets within the shard's range), bucket `bucket` of
    // a bucketed step (-1: the whole flat gradient), recording a "push" span.
    auto push = [&](uint64_t begin, uint64_t end, int bucket) {
      const int64_t start = trainer::Timeline::NowMicros();
      const bool written = WriteFrameChunks(stream.get(), grads.data + shard->range.begin, end, chunk_elements_,
                                            &tracker, &shard->bytes_sent, before_chunk, begin);
      if (timeline->enabled()) {
        timeline->Record("push", trainer::CommTrack(shard->index), start, trainer::Timeline::NowMicros() - start,
                         {{"step", static_cast<double>(trainer_step)},
                          {"shard", static_cast<double>(shard->index)},
                          {"bucket", static_cast<double>(bucket)},
                          {"bytes", static_cast<double>((end - begin) * sizeof(float))}});
      }
      return written;
    };
    ok = stream->Write(TensorFrame::Header(header));
    if (ok && feed == nullptr) {
      ok = push(0, shard->range.size(), -1);
    } else if (ok) {
      // The shard holds its slice of every bucket in plan order: its part is pushed as a prefix that grows
      // by one slice per bucket (`pushed` elements so far).
      uint64_t pushed = 0;
      for (size_t i = 0; ok && i < layout_.buckets().size(); ++i) {
        const ShardRange slice = layout_.Slice(shard->index, i);
        if (slice.size() == 0) continue;  // a bucket smaller than the number of shards
        const absl::Status ready = feed->tracker->WaitFor(static_cast<int>(i));
        if (!ready.ok()) {
          // Backward failed: end the push unfinished (the server drops the step) rather than send garbage.
          feed_error = ready;
          context.TryCancel();
          ok = false;
          break;
        }
        std::copy(feed->grads.data + slice.begin, feed->grads.data + slice.end,
                  grads.data + shard->range.begin + pushed);
        ok = push(pushed, pushed + slice.size(), static_cast<int>(i));
        pushed += slice.size();
      }
    }
    if (ok) ok = stream->WritesDone();
    reader.join();
    if (timeline->enabled() && got_reply) {
      // From the reply's header (the first range applied) to its end.
      timeline->Record("pull", trainer::CommTrack(shard->index), pull_start_us,
                       trainer::Timeline::NowMicros() - pull_start_us,
                       {{"step", static_cast<double>(trainer_step)},
                        {"shard", static_cast<double>(shard->index)},
                        {"bytes", static_cast<double>(shard->range.size() * sizeof(float))}});
    }
    ok = ok && got_reply;
    status = stream->Finish();
  }
  if (!tracker.WaitReleased(options_.timeout)) {
    // gRPC must drop every slice once the call is over; continuing would let the caller reuse memory gRPC
    // may still read.
    std::fprintf(stderr, "ps rank %d: gRPC still holds gradient slices after the call ended\n",
                 options_.rank);
    std::abort();
  }
  if (!feed_error.ok()) {
    // Not a network failure: no retry (FailedPrecondition is neither re-registered nor pulled).
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": the bucketed step ended before its gradient was complete: ", feed_error.message()));
  }
  // A failed call (server gone, deadline, server-side error) explains a short or broken reply best.
  RETURN_IF_ERROR(FromCall(status, deadline, where));
  if (!received.ok()) return absl::Status(received.code(), absl::StrCat(where, ": ", received.message()));
  if (!ok) return absl::UnavailableError(absl::StrCat(where, ": stream ended without parameters"));
  ++shard->next_step;
  shard->version = version;
  return absl::OkStatus();
}

absl::StatusOr<trainer::ExchangeOutcome> PsExchange::Exchange(int64_t step, trainer::FloatBuffer grads,
                                                              trainer::FloatBuffer params) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before Exchange");
  RETURN_IF_ERROR(CheckBuffer(grads, "grads"));
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  const trainer::FloatBuffer wire_params = ToWire(params, &wire_params_);
  RETURN_IF_ERROR(ExchangeWire(step, ToWire(grads, &wire_grads_), wire_params, /*feed=*/nullptr));
  FromWire(wire_params, params);
  return trainer::ExchangeOutcome::kParametersUpdated;
}

absl::Status PsExchange::BeginStep(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                                   const trainer::BucketPlan& plan) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before BeginStep");
  if (step_thread_.joinable()) {
    return absl::FailedPreconditionError("BeginStep while a bucketed step is open; call FinishStep first");
  }
  RETURN_IF_ERROR(CheckBuffer(grads, "grads"));
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  if (plan.total() != grads.count) {
    return absl::InvalidArgumentError(absl::StrCat("bucket plan covers ", plan.total(),
                                                   " elements but the gradient has ", grads.count));
  }
  const bool registered_plan =
      layout_plan_.empty() ? plan.buckets().size() == 1 : plan.buckets() == layout_plan_;
  if (!registered_plan) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BeginStep with a plan of ", plan.buckets().size(), " bucket(s) but the servers hold the element layout ",
        layout_.Describe(), ": pass the plan to SetBucketPlan before SyncInitialParameters"));
  }
  plan_ = plan;
  tracker_.Begin(plan_);
  feed_ = BucketFeed{&tracker_, &plan_, grads};
  step_params_ = params;
  // The wire gradient is filled bucket by bucket by the shard streams; the wire parameters must hold this
  // rank's current values (a re-registration or an async reply may rewrite only part of them).
  wire_grads_.resize(grads.count);
  const trainer::FloatBuffer wire_params = ToWire(params, &wire_params_);
  step_wire_params_ = wire_params;
  const trainer::FloatBuffer wire_grads{wire_grads_.data(), wire_grads_.size(), trainer::MemoryKind::kHost};
  step_status_ = absl::OkStatus();
  step_thread_ = std::thread(
      [this, step, wire_grads, wire_params] { step_status_ = ExchangeWire(step, wire_grads, wire_params, &feed_); });
  return absl::OkStatus();
}

void PsExchange::GradientReady(size_t offset, size_t count) { tracker_.Ready(offset, count); }

absl::StatusOr<trainer::ExchangeOutcome> PsExchange::FinishStep() {
  if (!step_thread_.joinable()) return absl::FailedPreconditionError("FinishStep without BeginStep");
  const absl::Status closed = tracker_.Close();
  step_thread_.join();
  RETURN_IF_ERROR(closed);
  RETURN_IF_ERROR(step_status_);
  FromWire(step_wire_params_, step_params_);
  return trainer::ExchangeOutcome::kParametersUpdated;
}

absl::Status PsExchange::ExchangeWire(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                                      const BucketFeed* feed) {
  return ForEachShard([&](Shard* shard) {
    const int64_t pushed_step = shard->next_step;
    absl::Status status = PushPullOnce(shard, step, grads, params, feed);
    const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
    while (NeedsReregistration(status) && absl::Now() < give_up) {
      // The shard restarted (or is restarting): join it again and push this gradient once more. The steps
      // since the shard's last checkpoint are lost, as after any resume from a checkpoint.
      std::fprintf(stderr, "ps rank %d: %s; re-registering\n", options_.rank,
                   std::string(status.message()).c_str());
      RETURN_IF_ERROR(RegisterWithRetries(shard, params));
      if (shard->next_step > pushed_step) {
        // The shard is past the step we pushed: it applied our gradient before the call broke (an async
        // push counted in the rank's clock, or a synchronous step completed and saved before a restart).
        // Pushing it again would apply it twice; registration already gave us the shard's parameters.
        std::fprintf(stderr, "ps rank %d: shard %d already applied step %lld; not pushing it again\n",
                     options_.rank, shard->index, static_cast<long long>(pushed_step));
        status = absl::OkStatus();
        break;
      }
      status = PushPullOnce(shard, step, grads, params, feed);
    }
    if (absl::IsAborted(status)) {
      // Skipped: the other ranks are past this step (see ps/service.h); take the shard's parameters.
      if (shard->skipped++ % kSkipReportEvery == 0) {
        std::fprintf(stderr, "ps rank %d: %s (%lld step(s) skipped on shard %d so far while catching up)\n",
                     options_.rank, std::string(status.message()).c_str(),
                     static_cast<long long>(shard->skipped), shard->index);
      }
      status = PullOnce(shard, params);
    } else if (status.ok()) {
      shard->skipped = 0;
    }
    return status;
  });
}

absl::Status PsExchange::PullOnce(Shard* shard, trainer::FloatBuffer params) {
  const std::string where = absl::StrCat("Pull from shard ", shard->index, " (", shard->address, ")");
  grpc::ClientContext context;
  const absl::Time deadline = PrepareContext(&context);
  proto::PullRequest request;
  *request.mutable_address() = Address(*shard);
  request.set_rank(options_.rank);
  SetSession(shard->session, &request);
  auto stream = shard->stub->Pull(&context, request);
  proto::PullReply reply;
  absl::Status received = absl::UnavailableError("stream ended without parameters");
  if (stream->Read(&reply) && reply.has_header() && reply.header().num_elements() == shard->range.size()) {
    shard->version = reply.header().version();
    received = ReadChunks<proto::PullReply>(stream.get(), params.data + shard->range.begin,
                                            shard->range.size(), &shard->bytes_received, "parameters");
  }
  while (!received.ok() && stream->Read(&reply)) {  // drain, so Finish() reports how the call ended
  }
  RETURN_IF_ERROR(FromCall(stream->Finish(), deadline, where));
  if (!received.ok()) return absl::Status(received.code(), absl::StrCat(where, ": ", received.message()));
  return absl::OkStatus();
}

absl::Status PsExchange::PullParameters(trainer::FloatBuffer params) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before PullParameters");
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  const trainer::FloatBuffer wire = ToWire(params, &wire_params_);
  RETURN_IF_ERROR(ForEachShard([&](Shard* shard) { return PullOnce(shard, wire); }));
  FromWire(wire, params);
  return absl::OkStatus();
}

absl::Status PsExchange::AverageMetrics(absl::Span<double> values) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before AverageMetrics");
  Shard& shard = shards_[0];
  grpc::ClientContext context;
  const absl::Time deadline = PrepareContext(&context);
  proto::MetricsRequest request;
  *request.mutable_address() = Address(shard);
  request.set_rank(options_.rank);
  SetSession(shard.session, &request);
  for (double v : values) request.add_values(v);
  proto::MetricsReply reply;
  RETURN_IF_ERROR(FromCall(shard.stub->AverageMetrics(&context, request, &reply), deadline,
                           absl::StrCat("AverageMetrics via shard 0 (", shard.address, ")")));
  if (reply.values_size() != static_cast<int>(values.size())) {
    return absl::InternalError(
        absl::StrCat("AverageMetrics returned ", reply.values_size(), " values, expected ", values.size()));
  }
  std::copy(reply.values().begin(), reply.values().end(), values.begin());
  return absl::OkStatus();
}

absl::Status PsExchange::Barrier() { return AverageMetrics(absl::Span<double>()); }

absl::Status PsExchange::ShutdownServers() {
  return ForEachShard([&](Shard* shard) {
    grpc::ClientContext context;
    const absl::Time deadline = PrepareContext(&context);
    proto::ShutdownReply reply;
    return FromCall(shard->stub->Shutdown(&context, proto::ShutdownRequest(), &reply), deadline,
                    absl::StrCat("Shutdown of shard ", shard->index, " (", shard->address, ")"));
  });
}

absl::StatusOr<proto::StatsReply> PsExchange::Stats(int shard) {
  if (shard < 0 || shard >= num_shards()) return absl::InvalidArgumentError("no such shard");
  grpc::ClientContext context;
  const absl::Time deadline = PrepareContext(&context);
  proto::StatsReply reply;
  RETURN_IF_ERROR(FromCall(shards_[shard].stub->Stats(&context, proto::StatsRequest(), &reply), deadline,
                           absl::StrCat("Stats of shard ", shard)));
  return reply;
}

}  // namespace psring::ps
