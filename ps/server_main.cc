// //ps:server — one shard of the parameter server.
//   bazel run //ps:server -- --port=50051 --workers=4 --shard=0 --num_shards=2 [--mode=async --staleness=2]
//   bazel run //ps:server -- --port=50051 --workers=4 --backup_workers=1   (steps average the first 3 pushes)
// Serves until a worker calls Shutdown (//ps:worker --shutdown_servers) or SIGINT/SIGTERM, then writes its
// checkpoint (with --checkpoint_dir) and prints its PSRING_RESULT line.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/auth.h"
#include "common/flags_usage.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/worker_result.h"
#include "proto/results.pb.h"
#include "ps/binary_main.h"
#include "ps/server.h"
#include "trainer/limits.h"

ABSL_FLAG(int, port, 50051, "TCP port to listen on; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, bind_addr, "",
          "Address to listen on (0.0.0.0: every interface). Empty: 127.0.0.1 without --auth_token (anyone who "
          "reaches an unauthenticated server can steer it), 0.0.0.0 with it.");
ABSL_FLAG(
    std::string, port_file, "",
    "When set, write the port actually bound to this file once serving (for launchers using --port=0).");
ABSL_FLAG(int, workers, psring::ps::ServiceOptions{}.workers, "Number of worker ranks N; a synchronous step waits for all N.");
ABSL_FLAG(int, shard, psring::ps::ServiceOptions{}.shard, "This server's shard index in [0, --num_shards).");
ABSL_FLAG(int, num_shards, psring::ps::ServiceOptions{}.num_shards, "Number of server shards K the parameters are split over (contiguous ranges).");
ABSL_FLAG(std::string, mode, "sync",
          "sync: average all N gradients of a step, then update; async: apply each push on arrival with "
          "bounded staleness (--staleness).");
ABSL_FLAG(
    int, staleness, psring::ps::ServiceOptions{}.staleness,
    "Async mode: a worker may run at most this many steps ahead of the slowest; 0 behaves exactly as sync.");
ABSL_FLAG(
    int, backup_workers, psring::ps::ServiceOptions{}.backup_workers,
    "Sync mode: B backup workers (0 <= B < --workers), as TensorFlow's SyncReplicasOptimizer: each step "
    "averages the first N - B pushes that arrive whole (their sum divided by N - B) and drops the rest; "
    "a dropped worker gets the current parameters at once and goes on. 0: every step waits for all N.");
ABSL_FLAG(double, step_timeout, absl::ToDoubleSeconds(psring::ps::ServiceOptions{}.step_timeout),
          "Seconds a step (or metrics barrier) waits for the other workers before failing their calls with "
          "DEADLINE_EXCEEDED (a dead worker); the server keeps serving. Leave room for a restarted server: "
          "its workers re-register within about 0.5 s of it accepting connections (README, Recovery).");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder for this shard's checkpoint (ps-shard-<i>-of-<K>.ckpt, written atomically); a restarted "
          "server resumes from it. Empty: no checkpoints.");
// Not ServiceOptions{}.checkpoint_every (0: only at shutdown): a server run by hand checkpoints periodically.
ABSL_FLAG(int64_t, checkpoint_every, 100,
          "Versions (optimizer steps) between checkpoints; 0: only at shutdown.");
ABSL_FLAG(
    std::string, auth_token, psring::ps::ServiceOptions{}.auth_token,
    "Shared secret (at least 16 bytes): every call must prove it (a challenge-response and per-call MACs; "
    "the token itself never crosses the wire), else it fails with UNAUTHENTICATED. Empty: --auth_token_file, "
    "else the environment's PSRING_AUTH_TOKEN, else off. Prefer those two: a flag is readable by every local "
    "user in /proc/<pid>/cmdline.");
ABSL_FLAG(std::string, auth_token_file, "", "File holding the shared secret (instead of --auth_token).");
ABSL_FLAG(bool, insecure, false,
          "Allow a token without TLS on an address other than loopback (the token never crosses the network, but "
          "the tensors then cross it in clear and unprotected; only on a trusted network).");
ABSL_FLAG(double, first_message_timeout,
          absl::ToDoubleSeconds(psring::ps::ServiceOptions{}.first_message_timeout),
          "Seconds a call may wait for its first message (and an offer of initial parameters for each next "
          "chunk) before the server cancels it: a client that opens calls and sends nothing gets no thread.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for TLS (with --tls_key). Empty: plaintext.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for TLS (with --tls_cert).");
ABSL_FLAG(int64_t, chunk_bytes, psring::ps::ServiceOptions{}.chunk_bytes,
          "Bytes per parameter chunk streamed back to workers (4 .. 4194304).");
ABSL_FLAG(uint64_t, max_params, psring::ps::ServiceOptions{}.max_params,
          "Largest model (total parameters, all shards) a worker may register; bounds the memory one call can "
          "make this server allocate (default 2^30 floats = 4 GiB).");
