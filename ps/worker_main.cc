// //ps:worker — one training rank whose gradients go through the parameter servers.
//   bazel run //ps:worker -- --servers=h1:50051,h2:50051 --rank=0 --world_size=4 [training flags]
// Rank and world size come from --rank/--world_size or from mpirun, Slurm or torchrun-style env
// (common/cluster_env.h). With --model_bytes=S it trains nothing and pushes S bytes of gradients instead
// (gradient-only mode, trainer/gradient_only.h). Prints one PSRING_RESULT line at the end. The flow and the
// flags every worker shares are trainer/worker_main.h's; this file builds the parameter-server client.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/flags_usage.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "ps/client.h"
#include "ps/wire.h"
#include "trainer/worker_main.h"

ABSL_FLAG(std::string, servers, "127.0.0.1:50051",
          "Comma-separated host:port of every parameter-server shard, in shard order (shard 0 first).");
ABSL_FLAG(bool, shutdown_servers, false,
          "At the end, rank 0 (after a barrier) asks every server to checkpoint and exit.");
ABSL_FLAG(std::string, auth_token, psring::ps::PsClientOptions{}.auth_token,
          "The servers' shared secret (at least 16 bytes), proven to each server and per call, never sent. Empty: "
          "--auth_token_file, else the environment's PSRING_AUTH_TOKEN (both keep it off the command line).");
ABSL_FLAG(std::string, auth_token_file, "", "File holding the shared secret (instead of --auth_token).");
ABSL_FLAG(bool, insecure, false,
          "Allow a token without TLS (--tls_ca) to servers off loopback: the token is never sent, but the tensors "
          "cross the network in clear (only on a trusted network).");
ABSL_FLAG(std::string, tls_ca, psring::ps::PsClientOptions{}.tls_ca_file,
          "PEM root certificate to verify the servers' TLS certificates. Empty: plaintext.");
ABSL_FLAG(std::string, tls_target_name, psring::ps::PsClientOptions{}.tls_target_name,
          "Name to check the servers' certificate against instead of the host in --servers.");
ABSL_FLAG(int64_t, chunk_bytes, psring::ps::PsClientOptions{}.chunk_bytes,
          "Bytes per gradient chunk on the wire (4 .. 4194304). On links of 1 Gbit/s or less use 32768 here "
          "and on the servers (a step pays about 2 * workers * chunk / link rate to fill and drain).");
ABSL_FLAG(int64_t, push_window_bytes, psring::ps::PsClientOptions{}.push_window_bytes,
          "Synchronous servers: push at most this many bytes ahead of the updated parameters received back, so "
          "no worker runs far ahead of the slowest and the server link is shared fairly whatever TCP and gRPC "
          "buffer. Raised to at least one chunk of ours plus one reply range of the server's. 0: no window. On "
          "links of 1 Gbit/s or less use 131072: N workers keep up to N windows in flight into one server link, "
          "and more than its queue holds costs tail drops and retransmission timeouts (bench/PERFORMANCE.md "
          "7.1).");
ABSL_FLAG(int64_t, receive_window_bytes, psring::ps::PsClientOptions{}.receive_window_bytes,
          "HTTP/2 receive window per server connection (bytes, 16384 .. 1073741823), with gRPC's BDP probing "
          "off: at most this much of this worker's replies is queued for it in the server, which keeps the push "
          "window's loop tight on a slow shared link. Must cover the link's bandwidth-delay product. 0: gRPC's "
          "adaptive window.");

namespace psring::ps {
namespace {

absl::StatusOr<size_t> NonNegativeBytes(const char* flag, int64_t value) {
  if (value < 0) return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": must be >= 0"));
  return static_cast<size_t>(value);
}

absl::StatusOr<trainer::WorkerExchange> ConnectServers(const trainer::WorkerOptions& worker) {
  PsClientOptions options;
  ASSIGN_OR_RETURN(options.servers, ParseServerList(absl::GetFlag(FLAGS_servers)));
  options.rank = worker.env.rank;
  options.world_size = worker.env.world_size;
  options.hyperparameters = {worker.train.lr, worker.train.momentum, worker.train.weight_decay};
  options.timeout = worker.timeout;
  options.reconnect_timeout = worker.timeout;
  ASSIGN_OR_RETURN(options.chunk_bytes, NonNegativeBytes("chunk_bytes", absl::GetFlag(FLAGS_chunk_bytes)));
  ASSIGN_OR_RETURN(options.push_window_bytes,
                   NonNegativeBytes("push_window_bytes", absl::GetFlag(FLAGS_push_window_bytes)));
  ASSIGN_OR_RETURN(options.receive_window_bytes,
                   NonNegativeBytes("receive_window_bytes", absl::GetFlag(FLAGS_receive_window_bytes)));
  ASSIGN_OR_RETURN(options.auth_token,
                   LoadAuthToken(absl::GetFlag(FLAGS_auth_token), absl::GetFlag(FLAGS_auth_token_file)));
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_target_name = absl::GetFlag(FLAGS_tls_target_name);
  // The rule off loopback every psring program applies (common/auth.h).
  for (const std::string& server : options.servers) {
    absl::StatusOr<HostPort> address = ParseHostPort(server, "--servers entry");
    if (!address.ok()) continue;  // reported where the servers are dialled
    RETURN_IF_ERROR(RequireTokenOffLoopback("ps worker", address->host, !options.auth_token.empty(),
                                            absl::GetFlag(FLAGS_insecure)));
  }
  if (!options.auth_token.empty() && options.tls_ca_file.empty()) {
    for (const std::string& server : options.servers) {
      absl::StatusOr<HostPort> address = ParseHostPort(server, "--servers entry");
      if (address.ok() && IsLoopbackHost(address->host)) continue;
      if (!absl::GetFlag(FLAGS_insecure)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the tensors would cross the network to ", server, " in clear, where anyone on the path can read or "
            "change them (the token itself is never sent); give --tls_ca (servers with --tls_cert/--tls_key), or "
            "--insecure on a trusted network"));
      }
      if (worker.env.rank == 0) {
        std::fprintf(stderr, "ps worker: warning: --insecure: the tensors cross the network to %s in clear\n",
                     server.c_str());
      }
      break;
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> client, PsExchange::Create(options));
  trainer::WorkerExchange made;
  if (absl::GetFlag(FLAGS_shutdown_servers)) {
    made.finish = [client = client.get(), rank = worker.env.rank]() -> absl::Status {
      RETURN_IF_ERROR(client->Barrier());  // every rank is done with the servers
      return rank == 0 ? client->ShutdownServers() : absl::OkStatus();
    };
  }
  made.exchange = std::move(client);
  return made;
}

}  // namespace
}  // namespace psring::ps

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "A psring training rank that exchanges gradients through the parameter servers.\n"
      "  bazel run //ps:worker -- --servers=h1:50051,h2:50051 --rank=0 --world_size=4 --epochs=2\n"
      "  bazel run //ps:worker -- --servers=... --model_bytes=67108864   (gradient-only mode)\n"
      "Rank and world size may come from mpirun, Slurm or torchrun-style env instead of flags. The PS needs "
      "no rendezvous: --master_addr/--master_port are accepted but unused.",
      {"common/", "trainer/", "ps/"});
  psring::ps::TuneMallocForTensors();
  psring::ps::QuietGrpcLogs();
  return psring::trainer::WorkerMain(argc, argv, "ps worker", psring::ps::ConnectServers);
}
