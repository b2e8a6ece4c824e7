// //ring:ring_worker — one training rank whose gradients are averaged by ring allreduce (TCP ring on CPU,
// NCCL on GPU). Rank, world size and master come from flags or the launcher's environment (mpirun, Slurm,
// torchrun-style; common/cluster_env.h). Rank 0 serves the rendezvous store, prints progress and the test
// accuracy, and alone writes checkpoints. With --model_bytes=S it trains nothing and allreduces S bytes of
// checked values instead (gradient-only mode). Every rank prints one PSRING_RESULT line at the end. The flow
// and the flags every worker shares are trainer/worker_main.h's; this file builds the ring.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "ring/ring_exchange.h"
#include "trainer/cuda_engine.h"
#include "trainer/engine.h"
#include "trainer/worker_main.h"

ABSL_FLAG(
    std::string, iface_addr, psring::ring::TcpRingOptions{}.iface_addr,
    "IPv4 address this rank binds its ring socket to and publishes to its neighbours (rank 0 also binds "
    "the rendezvous store there). Empty: 127.0.0.1 when the master is on loopback, else the local "
    "address that routes to --master_addr. Empty with a master that is not on loopback: the store "
    "listens on every interface; with a loopback master, on every interface with --auth_token and on "
    "127.0.0.1 without one.");
ABSL_FLAG(std::string, ring_transport, "",
          "tcp (the ring over TCP, host memory) or nccl (NCCL on the GPU; needs a CUDA build and a GPU). "
          "Empty or auto: nccl when every rank trains on a GPU of its own, otherwise tcp; one decision for "
          "the whole job (rank 0's), and an error when ranks ask for different transports.");
ABSL_FLAG(int64_t, segment_bytes, psring::ring::RingOptions{}.segment_bytes,
          "TCP ring: bytes per pipelined segment (>= 8; smaller: more overlap between links, more system "
          "calls).");
ABSL_FLAG(
    int, socket_buffer_bytes, psring::ring::TcpRingOptions{}.socket_buffer_bytes,
    "TCP ring: SO_SNDBUF/SO_RCVBUF per connection. 0: the kernel's autotuning (grows to tcp_wmem/tcp_rmem's "
    "maximum, measured fastest on loopback); > 0: that size, capped by net.core.[rw]mem_max.");

ABSL_FLAG(std::string, auth_token, "",
          "Shared secret of the job (at least 16 bytes): every rank proves it (HMAC-SHA256 challenge-response "
          "over fresh nonces under a key derived for the ring; the secret never crosses the wire) to the "
          "rendezvous store and to its ring neighbours, and a connection that cannot is refused. Empty: "
          "--auth_token_file, else the PSRING_AUTH_TOKEN environment variable (prefer those two: a flag is "
          "readable by every local user in /proc/<pid>/cmdline), else no authentication, which only a "
          "loopback master and --iface_addr allow (or --insecure). Never printed.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the shared secret (instead of --auth_token); mode 600, not a symbolic link.");
ABSL_FLAG(bool, insecure, false,
          "Allow a job without a token on a --master_addr or --iface_addr that is not loopback: anyone who "
          "reaches the store or a ring port can then join or steer the job (only on a trusted network).");
ABSL_FLAG(
    std::string, job_id, "",
    "Names the job (at most 256 bytes): ranks and stores of another job id refuse each other even with "
    "the same token. Empty: the PSRING_JOB_ID environment variable, else \"psring-port-<master "
    "port>\" (every rank of a job reaches the same master port; jobs on one master host differ in it).");
ABSL_FLAG(
    std::string, data_integrity, "on",
    "on or off. With a token: every store message and ring segment after the handshake carries a "
    "Poly1305 tag under per-connection, per-direction keys derived from the handshake, so a change on the "
    "way fails the job naming the link (common/integrity.h). Not encryption. off: only the handshake is "
    "authenticated (measured cost of on: README). Every rank must agree. NCCL links are never covered.");

