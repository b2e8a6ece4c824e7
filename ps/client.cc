// PsExchange (ps/client.h): channels, the calls every part shares, pulls, metrics, shutdown and stats.
// Registration and the PushPull streams of a step: client_registration.cc, client_streaming.cc.
#include "ps/client.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace psring::ps {

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
    : options_(options), ps_key_(PsKeyFromToken(options.auth_token)),
      chunk_elements_(options.chunk_bytes / sizeof(float)), name_(options.name) {}

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

absl::Status PsExchange::EnsureChannel(Shard* shard) {
  if (ps_key_.empty() || shard->credential != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ChannelCredential>> credential = ChannelCredential::Open(
      shard->stub.get(), ps_key_, options_.rank, options_.world_size, Address(*shard), absl::Now() + options_.timeout);
  if (!credential.ok()) {
    return Annotate(credential.status(),
                    absl::StrCat("Authenticate with shard ", shard->index, " (", shard->address, ")"));
  }
  shard->credential = std::move(*credential);
  return absl::OkStatus();
}

absl::Time PsExchange::PrepareContext(Shard* shard, grpc::ClientContext* context, absl::string_view method,
                                      const std::string& fields) const {
  const absl::Time deadline = absl::Now() + options_.timeout;
  context->set_deadline(absl::ToChronoTime(deadline));
  if (shard->credential != nullptr) shard->credential->Sign(context, method, fields);
  return deadline;
}

absl::Status PsExchange::CallResult(Shard* shard, const grpc::Status& status, absl::Time deadline,
                                    const std::string& where) {
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) shard->credential.reset();
  return FromCall(status, deadline, where);
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

absl::Status PsExchange::PullOnce(Shard* shard, trainer::FloatBuffer params) {
  const std::string where = absl::StrCat("Pull from shard ", shard->index, " (", shard->address, ")");
  RETURN_IF_ERROR(EnsureChannel(shard));
  grpc::ClientContext context;
  proto::PullRequest request;
  *request.mutable_address() = Address(*shard);
  request.set_rank(options_.rank);
  SetSession(shard->session, &request);
  const absl::Time deadline = PrepareContext(shard, &context, "Pull", PullFields(request));
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
  RETURN_IF_ERROR(CallResult(shard, stream->Finish(), deadline, where));
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
  RETURN_IF_ERROR(EnsureChannel(&shard));
  grpc::ClientContext context;
  proto::MetricsRequest request;
  *request.mutable_address() = Address(shard);
  request.set_rank(options_.rank);
  SetSession(shard.session, &request);
  for (double v : values) request.add_values(v);
  const absl::Time deadline = PrepareContext(&shard, &context, "AverageMetrics", MetricsFields(request));
  proto::MetricsReply reply;
  RETURN_IF_ERROR(CallResult(&shard, shard.stub->AverageMetrics(&context, request, &reply), deadline,
                             absl::StrCat("AverageMetrics via shard 0 (", shard.address, ")")));
  if (reply.values_size() != static_cast<int>(values.size())) {
    return absl::InternalError(
        absl::StrCat("AverageMetrics returned ", reply.values_size(), " values, expected ", values.size()));
  }
  std::copy(reply.values().begin(), reply.values().end(), values.begin());
  return absl::OkStatus();
}

int64_t PsExchange::TakeSkippedSteps() {
  if (shards_.empty()) return 0;
  int64_t ahead = shards_.front().steps_ahead;
  for (const Shard& shard : shards_) ahead = std::min(ahead, shard.steps_ahead);
  for (Shard& shard : shards_) shard.steps_ahead -= ahead;
  return ahead;
}

uint64_t PsExchange::dropped_pushes() const {
  uint64_t dropped = 0;
  for (const Shard& shard : shards_) dropped += shard.dropped_pushes;
  return dropped;
}

absl::Status PsExchange::Barrier() { return AverageMetrics(absl::Span<double>()); }

absl::Status PsExchange::ShutdownServers() {
  return ForEachShard([&](Shard* shard) {
    RETURN_IF_ERROR(EnsureChannel(shard));
    grpc::ClientContext context;
    const absl::Time deadline = PrepareContext(shard, &context, "Shutdown");
    proto::ShutdownReply reply;
    return CallResult(shard, shard->stub->Shutdown(&context, proto::ShutdownRequest(), &reply), deadline,
                      absl::StrCat("Shutdown of shard ", shard->index, " (", shard->address, ")"));
  });
}

absl::StatusOr<proto::StatsReply> PsExchange::Stats(int shard) {
  if (shard < 0 || shard >= num_shards()) return absl::InvalidArgumentError("no such shard");
  Shard* s = &shards_[shard];
  RETURN_IF_ERROR(EnsureChannel(s));
  grpc::ClientContext context;
  const absl::Time deadline = PrepareContext(s, &context, "Stats");
  proto::StatsReply reply;
  RETURN_IF_ERROR(CallResult(s, s->stub->Stats(&context, proto::StatsRequest(), &reply), deadline,
                             absl::StrCat("Stats of shard ", shard)));
  return reply;
}

}  // namespace psring::ps
