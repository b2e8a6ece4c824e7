// Gradient-only mode (--model_bytes=S, see the harness contract): no model, just S bytes of float32
// "gradients" with values f(rank, index) pushed through the parameter servers for warmup + measured steps,
// then checked against the closed form of what the servers must hold.
//
// Closed form. Initial parameters p0(i) are the same on every rank; rank r's gradient is
//   sync:  g_r(i) = (r + 1) * h(i)        the servers apply SGD-momentum to mean_r g_r (summed in rank
//                                         order, divided by N: bit-identical to the server)
//   async: g_r(i) = h(i)                  each push applies SGD-momentum to g/N with weight_decay/N, so the
//                                         result does not depend on the arrival order
// After a barrier every rank pulls the parameters and counts the elements that differ from the closed form
// computed locally (exact float comparison).
#ifndef PSRING_PS_GRADIENT_ONLY_H_
#define PSRING_PS_GRADIENT_ONLY_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "common/worker_result.h"
#include "ps/client.h"

namespace psring::ps {

struct GradientOnlyOptions {
  size_t bytes = 0;  // rounded down to whole floats; at least one float per shard
  int warmup_steps = 2;
  int steps = 10;
  // Called by every rank right before its first measured step and right after its last one (benchmarks
  // snapshot server counters when all ranks got there). May be empty.
  std::function<void()> before_measured;
  std::function<void()> after_measured;
};

struct GradientOnlyResult {
  int steps = 0;                // measured steps
  double exchange_seconds = 0;  // sum over measured steps
  double step_seconds = 0;      // mean wall time per measured step
  uint64_t bytes_sent = 0;      // payload bytes during measured steps
  uint64_t bytes_received = 0;
  int64_t wrong = 0;  // elements that differ from the closed form
};

// Registers `exchange` (not yet registered), runs the steps and checks the result. Blocks; every wait is
// bounded by the exchange's timeouts.
absl::StatusOr<GradientOnlyResult> RunGradientOnly(const GradientOnlyOptions& options, PsExchange* exchange);

// RunGradientOnly, reported as the fields of the worker's PSRING_RESULT line (common/worker_result.h):
// steps, bytes, exchange_s, step_s, bytes_sent/received and wrong; compute_s and samples_per_s are 0,
// test_accuracy -1. The caller fills exchange, rank and world_size.
absl::StatusOr<WorkerResult> RunGradientOnlyForResult(const GradientOnlyOptions& options,
                                                      PsExchange* exchange);

}  // namespace psring::ps

#endif  // PSRING_PS_GRADIENT_ONLY_H_
