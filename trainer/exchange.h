// GradientExchange: the one seam between the trainer and the way gradients cross the network.
//
// The trainer never knows which exchange it has: the ring (ring/), the parameter server (ps/) or the local
// no-op (world size 1). A factory in each binary picks one from --exchange.
//
//   std::unique_ptr<GradientExchange> ex = ...;           // ring, ps or LocalExchange
//   RETURN_IF_ERROR(ex->SyncInitialParameters(params));   // every rank starts from the same weights
//   for (int64_t step = 0; ...; ++step) {
//     ... forward/backward into grads ...
//     ASSIGN_OR_RETURN(ExchangeOutcome out, ex->Exchange(step, grads, params));
//     if (out == ExchangeOutcome::kGradientsAveraged) optimizer.Step(params, grads);
//   }
#ifndef PSRING_TRAINER_EXCHANGE_H_
#define PSRING_TRAINER_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

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

// What Exchange() did with the buffers.
enum class ExchangeOutcome {
  // `grads` now holds the mean of all ranks' gradients; the trainer applies its optimizer.
  kGradientsAveraged,
  // `params` now holds new parameters computed remotely (the PS applies the optimizer server-side).
  kParametersUpdated,
};

// Interface implemented by every exchange. All calls block until done, fail or time out (each
// implementation takes its timeout in its options). Not thread-safe: one training thread calls it.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // Short name for logs and tables: "local", "ring-tcp", "ring-nccl", "ps-sync", "ps-async".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // True when the buffers may live in CUDA memory (NCCL). When false the trainer stages through host memory.
  virtual bool AcceptsDeviceMemory() const { return false; }

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
};

// World size 1: nothing crosses a network. Used by //trainer:train.
class LocalExchange final : public GradientExchange {
 public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  bool AcceptsDeviceMemory() const override { return true; }
  absl::Status SyncInitialParameters(FloatBuffer) override { return absl::OkStatus(); }
  absl::StatusOr<ExchangeOutcome> Exchange(int64_t, FloatBuffer, FloatBuffer) override {
    return ExchangeOutcome::kGradientsAveraged;
  }
  absl::Status AverageMetrics(absl::Span<double>) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_EXCHANGE_H_