ABSL_FLAG(double, max_grad_norm, psring::ps::ServiceOptions{}.max_grad_norm,
          "Refuse a pushed gradient whose L2 norm on this shard exceeds this (the push fails with a message "
          "naming rank, step and norm, nothing of it is applied, and the server goes on); training never comes "
          "near the default. inf: no bound.");
ABSL_FLAG(int64_t, grpc_memory_mb, 0,
          "MiB of memory gRPC's buffers may take (its ResourceQuota): beyond it gRPC shrinks flow-control windows "
          "and cancels streams, so callers who send without being read (authenticated or not) cannot grow this "
          "server without bound. 0: 64 + 8 per worker.");
ABSL_FLAG(int64_t, receive_window_bytes, psring::ps::ServerOptions{}.receive_window_bytes,
          "HTTP/2 receive window of every call's stream (16384 .. 1073741823), with gRPC's BDP probing off: what a "
          "caller can make this server buffer per call before it is authenticated. It does not widen a push: with "
          "probing off gRPC 1.51 keeps each connection's window at its 64 KiB default, so a worker's push moves "
          "about 64-75 KiB per round trip whatever this is (ps-1 at 40 ms one-way: ~0.9 MB/s a worker, the same "
          "at 4 and 16 MiB). Where a worker's share of the bandwidth-delay product is larger, push larger "
          "messages (--chunk_bytes of 256 KiB and up on the workers and here) or pass 0 (bench/PERFORMANCE.md "
          "9.9). 0: gRPC's adaptive, BDP-probed window.");
ABSL_FLAG(int64_t, max_lead_bytes, psring::ps::ServiceOptions{}.max_lead_bytes,
          "Sync mode: stop reading a worker's push while it is more than this many bytes ahead of the slowest "
          "push of the step, so every worker gets a fair share of this server's link (0: no limit).");

