// SGD with momentum and weight decay, PyTorch semantics (torch.optim.SGD, dampening 0, no Nesterov):
//   g += weight_decay * p;   v = momentum * v + g;   p -= lr * v
// in float32, element-wise, in that order. The one host implementation: the trainer's CPU path and the
// parameter server both call it, so a PS step is bit-identical to a local step on the same inputs.
// (The CUDA kernel in trainer/ performs the same arithmetic on the device.)
#ifndef PSRING_TRAINER_OPTIMIZER_H_
#define PSRING_TRAINER_OPTIMIZER_H_

#include <cstddef>

namespace psring::trainer {

// Defaults are the training defaults (TrainOptions in trainer/train.h).
struct SgdOptions {
  float lr = 0.03f;
  float momentum = 0.9f;
  float weight_decay = 1e-4f;
};

// Updates params[0, n) and momentum[0, n) in place from grads[0, n). Does not block or allocate; the caller
// owns all three buffers, which must not overlap. Thread-compatible (disjoint ranges may run in parallel).
void SgdMomentumStep(const SgdOptions& opt, const float* grads, float* params, float* momentum, size_t n);

// The same step out of place: reads params_in and momentum_in, writes params_out and momentum_out (the same
// float operations in the same order, so bit-identical to SgdMomentumStep on copies). No two of the six
// buffers may overlap. The parameter server applies a step this way, keeping the old version intact.
void SgdMomentumStepInto(const SgdOptions& opt, const float* grads, const float* params_in,
                         const float* momentum_in, float* params_out, float* momentum_out, size_t n);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_OPTIMIZER_H_
