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
  // (more wait in the client). Idle connections are closed after max_connection_idle, dead peers found by
  // keepalive pings, and a connection that has not finished its TLS/HTTP2 handshake within
  // handshake_timeout is dropped.
  int max_threads = 0;
  int max_streams_per_connection = 32;
  absl::Duration max_connection_idle = absl::Minutes(5);
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
