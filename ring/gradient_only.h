// Gradient-only mode of //ring:ring_worker (--model_bytes=S, see the harness contract): no model, S bytes of
// float32 "gradients" with values f(rank, index) averaged through the exchange for warmup + measured steps,
// each result checked against the closed form.
//
// f(r, i) = (i mod 4093) + 4096 (r + 1): integers, so every partial sum is exact in float32 whatever the
// summation order, and the average is exactly sum * (1/N) — the closed form is exact, and `wrong` counts
// elements that differ at all.
#ifndef PSRING_RING_GRADIENT_ONLY_H_
#define PSRING_RING_GRADIENT_ONLY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "ring/ring_exchange.h"

namespace psring::ring {

struct GradientOnlyOptions {
  size_t bytes = 0;  // rounded down to whole floats
  int warmup_steps = 2;
  int steps = 10;
};

struct GradientOnlyResult {
  int steps = 0;                // measured steps
  double exchange_seconds = 0;  // sum over measured steps
  double step_seconds = 0;      // mean wall time per measured step (refill and check excluded)
  uint64_t bytes_sent = 0;      // during measured steps
  uint64_t bytes_received = 0;
  int64_t wrong = 0;  // summed over measured steps
};

// The value rank `rank` contributes at `index`.
float GradientOnlyValue(int rank, size_t index);

// Blocks; bounded by the exchange's timeout. kInvalidArgument for bad options.
absl::StatusOr<GradientOnlyResult> RunGradientOnly(const GradientOnlyOptions& options,
                                                   RingExchange* exchange);

}  // namespace psring::ring

#endif  // PSRING_RING_GRADIENT_ONLY_H_
