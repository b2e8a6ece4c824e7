// The server-side optimizer: SGD with momentum and weight decay, PyTorch semantics (torch.optim.SGD,
// dampening 0, no Nesterov), in float32, element-wise, in this order:
//   g = grad + weight_decay * p;   v = momentum * v + g;   p -= lr * v
// The arithmetic is exactly that of the trainer's CPU kernel (trainer::cpu::SgdMomentumUpdate);
// tests/ps/sgd_test.cc checks bit equality, so a PS step equals a local step on the same inputs. It lives
// here so the server does not link the trainer's model, BLAS and CUDA libraries.
#ifndef PSRING_PS_SGD_H_
#define PSRING_PS_SGD_H_

#include <cstddef>

namespace psring::ps {

struct SgdHyperparameters {
  float lr = 0.05f;
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
};

// Updates params[0, n) and momentum[0, n) in place from grads[0, n). Does not block or allocate; the caller
// owns the buffers, which must not overlap. Thread-compatible.
void SgdMomentumStep(const SgdHyperparameters& h, const float* grads, float* params, float* momentum, size_t n);

}  // namespace psring::ps

#endif  // PSRING_PS_SGD_H_