namespace psring::ring {
namespace {

// What every rank must agree on (ring/job_fingerprint.h): the optimizer, the model, the workload and the
// device kind asked for. A rank with another value would average gradients of another model or optimizer.
JobFingerprint WorkerFingerprint(const trainer::WorkerOptions& w) {
  const trainer::TrainOptions& t = w.train;
  return {
      {"lr", FingerprintValue(t.lr)},
      {"momentum", FingerprintValue(t.momentum)},
      {"weight_decay", FingerprintValue(t.weight_decay)},
      {"batch_size", absl::StrCat(t.batch_size)},
      {"hidden", absl::StrJoin(t.hidden, ",")},
      {"epochs", absl::StrCat(t.epochs)},
      {"max_steps", absl::StrCat(t.max_steps)},
      {"seed", absl::StrCat(t.seed)},
      {"dataset", t.dataset},
      {"synthetic_samples", absl::StrCat(t.synthetic_samples)},
      {"device", t.device},
      {"model_bytes", absl::StrCat(w.gradient_only.bytes)},
      {"warmup_steps", absl::StrCat(w.gradient_only.warmup_steps)},
      // Every rank must cut the gradient into the same buckets, or the per-bucket allreduces pair up wrong.
      {"bucket_mb", absl::StrCat(t.bucket_mb)},
      {"first_bucket_mb", absl::StrCat(t.first_bucket_mb)},
      {"segment_bytes", absl::StrCat(absl::GetFlag(FLAGS_segment_bytes))},
  };
}

absl::StatusOr<trainer::WorkerExchange> ConnectRing(const trainer::WorkerOptions& worker) {
  const int64_t segment = absl::GetFlag(FLAGS_segment_bytes);
  if (segment < 8) {
    return absl::InvalidArgumentError(absl::StrCat("--segment_bytes=", segment, ": must be >= 8"));
  }
  RingExchangeOptions options;
  // --device=cuda without a GPU: say which flag to change before anyone connects (when the local rank is
  // still to be derived, only once it is: probing makes a CUDA context, and it would be on GPU 0).
  const bool local_rank_known = !worker.env.local_rank_source.empty();
  if (worker.train.device == "cuda" && local_rank_known) {
    RETURN_IF_ERROR(trainer::ResolveDevice("cuda", nullptr).status());
  }
  ASSIGN_OR_RETURN(options.group.transport, ParseTransport(absl::GetFlag(FLAGS_ring_transport)));
  if (worker.train.device != "cpu") {
    options.select_gpu = [device = worker.train.device](
                             int local_rank, const std::string& source) -> absl::StatusOr<std::string> {
      RETURN_IF_ERROR(trainer::SelectCudaDevice(local_rank, source));
      if (device == "cuda") RETURN_IF_ERROR(trainer::ResolveDevice("cuda", nullptr).status());
      return trainer::CudaDeviceIdentity();
    };
  }
  options.group.tcp.iface_addr = absl::GetFlag(FLAGS_iface_addr);
  options.group.tcp.timeout = worker.timeout;
  options.group.tcp.socket_buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  options.group.ring.timeout = worker.timeout;
  options.group.ring.segment_bytes = static_cast<size_t>(segment);
  options.store_bind_addr = options.group.tcp.iface_addr;
  ASSIGN_OR_RETURN(options.group.tcp.auth,
                   AuthConfigFrom(absl::GetFlag(FLAGS_auth_token), absl::GetFlag(FLAGS_auth_token_file),
                                  absl::GetFlag(FLAGS_job_id)));
  AuthConfig& auth = options.group.tcp.auth;
  // The store and the ring ports listen where the ranks meet: the master's address, and --iface_addr.
  if (worker.env.world_size > 1) {
    RETURN_IF_ERROR(RequireTokenOffLoopback("ring_worker", worker.env.master_addr, !auth.token.empty(),
                                            absl::GetFlag(FLAGS_insecure)));
    if (!options.group.tcp.iface_addr.empty() && options.group.tcp.iface_addr != worker.env.master_addr) {
      RETURN_IF_ERROR(RequireTokenOffLoopback("ring_worker", options.group.tcp.iface_addr, !auth.token.empty(),
                                              absl::GetFlag(FLAGS_insecure)));
    }
  }
  if (auth.job_id.empty()) auth.job_id = absl::StrCat("psring-port-", worker.env.master_port);
  const std::string integrity = absl::GetFlag(FLAGS_data_integrity);
  if (integrity != "on" && integrity != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--data_integrity=", integrity, ": must be on or off"));
  }
  auth.data_integrity = integrity == "on";
  options.group.fingerprint = WorkerFingerprint(worker);
  ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> ring, RingExchange::Connect(worker.env, options));
  trainer::WorkerExchange made;
  // Nobody leaves while a neighbour may still be receiving from it.
  made.finish = [exchange = ring.get()] { return exchange->Barrier(); };
  made.exchange = std::move(ring);
  return made;
}

}  // namespace
}  // namespace psring::ring

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "A psring training rank whose gradients are averaged by ring allreduce (TCP ring or NCCL).\n"
      "  mpirun -np 4 bazel-bin/ring/ring_worker --epochs=1\n"
      "  bazel-bin/ring/ring_worker --rank=0 --world_size=2 --master_addr=10.0.0.1 --master_port=29500\n"
      "  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 bazel-bin/ring/ring_worker\n"
      "  PSRING_AUTH_TOKEN=$(cat secret) mpirun -x PSRING_AUTH_TOKEN -np 4 bazel-bin/ring/ring_worker\n"
      "  mpirun -np 4 bazel-bin/ring/ring_worker --model_bytes=67108864   (gradient-only mode)",
      {"common/", "trainer/", "ring/"});
  return psring::trainer::WorkerMain(argc, argv, "ring_worker", psring::ring::ConnectRing);
}
