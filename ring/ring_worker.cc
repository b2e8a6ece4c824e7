// //ring:ring_worker — one training rank whose gradients are averaged by ring allreduce (TCP ring on CPU,
// NCCL on GPU). Rank, world size and master come from flags or the launcher's environment (mpirun, Slurm,
// torchrun-style; common/cluster_env.h). Rank 0 serves the rendezvous store, prints progress and the test
// accuracy, and alone writes checkpoints. With --model_bytes=S it trains nothing and allreduces S bytes of
// checked values instead (gradient-only mode). Every rank prints one PSRING_RESULT line at the end.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/cluster_env.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "common/worker_result.h"
#include "ring/gradient_only.h"
#include "ring/ring_exchange.h"
#include "trainer/cuda_engine.h"
#include "trainer/engine.h"
#include "trainer/train.h"
#include "trainer/train_flags.h"
#include "trainer/worker_result.h"

ABSL_FLAG(
    std::string, iface_addr, "",
    "IPv4 address this rank binds its ring socket to and publishes to its neighbours (rank 0 also binds "
    "the rendezvous store there). Empty: 127.0.0.1 when the master is on loopback, else the local "
    "address that routes to --master_addr (the store then listens on every interface).");
ABSL_FLAG(
    double, timeout, 60,
    "Seconds: bound on connecting to the store and the neighbours, and on every collective. A rank that "
    "dies or stalls makes the others fail within it instead of hanging.");
ABSL_FLAG(std::string, ring_transport, "",
          "tcp (the ring over TCP, host memory) or nccl (NCCL on the GPU; needs a CUDA build and a GPU). "
          "Empty or auto: nccl when every rank trains on a GPU of its own, otherwise tcp; one decision for "
          "the whole job (rank 0's), and an error when ranks ask for different transports.");
ABSL_FLAG(
    int64_t, model_bytes, 0,
    "Gradient-only mode when > 0: no model; allreduce (average) this many bytes of float32 values "
    "f(rank, index) for --warmup_steps + --max_steps (default 10) steps and count wrong elements. 0: train "
    "the MLP.");
ABSL_FLAG(int, warmup_steps, 2, "Gradient-only mode: unmeasured steps before the measured ones (>= 0).");
ABSL_FLAG(int64_t, segment_bytes, 512 << 10,
          "TCP ring: bytes per pipelined segment (smaller: more overlap between links, more system calls).");
ABSL_FLAG(
    int, socket_buffer_bytes, 0,
    "TCP ring: SO_SNDBUF/SO_RCVBUF per connection. 0: the kernel's autotuning (grows to tcp_wmem/tcp_rmem's "
    "maximum, measured fastest on loopback); > 0: that size, capped by net.core.[rw]mem_max.");

namespace psring::ring {
namespace {

absl::Status Run() {
  ASSIGN_OR_RETURN(ClusterEnv env, ClusterEnvFromFlags());
  ASSIGN_OR_RETURN(trainer::TrainOptions train, trainer::TrainOptionsFromFlags());
  const double timeout_s = absl::GetFlag(FLAGS_timeout);
  const int64_t segment = absl::GetFlag(FLAGS_segment_bytes);
  const int64_t model_bytes = absl::GetFlag(FLAGS_model_bytes);
  if (timeout_s <= 0) return absl::InvalidArgumentError("--timeout must be > 0 seconds");
  if (segment < 8) return absl::InvalidArgumentError("--segment_bytes must be >= 8");
  if (model_bytes < 0) return absl::InvalidArgumentError("--model_bytes must be >= 0");

  // One GPU per local rank, chosen before anything creates a CUDA context (on device 0 otherwise).
  if (train.device != "cpu") RETURN_IF_ERROR(trainer::SelectCudaDevice(env.local_rank));
  RingExchangeOptions options;
  ASSIGN_OR_RETURN(options.group.transport, ParseTransport(absl::GetFlag(FLAGS_ring_transport)));
  if (train.device != "cpu") options.group.gpu = trainer::CudaDeviceIdentity();
  options.group.tcp.iface_addr = absl::GetFlag(FLAGS_iface_addr);
  options.group.tcp.timeout = absl::Seconds(timeout_s);
  options.group.tcp.socket_buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  options.group.ring.timeout = absl::Seconds(timeout_s);
  options.group.ring.segment_bytes = static_cast<size_t>(segment);
  options.store_bind_addr = options.group.tcp.iface_addr;
  ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> exchange, RingExchange::Connect(env, options));

  WorkerResult result;
  if (model_bytes > 0) {
    GradientOnlyOptions go;
    go.bytes = static_cast<size_t>(model_bytes);
    go.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
    go.steps = train.max_steps >= 0 ? static_cast<int>(train.max_steps) : 10;
    ASSIGN_OR_RETURN(GradientOnlyResult r, RunGradientOnly(go, exchange.get()));
    result.steps = r.steps;
    result.bytes = go.bytes / sizeof(float) * sizeof(float);
    result.exchange_s = r.exchange_seconds;
    result.step_s = r.step_seconds;
    result.bytes_sent = r.bytes_sent;
    result.bytes_received = r.bytes_received;
    result.wrong = r.wrong;
  } else {
    const uint64_t sent0 = exchange->group()->bytes_sent();
    const uint64_t received0 = exchange->group()->bytes_received();
    ASSIGN_OR_RETURN(trainer::TrainResult r, trainer::Train(train, exchange.get()));
    result = trainer::WorkerResultFromTraining(r);
    result.bytes_sent = exchange->group()->bytes_sent() - sent0;
    result.bytes_received = exchange->group()->bytes_received() - received0;
  }
  // Nobody leaves while a neighbour may still be receiving from it.
  RETURN_IF_ERROR(exchange->Barrier());
  result.exchange = exchange->name();
  result.rank = env.rank;
  result.world_size = env.world_size;
  std::printf("%s\n", FormatWorkerResult(result).c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::ring

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "A psring training rank whose gradients are averaged by ring allreduce (TCP ring or NCCL).\n"
      "  mpirun -np 4 bazel-bin/ring/ring_worker --epochs=1\n"
      "  bazel-bin/ring/ring_worker --rank=0 --world_size=2 --master_addr=10.0.0.1 --master_port=29500\n"
      "  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 bazel-bin/ring/ring_worker\n"
      "  mpirun -np 4 bazel-bin/ring/ring_worker --model_bytes=67108864   (gradient-only mode)",
      {"common/", "trainer/", "ring/"});
  absl::ParseCommandLine(argc, argv);
  absl::Status status = psring::ring::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "ring_worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
