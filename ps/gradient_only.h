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

// Registers `exchange` (not yet registered), runs the steps and checks the result. Blocks; every wait is
// bounded by the exchange's timeouts. Fills the fields of the worker's PSRING_RESULT line
// (common/worker_result.h): exchange, rank, world_size, steps (measured), bytes, exchange_s (sum over
// measured steps), step_s (mean per measured step), bytes_sent/received (payload during measured steps) and
// wrong (elements that differ from the closed form); compute_s and samples_per_s stay 0, test_accuracy -1.
absl::StatusOr<WorkerResult> RunGradientOnly(const GradientOnlyOptions& options, PsExchange* exchange);

}  // namespace psring::ps

#endif  // PSRING_PS_GRADIENT_ONLY_H_
