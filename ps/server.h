// A running parameter-server shard: the gRPC server around ParameterServerService, listening on one port.
//
//   ServerOptions options;  options.service.workers = 4;  options.port = 0;  // 0: the kernel picks
//   ASSIGN_OR_RETURN(std::unique_ptr<PsServer> server, PsServer::Start(options));
//   ... server->port() ...
//   server->WaitForShutdownRequest(...);     // a Shutdown RPC
//   RETURN_IF_ERROR(server->Stop(/*write_checkpoint=*/true));
//
// Thread-safety: port()/service() from any thread; Stop() once, from one thread.
#ifndef PSRING_PS_SERVER_H_
#define PSRING_PS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "ps/service.h"

namespace psring::ps {

struct ServerOptions {
  ServiceOptions service;
  std::string bind_addr = "0.0.0.0";
  int port = 0;  // 0: any free port (see PsServer::port())
  // TLS when both are set (PEM files); otherwise plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Resource bounds against callers that open calls and hold them (a sync server spends a thread per call):
  // at most this many server threads (0: 64 + 8 per worker; a call beyond it fails at once with
  // RESOURCE_EXHAUSTED, which clients retry), and at most this many concurrent calls per connection
  // (more wait in the client). gRPC's buffers take at most max_memory_bytes (its ResourceQuota: under
  // pressure it shrinks flow-control windows and, at the limit, cancels streams; 0: 64 MiB + 8 MiB per
  // worker; with gRPC's adaptive windows, 2,000 unauthenticated 8 MB calls grew a 2-worker server's RSS by
  // 394 MiB at 272 MiB of quota and by 57 MiB at 64 MiB: tests/ps/unary_flood_test.cc). Every stream's
  // receive window is receive_window_bytes (below). Idle connections are closed after max_connection_idle,
  // every connection is asked to go away after max_connection_age (its calls finish; clients reconnect),
  // dead peers are found by keepalive pings, and a connection that has not finished its TLS/HTTP2 handshake
  // within handshake_timeout is dropped. gRPC 1.51 offers no cap on connections per peer or in all (GRPC_ARG_MAX_ALLOWED_INCOMING_
  // CONNECTIONS came later): a connection costs nothing until it makes calls, and its calls are bounded by
  // the limits above (unauthenticated ones are refused before anything is read; ps/service.h).
  int max_threads = 0;
  int max_streams_per_connection = 32;
  size_t max_memory_bytes = 0;
  // HTTP/2 receive window of every stream (gRPC's BDP probing off): what a caller can make the server buffer
  // per call without its handler reading, and the most a push has in flight toward the server per stream
  // (4 MiB covers a 1 ms round trip at 32 Gbit/s). 0: gRPC's BDP-grown window (2,000 unauthenticated 8 MB
  // calls then grew a 2-worker server's RSS by 51 to 191 MiB, against 11 to 13 MiB with 4 MiB).
  size_t receive_window_bytes = 4 << 20;
  absl::Duration max_connection_idle = absl::Seconds(30);
  absl::Duration max_connection_age = absl::Minutes(10);
  absl::Duration keepalive_time = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  absl::Duration handshake_timeout = absl::Seconds(10);
};

class PsServer {
 public:
  // Loads the shard checkpoint if any, binds and starts serving. PortInUseError (common/exit_codes.h) when
  // another process holds the port, kInvalidArgument for an address not on this host or an unusable TLS
  // certificate or key.
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const ServerOptions& options);
  ~PsServer();  // Stop(false) unless stopped

  int port() const { return port_; }
  ParameterServerService* service() { return service_.get(); }

  // Fails waiting calls with UNAVAILABLE, stops gRPC (in-flight calls get `grace`, then are cancelled) and,
  // when write_checkpoint, saves the shard. Blocks until every handler has returned. Stop(false) is how
  // tests emulate a crash.
  absl::Status Stop(bool write_checkpoint, absl::Duration grace = absl::Seconds(2));

 private:
  PsServer() = default;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace psring::ps

#endif  // PSRING_PS_SERVER_H_
