// //ps:worker — one training rank whose gradients go through the parameter servers.
//   bazel run //ps:worker -- --servers=h1:50051,h2:50051 --rank=0 --world_size=4 [training flags]
// Rank and world size come from --rank/--world_size or from mpirun, Slurm or torchrun-style env
// (common/cluster_env.h). With --model_bytes=S it trains nothing and pushes S bytes of gradients instead
// (gradient-only mode, ps/gradient_only.h). Prints one PSRING_RESULT line at the end.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/cluster_env.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "common/worker_result.h"
#include "ps/binary_main.h"
#include "ps/client.h"
#include "ps/gradient_only.h"
#include "trainer/train.h"
#include "trainer/cuda_engine.h"
#include "trainer/train_flags.h"
#include "trainer/worker_result.h"

ABSL_FLAG(std::string, servers, "127.0.0.1:50051",
          "Comma-separated host:port of every parameter-server shard, in shard order (shard 0 first).");
ABSL_FLAG(
    double, timeout, 60,
    "Seconds: deadline of each call to a server (a step includes waiting for the other workers) and how "
    "long to keep reconnecting to a server that is down or restarting.");
ABSL_FLAG(int64_t, model_bytes, 0,
          "Gradient-only mode when > 0: no model, push-pull this many bytes of float32 values f(rank, index) "
          "for --warmup_steps + --max_steps (default 10) steps and check the result. 0: train the MLP.");
ABSL_FLAG(int, warmup_steps, 2, "Gradient-only mode: unmeasured steps before the measured ones.");
ABSL_FLAG(bool, shutdown_servers, false,
          "At the end, rank 0 (after a barrier) asks every server to checkpoint and exit.");
ABSL_FLAG(std::string, auth_token, "",
          "Shared secret sent as x-psring-token metadata (the servers' --auth_token).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM root certificate to verify the servers' TLS certificates. Empty: plaintext.");
ABSL_FLAG(std::string, tls_target_name, "",
          "Name to check the servers' certificate against instead of the host in --servers.");
ABSL_FLAG(int64_t, chunk_bytes, 1 << 20,
          "Bytes per gradient chunk on the wire (4 .. 4194304). On links of 1 Gbit/s or less use 32768 here "
          "and on the servers (a step pays about 2 * workers * chunk / link rate to fill and drain).");
ABSL_FLAG(int64_t, push_window_bytes, 1 << 20,
          "Synchronous servers: push at most this many bytes ahead of the updated parameters received back, so "
          "no worker runs far ahead of the slowest and the server link is shared fairly whatever TCP and gRPC "
          "buffer. Raised to at least one chunk of ours plus one reply range of the server's. 0: no window. On "
          "links of 1 Gbit/s or less use 131072: N workers keep up to N windows in flight into one server link, "
          "and more than its queue holds costs tail drops and retransmission timeouts (bench/PERFORMANCE.md "
          "7.1).");

ABSL_FLAG(int64_t, receive_window_bytes, 0,
          "HTTP/2 receive window per server connection (bytes, 16384 .. 1073741823), with gRPC's BDP probing "
          "off: at most this much of this worker's replies is queued for it in the server, which keeps the push "
          "window's loop tight on a slow shared link. Must cover the link's bandwidth-delay product. 0: gRPC's "
          "adaptive window.");

namespace psring::ps {
namespace {

// Runs the job; returns this rank's PSRING_RESULT fields.
absl::StatusOr<WorkerResult> Run() {
  ASSIGN_OR_RETURN(ClusterEnv env, ClusterEnvFromFlags());
  ASSIGN_OR_RETURN(trainer::TrainOptions train, trainer::TrainOptionsFromFlags());
  // One GPU per local rank, chosen before anything creates a CUDA context (on device 0 otherwise).
  if (train.device != "cpu") RETURN_IF_ERROR(trainer::SelectCudaDevice(env.local_rank));
  PsClientOptions options;
  ASSIGN_OR_RETURN(options.servers, ParseServerList(absl::GetFlag(FLAGS_servers)));
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.hyperparameters = {train.lr, train.momentum, train.weight_decay};
  if (absl::GetFlag(FLAGS_timeout) <= 0) return absl::InvalidArgumentError("--timeout must be > 0");
  options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  options.reconnect_timeout = options.timeout;
  if (absl::GetFlag(FLAGS_chunk_bytes) <= 0) return absl::InvalidArgumentError("--chunk_bytes must be > 0");
  options.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_bytes));
  if (absl::GetFlag(FLAGS_push_window_bytes) < 0) {
    return absl::InvalidArgumentError("--push_window_bytes must be >= 0 (0: no window)");
  }
  options.push_window_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_push_window_bytes));
  const int64_t receive_window = absl::GetFlag(FLAGS_receive_window_bytes);
  if (receive_window < 0) return absl::InvalidArgumentError("--receive_window_bytes must be >= 0");
  options.receive_window_bytes = static_cast<size_t>(receive_window);
  options.auth_token = absl::GetFlag(FLAGS_auth_token);
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_target_name = absl::GetFlag(FLAGS_tls_target_name);
  ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> exchange, PsExchange::Create(options));

  const int64_t model_bytes = absl::GetFlag(FLAGS_model_bytes);
  if (model_bytes < 0) return absl::InvalidArgumentError("--model_bytes must be >= 0");
  WorkerResult result;
  if (model_bytes > 0) {
    GradientOnlyOptions go;
    go.bytes = static_cast<size_t>(model_bytes);
    go.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
    go.steps = train.max_steps >= 0 ? static_cast<int>(train.max_steps) : 10;
    ASSIGN_OR_RETURN(result, RunGradientOnly(go, exchange.get()));
  } else {
    ASSIGN_OR_RETURN(trainer::TrainResult r, trainer::Train(train, exchange.get()));
    result = trainer::WorkerResultFromTraining(r);
    result.bytes_sent = exchange->bytes_sent();
    result.bytes_received = exchange->bytes_received();
  }
  if (absl::GetFlag(FLAGS_shutdown_servers)) {
    RETURN_IF_ERROR(exchange->Barrier());
    if (env.rank == 0) RETURN_IF_ERROR(exchange->ShutdownServers());
  }
  result.exchange = exchange->name();
  result.rank = env.rank;
  result.world_size = env.world_size;
  return result;
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
  return psring::ps::RunMain(argc, argv, "ps worker", [](const std::vector<std::string>&) -> absl::Status {
    ASSIGN_OR_RETURN(const psring::WorkerResult result, psring::ps::Run());
    std::printf("%s\n", psring::FormatWorkerResult(result).c_str());
    return absl::OkStatus();
  });
}
