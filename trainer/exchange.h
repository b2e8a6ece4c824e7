// GradientExchange: the one seam between the trainer and the way gradients cross the network.
//
// The trainer never knows which exchange it has: the ring (ring/), the parameter server (ps/) or the local
// no-op (world size 1). A factory in each binary picks one from --exchange.
//
//   std::unique_ptr<GradientExchange> ex = ...;           // ring, ps or LocalExchange
//   RETURN_IF_ERROR(ex->SyncInitialParameters(params));   // every rank starts from the same weights
//   const bool trainer_steps = ex->optimizer().owner == OptimizerOwner::kTrainer;
//   for (int64_t step = 0; ...; ++step) {
//     ... forward/backward into grads ...
//     RETURN_IF_ERROR(ex->Exchange(step, grads, params).status());
//     if (trainer_steps) optimizer.Step(params, grads);    // else the servers did, params are new
//   }
#ifndef PSRING_TRAINER_EXCHANGE_H_
#define PSRING_TRAINER_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "trainer/optimizer.h"

namespace psring::trainer {

// Where a buffer lives.
enum class MemoryKind { kHost, kCuda };

// A flat float32 buffer the caller owns; the exchange reads/writes it only during a call.
struct FloatBuffer {
  float* data = nullptr;
  size_t count = 0;
  MemoryKind memory = MemoryKind::kHost;
  size_t bytes() const { return count * sizeof(float); }
};

// What Exchange() did with the buffers: always kGradientsAveraged when the trainer owns the optimizer and
// kParametersUpdated when a server does (see OptimizerOwner).
enum class ExchangeOutcome {
  // `grads` now holds the mean of all ranks' gradients; the trainer applies its optimizer.
  kGradientsAveraged,
  // `params` now holds new parameters computed remotely (the PS applies the optimizer server-side).
  kParametersUpdated,
};

// Who applies the optimizer step, and so who holds its state (the momentum buffer).
enum class OptimizerOwner {
  // Exchange() averages the gradients; every rank steps its own copy of the optimizer (ring, local). The
  // trainer's checkpoint holds the whole state.
  kTrainer,
  // Exchange() sends the gradient to servers that step the optimizer and return the new parameters (PS).
  // The momentum never reaches the trainer: only the servers can checkpoint and resume it.
  kServer,
};

// How servers that own the optimizer turn the ranks' pushes into optimizer steps.
enum class ServerUpdate {
  // One step per training step on the mean of the N pushes (summed in rank order, then divided by N).
  kMeanPerStep,
  // One step per push, in arrival order, on gradient / N with weight_decay / N (bounded-staleness async).
  kEachPush,
};

struct OptimizerInfo {
  OptimizerOwner owner = OptimizerOwner::kTrainer;
  // kServer only: the update rule and the hyperparameters the servers apply.
  ServerUpdate server_update = ServerUpdate::kMeanPerStep;
  SgdOptions server_hyperparameters;
};

// Interface implemented by every exchange. All calls block until done, fail or time out (each
// implementation takes its timeout in its options). Not thread-safe: one training thread calls it.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // Short name for logs and tables: "local", "ring-tcp", "ring-nccl", "ps-sync", "ps-async". Only for people
  // to read: what the caller must do differently follows from optimizer(), never from the name.
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // True when the buffers may live in CUDA memory (NCCL). When false the trainer stages through host memory.
  virtual bool AcceptsDeviceMemory() const { return false; }

  // Who owns the optimizer, and for servers how they apply pushes. The owner is fixed at construction; a
  // PS learns the update rule from the servers, so server_update is final only after SyncInitialParameters.
  virtual OptimizerInfo optimizer() const = 0;

  // Payload bytes this rank sent / received over the network since the exchange was created (0 when nothing
  // crosses a network). Callers take differences around the steps they measure.
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;

  // Makes `params` identical on every rank before training (ring: rank 0's values, as DDP broadcasts;
  // PS: the server's, which it takes from the first worker that registers or from its checkpoint).
  virtual absl::Status SyncInitialParameters(FloatBuffer params) = 0;

  // One synchronous (or bounded-stale) step. `grads` is this rank's gradient, the mean over its local batch.
  // `step` counts from 0 and is identical on every rank. See ExchangeOutcome for what it leaves behind.
  virtual absl::StatusOr<ExchangeOutcome> Exchange(int64_t step, FloatBuffer grads, FloatBuffer params) = 0;

  // Replaces each host value with its mean across ranks (loss, accuracy, sample counts).
  virtual absl::Status AverageMetrics(absl::Span<double> values) = 0;

  // Returns when every rank has called Barrier().
  virtual absl::Status Barrier() = 0;

  // Server-owned optimizer: overwrites `params` with the servers' current parameters without pushing (e.g.
  // after a Barrier, to read the result of every rank's pushes). kFailedPrecondition when the trainer owns
  // the optimizer: the parameters then live in the trainer, not behind the exchange.
  virtual absl::Status PullParameters(FloatBuffer params) {
    return absl::FailedPreconditionError(
        absl::StrCat("exchange ", name(), " keeps no parameters (the trainer owns the optimizer)"));
  }
};

// World size 1: nothing crosses a network. Used by //trainer:train.
class LocalExchange final : public GradientExchange {
 public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  bool AcceptsDeviceMemory() const override { return true; }
  OptimizerInfo optimizer() const override { return OptimizerInfo{OptimizerOwner::kTrainer}; }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }
  absl::Status SyncInitialParameters(FloatBuffer) override { return absl::OkStatus(); }
  absl::StatusOr<ExchangeOutcome> Exchange(int64_t, FloatBuffer, FloatBuffer) override {
    return ExchangeOutcome::kGradientsAveraged;
  }
  absl::Status AverageMetrics(absl::Span<double>) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_EXCHANGE_H_