namespace psring::ps {
namespace {

absl::Status Run() {
  ServerOptions options;
  ASSIGN_OR_RETURN(const std::string token,
                   LoadAuthToken(absl::GetFlag(FLAGS_auth_token), absl::GetFlag(FLAGS_auth_token_file)));
  options.bind_addr = absl::GetFlag(FLAGS_bind_addr);
  if (options.bind_addr.empty()) {
    if (token.empty()) {
      options.bind_addr = "127.0.0.1";
      std::fprintf(stderr,
                   "ps server: no --auth_token, so listening on loopback only; give --auth_token (or "
                   "--bind_addr=0.0.0.0 on a trusted network) to serve other hosts\n");
    } else {
      options.bind_addr = "0.0.0.0";
    }
  }
  // The rule off loopback every psring program applies (common/auth.h).
  RETURN_IF_ERROR(RequireTokenOffLoopback("ps server", options.bind_addr, !token.empty(),
                                          absl::GetFlag(FLAGS_insecure)));
  options.port = absl::GetFlag(FLAGS_port);
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port=", options.port, " must be in [0, 65535] (0: a free port)"));
  }
  if (absl::GetFlag(FLAGS_grpc_memory_mb) != 0 &&
      (absl::GetFlag(FLAGS_grpc_memory_mb) < 16 || absl::GetFlag(FLAGS_grpc_memory_mb) > (int64_t{1} << 20))) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc_memory_mb=", absl::GetFlag(FLAGS_grpc_memory_mb),
                                                   " must be 0 (64 + 8 per worker) or in [16, 1048576]"));
  }
  options.max_memory_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_grpc_memory_mb)) << 20;
  const int64_t window = absl::GetFlag(FLAGS_receive_window_bytes);
  if (window != 0 && (window < 16384 || window > 1073741823)) {
    return absl::InvalidArgumentError(absl::StrCat("--receive_window_bytes=", window,
                                                   " must be 0 (gRPC's adaptive window) or in [16384, 1073741823]"));
  }
  options.receive_window_bytes = static_cast<size_t>(window);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  if (!token.empty() && options.tls_cert_file.empty() && !IsLoopbackHost(options.bind_addr)) {
    // The calls prove the token without sending it (ps/call_auth.h), but only TLS keeps the tensors from being
    // read or changed on the path.
    if (!absl::GetFlag(FLAGS_insecure)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a token without TLS on ", options.bind_addr,
          " would send the tensors in clear, where anyone on the path can read or change them; "
          "give --tls_cert/--tls_key (and --tls_ca to the workers), --bind_addr=127.0.0.1, or --insecure on a "
          "trusted network"));
    }
    std::fprintf(stderr,
                 "ps server: warning: --insecure: the tensors cross the network to %s in clear\n",
                 options.bind_addr.c_str());
  }
  ServiceOptions& s = options.service;
  s.shard = absl::GetFlag(FLAGS_shard);
  s.num_shards = absl::GetFlag(FLAGS_num_shards);
  if (s.num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--num_shards=", s.num_shards, " must be >= 1"));
  }
  s.workers = absl::GetFlag(FLAGS_workers);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "sync") {
    s.mode = Mode::kSync;
  } else if (mode == "async") {
    s.mode = Mode::kAsync;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--mode=", mode, ": use sync or async"));
  }
  s.staleness = absl::GetFlag(FLAGS_staleness);
  s.backup_workers = absl::GetFlag(FLAGS_backup_workers);
  ASSIGN_OR_RETURN(s.step_timeout, trainer::TimeoutFromSeconds("step_timeout", absl::GetFlag(FLAGS_step_timeout)));
  s.max_params = absl::GetFlag(FLAGS_max_params);
  s.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  s.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  s.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  if (s.checkpoint_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint_every=", s.checkpoint_every,
                                                   " must be >= 0 (0: only at shutdown)"));
  }
  s.auth_token = token;
  ASSIGN_OR_RETURN(s.first_message_timeout, trainer::TimeoutFromSeconds("first_message_timeout",
                                                                        absl::GetFlag(FLAGS_first_message_timeout)));
  if (absl::GetFlag(FLAGS_chunk_bytes) <= 0) return absl::InvalidArgumentError("--chunk_bytes must be > 0");
  s.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_bytes));
  if (absl::GetFlag(FLAGS_max_lead_bytes) < 0) {
    return absl::InvalidArgumentError("--max_lead_bytes must be >= 0 (0: no limit)");
  }
  s.max_lead_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_lead_bytes));

  // SIGINT/SIGTERM are taken synchronously by one thread (blocked everywhere else, including gRPC's threads,
  // which inherit this mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ASSIGN_OR_RETURN(std::unique_ptr<PsServer> server, PsServer::Start(options));
  const std::string backup = s.backup_workers > 0 ? absl::StrCat(", ", s.backup_workers, " backup") : "";
  std::fprintf(stderr, "ps server: shard %d of %d (%s, %d workers%s) listening on %s:%d\n", s.shard,
               s.num_shards, mode.c_str(), s.workers, backup.c_str(), options.bind_addr.c_str(),
               server->port());
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    // A fresh temporary file (O_EXCL | O_NOFOLLOW, 0600) renamed over the path: never through a planted
    // symlink, and a reader sees the whole port or nothing.
    const std::string path = absl::GetFlag(FLAGS_port_file);
    RETURN_IF_ERROR(Annotate(WriteFileAtomically(path, absl::StrCat(server->port(), "\n")),
                             absl::StrCat("cannot write --port_file=", path)));
  }

  std::atomic<bool> done{false};
  std::atomic<int> got_signal{0};
  std::thread signal_thread([&] {
    const timespec poll{0, 200 * 1000 * 1000};
    while (!done) {
      const int sig = sigtimedwait(&signals, nullptr, &poll);
      if (sig > 0) {
        got_signal = sig;
        server->service()->RequestShutdown();
        return;
      }
    }
  });
  while (!server->service()->WaitForShutdownRequest(absl::Seconds(1))) {
  }
  done = true;
  signal_thread.join();
  std::fprintf(stderr, "ps server: shard %d shutting down (%s)\n", s.shard,
               got_signal ? "signal" : "Shutdown request");
  RETURN_IF_ERROR(server->Stop(/*write_checkpoint=*/true));
  const proto::StatsReply stats = server->service()->GetStats();
  ::psring::proto::ServerResult result;
  result.set_shard(s.shard);
  result.set_num_shards(s.num_shards);
  result.set_mode(stats.mode());
  result.set_version(static_cast<double>(stats.version()));
  result.set_bytes_sent(static_cast<double>(stats.bytes_sent()));
  result.set_bytes_received(static_cast<double>(stats.bytes_received()));
  if (s.backup_workers > 0) {
    result.set_backup_workers(s.backup_workers);
    result.set_dropped_pushes(static_cast<double>(stats.dropped_pushes()));
    for (uint64_t dropped : stats.dropped_by_rank()) result.add_dropped_by_rank(static_cast<double>(dropped));
    std::fprintf(stderr, "ps server: shard %d dropped %llu push(es) whose step had closed (per rank: %s)\n",
                 s.shard, static_cast<unsigned long long>(stats.dropped_pushes()),
                 absl::StrJoin(stats.dropped_by_rank(), ",").c_str());
  }
  return PrintResultLine(result);
}

}  // namespace
}  // namespace psring::ps

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "One shard of the psring parameter server.\n"
      "  bazel run //ps:server -- --port=50051 --workers=4 --shard=0 --num_shards=2 [--mode=async "
      "--staleness=2]",
      {"common/", "ps/"});
  return psring::ps::RunMain(argc, argv, "ps server",
                             [](const std::vector<std::string>&) { return psring::ps::Run(); });
}
