// The arithmetic of a parameter-server update on one shard's parameters and momentum. Both modes call the
// trainer's own element-wise SgdMomentumStep (trainer/optimizer.h), so a server step is bit-identical to a
// local step on the same inputs:
//   sync:  g = (g_0 + g_1 + ... + g_{N-1}) / N, summed in rank order whatever the arrival order;
//          p, v <- SgdMomentumStep(lr, momentum, weight_decay; g, p, v)
//   async: p, v <- SgdMomentumStep(lr, momentum, weight_decay / N; g_r / N, p, v) for one push g_r, so one
//          round of N pushes moves the parameters about as far as one synchronous step in the long run.
// Large ranges are split over up to 4 threads; the work is element-wise, so the result depends neither on
// the split nor on how a step is cut into ranges.
#ifndef PSRING_PS_SHARD_UPDATE_H_
#define PSRING_PS_SHARD_UPDATE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "trainer/optimizer.h"

namespace psring::ps {

// A shard's optimizer state: parameters and SGD velocity, same length.
struct ShardTensors {
  std::vector<float> params;
  std::vector<float> momentum;
};

// Applies the synchronous step to elements [begin, end), out of place: reads the parameters and momentum
// of `current` and writes the updated ones into `next` (same length), leaving `current` as it was, so a
// step that is dropped costs nothing to roll back and the last complete version stays readable while the
// step is applied. grads[r] is rank r's gradient for the whole shard; grads[0][begin, end) is overwritten
// with the mean. Returns the first element of [begin, end) whose new parameter or momentum is not finite
// (finite gradients can still overflow: near FLT_MAX with a large lr), `end` when all are; the caller must
// then drop the step. Blocks until done. The caller owns every buffer and must keep other threads off
// `next` and the gradients meanwhile (readers of `current` may go on).
uint64_t ApplyMeanStep(const trainer::SgdOptions& hyperparameters, absl::Span<float* const> grads,
                       uint64_t begin, uint64_t end, const ShardTensors& current, ShardTensors* next);

// Applies one asynchronous push of one of `workers` ranks to the whole shard; `gradient` (the shard's
// length) is overwritten with gradient / workers. All or nothing: when some new parameter or momentum
// would not be finite, nothing changes and that element is returned; the shard's length when applied.
// Blocks until done; same ownership rules.
uint64_t ApplyAsyncStep(const trainer::SgdOptions& hyperparameters, int workers, absl::Span<float> gradient,
                        ShardTensors* tensors);

// The sum of the squares of data[0, count), in double (the norm bound on pushed gradients, --max_grad_norm).
double SumOfSquares(const float* data, uint64_t count);

}  // namespace psring::ps

#endif  // PSRING_PS_SHARD_UPDATE_H_
