#include "ps/server.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"
#include "common/exit_codes.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "ps/checkpoint.h"
#include "ps/wire.h"

namespace psring::ps {
namespace {

// gRPC reports every failure to add a listening port (a busy port, an address not on this host, a TLS key
// or certificate it cannot use) only as no server / port 0, and the reason at most in its log. Binding the
// same address ourselves tells the first two apart from the rest.
absl::Status WhyNotListening(const ServerOptions& options, const std::string& address) {
  if (options.port != 0) {
    absl::StatusOr<Socket> probe = ListenTcp(options.bind_addr, options.port);
    if (IsPortInUse(probe.status())) {
      return PortInUseError(absl::StrCat("cannot listen on ", address,
                                         ": the port is in use by another process; pick another --port"));
    }
    if (absl::IsInvalidArgument(probe.status())) {
      return Annotate(probe.status(), absl::StrCat("cannot listen on ", address, " (--bind_addr)"));
    }
  }
  if (!options.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gRPC cannot serve TLS on ", address, " with --tls_cert=", options.tls_cert_file, " and --tls_key=",
        options.tls_key_file, "; they must be a PEM certificate (chain) and its matching PEM private key"));
  }
  return absl::InternalError(absl::StrCat("gRPC cannot listen on ", address,
                                          "; run again with GRPC_VERBOSITY=debug to see gRPC's reason"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  std::unique_ptr<PsServer> server(new PsServer());
  const ServiceOptions& s = options.service;
  const std::string checkpoint =
      s.checkpoint_dir.empty() ? "" : ShardCheckpointPath(s.checkpoint_dir, s.shard, s.num_shards);
  std::error_code ignored;
  const bool resuming = !checkpoint.empty() && std::filesystem::exists(checkpoint, ignored);
  ASSIGN_OR_RETURN(server->service_, ParameterServerService::Create(s));
  if (resuming) {
    // Workers that connect now continue from this version, not from their own step 0: say so.
    std::fprintf(stderr,
                 "ps shard %d: resumed from %s at version %llu (parameters and momentum); workers continue "
                 "from there (another --checkpoint_dir starts afresh)\n",
                 s.shard, checkpoint.c_str(), static_cast<unsigned long long>(server->service_->version()));
  }

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
    if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("TLS needs both --tls_cert and --tls_key");
    }
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.private_key, ReadTextFile(options.tls_key_file));
    ASSIGN_OR_RETURN(pair.cert_chain, ReadTextFile(options.tls_cert_file));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    credentials = grpc::SslServerCredentials(ssl);
  }

  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.bind_addr, ":", options.port);
  builder.AddListeningPort(address, credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC sets SO_REUSEPORT by default: a second server on a busy port would start and silently share the
  // port's connections with the first (two shards on one port). Make it fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Bounded whatever callers do (ps/service.h, CheckAuth): threads, gRPC's memory, calls per connection,
  // connections that idle, age or die, handshakes that never finish. Messages are bounded by
  // kMaxMessageBytes above and a call's first message by ServiceOptions::first_message_timeout.
  grpc::ResourceQuota quota("psring-ps-server");
  quota.SetMaxThreads(options.max_threads > 0 ? options.max_threads : 64 + 8 * s.workers);
  quota.Resize(options.max_memory_bytes > 0
                   ? options.max_memory_bytes
                   : (size_t{64} << 20) + (size_t{8} << 20) * static_cast<size_t>(s.workers));
  builder.SetResourceQuota(quota);
  const auto ms = [](absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(options.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ms(options.max_connection_age));
  // A fixed receive window per stream instead of gRPC's BDP-grown one (megabytes per stream on loopback): a
  // stream whose handler refuses it unread (an unauthenticated call) buffers at most this much here.
  if (options.receive_window_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(options.receive_window_bytes));
  }
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(options.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(options.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ms(options.handshake_timeout));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) return WhyNotListening(options, address);
  return server;
}

absl::Status PsServer::Stop(bool write_checkpoint, absl::Duration grace) {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  service_->BeginShutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  if (write_checkpoint) return service_->WriteCheckpoint();
  return absl::OkStatus();
}

PsServer::~PsServer() {
  if (!stopped_ && server_ != nullptr) Stop(false).IgnoreError();
}

}  // namespace psring::ps
